#include "api/json_body.h"

#include "api/errors.h"
#include "common/json_bounded.h"

namespace kiln::api {

using nlohmann::json;

json ParseJsonBody(const std::string& body) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return json::object();
  std::string why;
  std::optional<json> j = ParseJsonBounded(body, &why, kMaxJsonDepth);
  if (!j) throw InvalidField("body", why);
  return std::move(*j);
}

}  // namespace kiln::api
