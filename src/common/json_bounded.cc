#include "common/json_bounded.h"

namespace kiln {

namespace {
struct TooDeep {};
}  // namespace

std::optional<nlohmann::json> ParseJsonBounded(std::string_view text, std::string* why,
                                               int max_depth) {
  using nlohmann::json;
  // nlohmann passes the number of arrays/objects already open, so the
  // outermost one starts at depth 0. Throwing stops the parse right there.
  json::parser_callback_t limit = [max_depth](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= max_depth)
      throw TooDeep{};
    return true;
  };
  try {
    json j = json::parse(text, limit, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      if (why) *why = "is not valid JSON";
      return std::nullopt;
    }
    return j;
  } catch (const TooDeep&) {
    if (why) *why = "is nested more than " + std::to_string(max_depth) + " deep";
    return std::nullopt;
  }
}

}  // namespace kiln
