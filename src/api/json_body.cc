#include "api/json_body.h"

#include "api/errors.h"

namespace kiln::api {

using nlohmann::json;

json ParseJsonBody(const std::string& body) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return json::object();
  // nlohmann passes the number of arrays/objects already open, so the
  // outermost one starts at depth 0. Throwing stops the parse right there,
  // before a hostile body builds anything deeper.
  json::parser_callback_t limit_depth = [](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth) {
      throw InvalidField("body", "is nested more than " + std::to_string(kMaxJsonDepth) + " deep");
    }
    return true;
  };
  json j = json::parse(body, limit_depth, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw InvalidField("body", "is not valid JSON");
  return j;
}

}  // namespace kiln::api
