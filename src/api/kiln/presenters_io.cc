// kiln's presenters (presenters.h) for I/O into a sandbox: files,
// processes, exec, watches, the interpreter, the terminal's tickets.
#include "api/kiln/presenters.h"

#include "api/utf8.h"
#include "common/base64.h"
#include "common/time.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

json ExitStatusJson(const io::ExitStatus& exit) {
  return json{{"exitCode", OrNull(exit.exit_code)},
              {"signal", OrNull(exit.signal)},
              {"timedOut", exit.timed_out},
              {"durationMs", exit.duration_ms}};
}

json WatchOverflowJson(const io::WatchPage& page) {
  return json{{"k", "overflow"}, {"dropped", page.dropped}, {"reason", "rate"}};
}

}  // namespace

// ---- Files ----

json FileEntryJson(const io::FileEntry& e) {
  json j{{"name", e.name}, {"path", e.path}, {"type", io::TypeName(e.type)},
         {"size", e.size}, {"mode", e.mode}, {"modifiedAt", FormatTime(e.modified_ms)},
         {"uid", e.uid},   {"gid", e.gid}};
  if (e.symlink_target) j["symlinkTarget"] = *e.symlink_target;
  return j;
}

json FileStatJson(const io::FileStat& stat) {
  json j = stat.exists ? FileEntryJson(stat.entry) : json{{"path", stat.entry.path}};
  j["exists"] = stat.exists;
  return j;
}

json FileListJson(json entries, std::optional<bool> truncated) {
  json answer{{"data", std::move(entries)}};
  if (truncated) answer["truncated"] = *truncated;
  return answer;
}

json FileWrittenJson(const std::string& path, uint64_t size) {
  return json{{"path", path}, {"size", size}};
}

json ArchiveUnpackedJson(const std::string& path, uint64_t bytes) {
  return json{{"path", path}, {"bytes", bytes}};
}

// ---- Processes and exec ----

json ProcessJson(const io::ProcessInfo& p) {
  return json{{"id", p.id},
              {"kind", "process"},
              {"pid", p.pid},
              {"state", io::StateName(p.state)},
              {"exitCode", OrNull(p.exit_code)},
              {"signal", OrNull(p.signal)},
              {"command", p.command},
              {"argv", p.argv},
              {"cwd", p.cwd},
              {"stdinOpen", p.stdin_open},
              {"stdinOffset", p.stdin_offset},
              {"timeoutMs", p.timeout_ms},
              {"startedAt", FormatTime(p.started_ms)},
              {"endedAt", p.ended_ms ? json(FormatTime(*p.ended_ms)) : json(nullptr)},
              {"outputBytes", p.output_bytes},
              {"firstOffset", p.first_offset},
              {"pty", p.pty ? json{{"cols", p.pty->cols}, {"rows", p.pty->rows}} : json(nullptr)}};
}

json OutputPageJson(const io::OutputPage& page) {
  json chunks = json::array();
  for (const auto& c : page.chunks)
    chunks.push_back(json{{"offset", c.offset},
                          {"stream", io::StreamName(c.stream)},
                          {"data", SanitizeUtf8(c.data)}});
  return json{{"chunks", chunks},
              {"nextCursor", page.next_cursor},
              {"firstOffset", page.first_offset},
              {"droppedBytes", page.dropped_bytes},
              {"complete", page.complete},
              {"state", io::StateName(page.process.state)}};
}

json OutputEventJson(io::OutputStream stream, uint64_t offset, std::string_view data) {
  return json{{"type", io::StreamName(stream)}, {"offset", offset}, {"data", SanitizeUtf8(data)}};
}

json OutputDroppedEventJson(const io::OutputPage& page) {
  return json{
      {"type", "truncated"}, {"droppedBytes", page.dropped_bytes}, {"resumeAt", page.first_offset}};
}

json ProcessExitEventJson(const io::ProcessInfo& p) {
  return json{{"type", "exit"},
              {"exitCode", OrNull(p.exit_code)},
              {"signal", OrNull(p.signal)},
              {"state", io::StateName(p.state)},
              {"timedOut", p.state == io::ProcessState::kTimedOut}};
}

json ExecResultJson(const io::ExecResult& run) {
  json result = ExitStatusJson(run.exit);
  result["stdout"] = SanitizeUtf8(run.stdout_data);
  result["stderr"] = SanitizeUtf8(run.stderr_data);
  result["stdoutTruncated"] = run.stdout_truncated;
  result["stderrTruncated"] = run.stderr_truncated;
  result["processId"] = run.pid ? std::to_string(*run.pid) : "";
  return result;
}

json ExecStartEventJson(const std::string& process_id) {
  return json{{"type", "start"}, {"processId", process_id}};
}

json ExecExitEventJson(const io::ExitStatus& exit) {
  json event = ExitStatusJson(exit);
  event["type"] = "exit";
  event["state"] = exit.timed_out ? "timed_out" : !exit.exit_code ? "killed" : "exited";
  return event;
}

// The payload is spliced into the serialized envelope: base64 needs no
// escaping, and running a 64 KiB chunk through the serializer's
// character-by-character escaping took most of kilnd's CPU when streaming.
std::string Base64OutputEventLine(io::OutputStream stream, uint64_t offset, std::string_view data) {
  json ev{{"type", io::StreamName(stream)}, {"offset", offset}, {"base64", true}, {"data", ""}};
  std::string line = ev.dump();
  line.insert(line.find("\"data\":\"\"") + 8, Base64Encode(data));
  line += '\n';
  return line;
}

