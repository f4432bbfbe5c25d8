// E2B's shapes of kiln's image builds: TemplateBuildInfo (a build's
// status, its log entries and why it failed) and BuildLogEntry.
#include <algorithm>

#include "api/e2b/e2b.h"
#include "api/e2b/templates.h"
#include "common/time.h"

namespace kiln::api::e2b {

using nlohmann::json;

namespace template_presenters {
namespace {

// E2B's four statuses for kiln's image states: a build waits until a
// worker takes it, and is ready once its warm copy is.
std::string StatusName(images::ImageState state) {
  switch (state) {
    case images::ImageState::kQueued:
      return "waiting";
    case images::ImageState::kBuilding:
      return "building";
    case images::ImageState::kReady:
      return "ready";
    default:
      return "error";
  }
}

// Why `record` failed, with the E2B step it failed in: a step's number,
// "base" for the image and E2B's provisioning, "finalize" for the start
// and ready commands.
json ReasonJson(const images::ImageRecord& record) {
  const json& error = record.error;
  std::string message = error.is_object() ? error.value("message", std::string("build failed"))
                                          : std::string("build failed");
  std::string step = "finalize";
  if (error.is_object() && error.contains("step") && error["step"].is_number_integer())
    step = E2bStepOf(error["step"].get<int>(), record.step_names);
  else if (record.state == images::ImageState::kDeleted ||
           record.state == images::ImageState::kDeleting)
    message = "the template was deleted";
  // A failed step in E2B's numbering (kiln's says its Dockerfile line).
  if (error.is_object() && error.value("code", "") == "step_failed" && error.contains("exitCode") &&
      error.contains("instruction"))
    message = (step == "base" ? std::string("the base image's set-up") : "step " + step) + " (" +
              error.value("instruction", std::string()) + ") failed with exit code " +
              error["exitCode"].dump();
  json reason{{"message", message}, {"step", step}};
  json entries = json::array();
  if (error.is_object() && error.contains("logTail") && error["logTail"].is_array()) {
    for (const auto& line : error["logTail"])
      if (line.is_string())
        entries.push_back({{"timestamp", FormatTime(record.ended_ms)},
                           {"level", "error"},
                           {"message", line.get<std::string>()},
                           {"step", step}});
  }
  if (!entries.empty()) reason["logEntries"] = entries;
  return reason;
}

}  // namespace
}  // namespace template_presenters

json LogEntryJson(const images::LogLine& line, const std::vector<std::string>& step_names) {
  json entry{{"timestamp", FormatTime(line.time_ms)},
             {"level", line.stream == "stderr" ? "warn" : "info"},
             {"message", line.text}};
  if (line.step) entry["step"] = E2bStepOf(*line.step, step_names);
  return entry;
}

json BuildStatusJson(const images::ImageRecord& record, const images::LogPage& page) {
  json entries = json::array();
  for (const auto& line : page.lines) entries.push_back(LogEntryJson(line, record.step_names));
  json status{{"templateID", record.name},
              {"buildID", record.id},
              {"status", template_presenters::StatusName(record.state)},
              {"logs", json::array()},
              {"logEntries", entries}};
  if (status["status"] == "error") status["reason"] = template_presenters::ReasonJson(record);
  return status;
}

json TemplateBuildJson(const images::ImageRecord& record) {
  Shape shape = record.shape.value_or(Shape{});
  int64_t updated = std::max({record.created_ms, record.started_ms, record.ended_ms});
  json b{{"buildID", record.id},
         {"status", template_presenters::StatusName(record.state)},
         {"createdAt", FormatTime(record.created_ms)},
         {"updatedAt", FormatTime(updated)},
         {"cpuCount", shape.vcpu},
         {"memoryMB", shape.memory_mib},
         {"diskSizeMB", shape.disk_mib},
         {"envdVersion", kEnvdVersion}};
  if (record.ended_ms) b["finishedAt"] = FormatTime(record.ended_ms);
  return b;
}

json WaitingStatusJson(const std::string& template_id, const std::string& build_id) {
  return json{{"templateID", template_id},
              {"buildID", build_id},
              {"status", "waiting"},
              {"logs", json::array()},
              {"logEntries", json::array()}};
}

}  // namespace kiln::api::e2b
