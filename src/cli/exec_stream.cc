#include "cli/exec_stream.h"

#include <csignal>

#include "cli/errors.h"
#include "cli/exit_status.h"
#include "cli/json_util.h"
#include "cli/output.h"
#include "common/base64.h"

namespace kiln::cli {

using json = nlohmann::json;

void ExecStreamPrinter::OnEvent(const json& event) {
  const std::string type = StringField(event, "type");
  if (type == "start") {
    if (auto it = event.find("processId"); it != event.end() && !it->is_null()) {
      process_id_ = it->is_string() ? it->get<std::string>() : it->dump();
    }
  } else if (type == "stdout" || type == "stderr") {
    std::string data = StringField(event, "data");
    if (BoolField(event, "base64")) {
      auto decoded = Base64Decode(data);
      if (!decoded) throw ClientError("bad_response", "the daemon sent output that is not base64");
      data = std::move(*decoded);
      // Offsets count raw bytes, so they only line up with decoded data.
      if (auto offset = IntField(event, "offset"); offset && *offset >= 0) {
        auto at = static_cast<std::uint64_t>(*offset);
        if (at > next_offset_) {
          Warn(std::to_string(at - next_offset_) + " bytes of the command's output were lost");
        }
        next_offset_ = at + data.size();
      }
    }
    if (!WriteAll(type == "stdout" ? out_fd_ : err_fd_, data)) throw Interrupted(SIGPIPE);
  } else if (type == "truncated") {
    auto dropped = IntField(event, "droppedBytes");
    Warn((dropped ? std::to_string(*dropped) : std::string("some")) +
         " bytes of the command's output were dropped");
  } else if (type == "exit") {
    exit_ = event;
  } else if (type == "error") {
    error_ = event.contains("error") ? event["error"] : json::object();
  }
  // Other types are newer than this client; skipping them is safe.
}

int ExecStreamPrinter::Finish() const {
  if (error_) {
    std::string code = StringField(*error_, "code", "exec_failed");
    std::string message = StringField(*error_, "message", "the command failed");
    throw ApiError(200, code, message, json{{"error", *error_}});
  }
  if (!exit_) {
    throw ClientError("connection_lost",
                      "the command's output stream ended before its exit status arrived");
  }
  return ExitCodeFor(*exit_);
}

}  // namespace kiln::cli