// ---- Watches ----

json WatchJson(const io::WatchInfo& w) {
  const io::WatchSpec& spec = w.spec;
  return json{{"id", spec.id},
              {"path", spec.path},
              {"recursive", spec.recursive},
              {"events", spec.events},
              {"include", spec.include},
              {"exclude", spec.exclude},
              {"batchMs", spec.batch_ms},
              {"timeoutMs", spec.timeout_ms},
              {"maxWatches", spec.max_watches},
              {"watchedDirs", w.watched},
              {"cursor", w.cursor},
              {"firstCursor", w.first_cursor},
              {"state", w.running ? "running" : "ended"},
              {"endReason", w.end_reason ? json(*w.end_reason) : json(nullptr)},
              {"startedAt", FormatTime(w.started_ms)},
              {"endedAt", w.ended_ms ? json(FormatTime(*w.ended_ms)) : json(nullptr)}};
}

json WatchEventJson(const io::WatchEvent& e) {
  json j{{"type", e.type}, {"path", e.path}, {"isDir", e.is_dir}};
  if (e.old_path) j["oldPath"] = *e.old_path;
  if (e.count > 1) j["count"] = e.count;
  return j;
}

json WatchNoticeJson(const io::WatchNotice& n) {
  json j{{"k", n.kind}};
  if (n.kind == "overflow") {
    j["dropped"] = n.dropped;
    j["reason"] = n.reason;
  } else if (n.kind == "limit") {
    j["watches"] = n.watches;
  } else if (!n.reason.empty()) {
    j["reason"] = n.reason;
  }
  return j;
}

json WatchPollJson(const io::WatchPage& page) {
  json events = json::array(), notices = json::array();
  if (page.dropped > 0) notices.push_back(WatchOverflowJson(page));
  for (const auto& item : page.items) {
    if (item.event) events.push_back(WatchEventJson(*item.event));
    if (item.notice) notices.push_back(WatchNoticeJson(*item.notice));
  }
  return json{{"events", events}, {"notices", notices},  {"nextCursor", page.next_cursor},
              {"lostBytes", 0},   {"ended", page.ended}, {"watch", WatchJson(page.watch)}};
}

std::vector<json> WatchFollowLines(const io::WatchPage& page) {
  std::vector<json> lines;
  if (page.dropped > 0) lines.push_back(WatchOverflowJson(page));
  json events = json::array();
  uint64_t after = 0;
  auto flush = [&] {
    if (events.empty()) return;
    lines.push_back(json{{"k", "events"}, {"events", std::move(events)}, {"cursor", after}});
    events = json::array();
  };
  for (const auto& item : page.items) {
    after = item.seq + 1;
    if (item.event) {
      events.push_back(WatchEventJson(*item.event));
    } else if (item.notice) {
      flush();
      json line = WatchNoticeJson(*item.notice);
      line["cursor"] = after;
      lines.push_back(std::move(line));
    }
  }
  flush();
  return lines;
}

json WatchPausedJson(uint64_t cursor) { return json{{"k", "paused"}, {"cursor", cursor}}; }

json WatchGoneJson(uint64_t cursor) {
  return json{{"k", "end"}, {"reason", "gone"}, {"cursor", cursor}};
}

json WatchContinueJson(uint64_t cursor) { return json{{"k", "continue"}, {"cursor", cursor}}; }

json WatchPausedPollJson(uint64_t cursor) {
  return json{{"events", json::array()},
              {"notices", json::array({WatchPausedJson(cursor)})},
              {"nextCursor", cursor},
              {"lostBytes", 0},
              {"ended", false}};
}

// ---- The interpreter and the terminal ----

json InterpreterContextJson(const interpreter::ContextInfo& c) {
  return json{{"id", c.id},
              {"language", interpreter::LanguageName(c.language)},
              {"cwd", c.cwd},
              {"state", c.state},
              {"executionCount", OrNull(c.execution_count)},
              {"createdAt", FormatTime(c.created_ms)},
              {"pid", c.pid ? json(c.pid) : json(nullptr)},
              {"processId", c.process_id}};
}

json ExecutionJson(const interpreter::Execution& e) {
  return json{{"id", e.id},
              {"contextId", e.context_id},
              {"language", interpreter::LanguageName(e.language)},
              {"executionCount", e.execution_count},
              {"status", e.status},
              {"stdout", e.stdout_text},
              {"stderr", e.stderr_text},
              {"results", e.results},
              {"error", e.error},
              {"overflow", e.overflow},
              {"durationMs", e.duration_ms},
              {"contextStarted", e.context_started},
              {"lostBytes", e.lost_bytes}};
}

json ExecutionEventJson(const interpreter::Execution& e) {
  return json{{"k", "execution"}, {"execution", ExecutionJson(e)}};
}

json TerminalTicketJson(const TerminalTickets::Ticket& ticket, const std::string& sandbox_id) {
  return json{{"ticket", ticket.token},
              {"sandboxId", sandbox_id},
              {"expiresAt", FormatTime(ticket.expires_at_ms)}};
}

}  // namespace kiln::api::v1
