#include "engine/agent_answer.h"

namespace kiln::engine {

using nlohmann::json;

Status StatusFromAgentError(const json& answer) {
  auto e = answer.get<proto::AgentError>();  // any shape decodes
  json details = e.path ? json{{"path", *e.path}} : json(nullptr);
  return Status(CodeFromName(e.code).value_or(Code::kInternal), std::move(e.message),
                std::move(details));
}

proto::AgentError AgentErrorFromStatus(const Status& status) {
  proto::AgentError e;
  e.code = std::string(CodeName(status.code()));
  e.message = status.message();
  const json& d = status.details();
  if (d.is_object() && d.contains("path") && d["path"].is_string())
    e.path = d["path"].get<std::string>();
  return e;
}

Status MalformedAnswer(const std::string& why) {
  return Status(Code::kInternal, "the sandbox's agent sent a malformed answer: " + why);
}

}  // namespace kiln::engine
