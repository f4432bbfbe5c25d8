#include "proto/ops.h"

#include "common/base64.h"
#include "proto/ops_fields.h"

namespace kiln::proto {

using nlohmann::json;

// ---- Errors ----

void to_json(json& j, const AgentError& v) {
  json e{{"code", v.code}, {"message", v.message}};
  PutIf(e, "path", v.path);
  j = json{{"error", e}};
}

void from_json(const json& j, AgentError& v) {
  // The agent runs in the sandbox: any shape decodes, to the defaults. The
  // bare {code, message} object is accepted too.
  v = AgentError();
  const json& e = IsError(j) ? j["error"] : j;
  if (!e.is_object()) return;
  auto text = [&](const char* key, std::string* out) {
    auto it = e.find(key);
    if (it != e.end() && it->is_string()) *out = it->get<std::string>();
  };
  text("code", &v.code);
  text("message", &v.message);
  if (auto it = e.find("path"); it != e.end() && it->is_string()) v.path = it->get<std::string>();
}

bool IsError(const json& answer) { return answer.is_object() && answer.contains("error"); }

// ---- Commands ----

void to_json(json& j, const ExecRequest& v) {
  j = RequestObject(v.kOp);
  PutCommand(j, v);
  j["timeoutMs"] = v.timeout_ms;
  j["stdin"] = v.stdin_data;
  j["captureLimit"] = v.capture_limit;
  j["killPastLimit"] = v.kill_past_limit;
}
void from_json(const json& j, ExecRequest& v) {
  TakeCommand(j, v);
  Take(j, "timeoutMs", v.timeout_ms);
  Take(j, "stdin", v.stdin_data);
  Take(j, "captureLimit", v.capture_limit);
  Take(j, "killPastLimit", v.kill_past_limit);
}

void to_json(json& j, const ExecStarted& v) { j = json{{"type", "start"}, {"pid", v.pid}}; }
void from_json(const json& j, ExecStarted& v) { Need(j, "pid", v.pid); }

void to_json(json& j, const ExecExit& v) {
  j = json{{"exitCode", OrNull(v.exit_code)},
           {"signal", OrNull(v.signal)},
           {"timedOut", v.timed_out},
           {"durationMs", v.duration_ms},
           {"stdoutBytes", v.stdout_bytes},
           {"stderrBytes", v.stderr_bytes},
           {"stdinBytes", v.stdin_bytes},
           {"stdoutTruncated", v.stdout_truncated},
           {"stderrTruncated", v.stderr_truncated}};
  PutIf(j, "startError", v.start_error);
}
void from_json(const json& j, ExecExit& v) {
  Object(j);
  Take(j, "exitCode", v.exit_code);
  Take(j, "signal", v.signal);
  Take(j, "timedOut", v.timed_out);
  Take(j, "durationMs", v.duration_ms);
  Take(j, "stdoutBytes", v.stdout_bytes);
  Take(j, "stderrBytes", v.stderr_bytes);
  Take(j, "stdinBytes", v.stdin_bytes);
  Take(j, "stdoutTruncated", v.stdout_truncated);
  Take(j, "stderrTruncated", v.stderr_truncated);
  Take(j, "startError", v.start_error);
}

// ---- Liveness ----

void to_json(json& j, const PingRequest& v) { j = RequestObject(v.kOp); }
void from_json(const json& j, PingRequest& v) { EmptyRequestFromJson(j, v); }
void to_json(json& j, const Pong& v) { j = json{{"ok", v.ok}, {"time", v.time_ms}}; }
void from_json(const json& j, Pong& v) {
  Take(j, "ok", v.ok);
  Need(j, "time", v.time_ms);
}

void to_json(json& j, const ConfigureRequest& v) {
  j = RequestObject(v.kOp);
  j["sudo"] = v.sudo;
}
void from_json(const json& j, ConfigureRequest& v) {
  Object(j);
  Take(j, "sudo", v.sudo);
}
void to_json(json& j, const Configured& v) { j = json{{"sudo", v.sudo}}; }
void from_json(const json& j, Configured& v) { Need(j, "sudo", v.sudo); }

void to_json(json& j, const OomRequest& v) { j = RequestObject(v.kOp); }
void from_json(const json& j, OomRequest& v) { EmptyRequestFromJson(j, v); }
void to_json(json& j, const OomKilled& v) { j = json{{"killed", v.killed}}; }
void from_json(const json& j, OomKilled& v) { Need(j, "killed", v.killed); }

void to_json(json& j, const WarmRequest& v) { j = RequestObject(v.kOp); }
void from_json(const json& j, WarmRequest& v) { EmptyRequestFromJson(j, v); }
void to_json(json& j, const Warmed& v) { j = json{{"forkUs", v.fork_us}}; }
void from_json(const json& j, Warmed& v) { Need(j, "forkUs", v.fork_us); }

// ---- Egress ----

void to_json(json& j, const EgressListenRequest& v) { j = RequestObject(v.kOp); }
void from_json(const json& j, EgressListenRequest& v) { EmptyRequestFromJson(j, v); }
void to_json(json& j, const EgressConn& v) { j = json{{"conn", v.conn}}; }
void from_json(const json& j, EgressConn& v) { Need(j, "conn", v.conn); }

void to_json(json& j, const EgressAttachRequest& v) {
  j = RequestObject(v.kOp);
  j["conn"] = v.conn;
}
void from_json(const json& j, EgressAttachRequest& v) { Need(j, "conn", v.conn); }
void to_json(json& j, const EgressClosed& v) { j = json{{"closed", v.closed}}; }
void from_json(const json& j, EgressClosed& v) {
  Object(j);
  Take(j, "closed", v.closed);
}

// ---- Ports ----

void to_json(json& j, const PortDialRequest& v) {
  j = RequestObject(v.kOp);
  j["port"] = v.port;
}
void from_json(const json& j, PortDialRequest& v) { Need(j, "port", v.port); }
void to_json(json& j, const PortOpened& v) { j = json{{"opened", v.opened}}; }
void from_json(const json& j, PortOpened& v) { Need(j, "opened", v.opened); }

// ---- Background processes ----

void to_json(json& j, const TerminalSize& v) { j = json{{"cols", v.cols}, {"rows", v.rows}}; }
void from_json(const json& j, TerminalSize& v) {
  Need(j, "cols", v.cols);
  Need(j, "rows", v.rows);
}

void to_json(json& j, const ProcStartRequest& v) {
  j = RequestObject(v.kOp);
  PutCommand(j, v);
  j["stdin"] = v.stdin_pipe ? "pipe" : "none";
  j["timeoutMs"] = v.timeout_ms;
  PutIf(j, "pty", v.pty);
}
void from_json(const json& j, ProcStartRequest& v) {
  TakeCommand(j, v);
  std::string mode;
  Take(j, "stdin", mode);
  v.stdin_pipe = mode == "pipe";
  Take(j, "timeoutMs", v.timeout_ms);
  Take(j, "pty", v.pty);
}

void to_json(json& j, const ProcessInfo& v) {
  j = json{{"id", v.id},
           {"seq", v.seq},
           {"pid", v.pid},
           {"state", v.state},
           {"exitCode", OrNull(v.exit_code)},
           {"signal", OrNull(v.signal)},
           {"command", v.command},
           {"argv", v.argv},
           {"cwd", v.cwd},
           {"stdinOpen", v.stdin_open},
           {"stdinOffset", v.stdin_offset},
           {"timeoutMs", v.timeout_ms},
           {"startedMs", v.started_ms},
           {"endedMs", OrNull(v.ended_ms)},
           {"outputBytes", v.output_bytes},
           {"firstOffset", v.first_offset},
           {"pty", OrNull(v.pty)}};
}
void from_json(const json& j, ProcessInfo& v) {
  Need(j, "id", v.id);
  Need(j, "seq", v.seq);
  Need(j, "pid", v.pid);
  Need(j, "state", v.state);
  Take(j, "exitCode", v.exit_code);
  Take(j, "signal", v.signal);
  Need(j, "command", v.command);
  Need(j, "argv", v.argv);
  Need(j, "cwd", v.cwd);
  Need(j, "stdinOpen", v.stdin_open);
  Need(j, "stdinOffset", v.stdin_offset);
  Need(j, "timeoutMs", v.timeout_ms);
  Need(j, "startedMs", v.started_ms);
  Take(j, "endedMs", v.ended_ms);
  Need(j, "outputBytes", v.output_bytes);
  Need(j, "firstOffset", v.first_offset);
  Take(j, "pty", v.pty);
}

void to_json(json& j, const ProcListRequest& v) { j = RequestObject(v.kOp); }
void from_json(const json& j, ProcListRequest& v) { EmptyRequestFromJson(j, v); }
void to_json(json& j, const ProcessList& v) { j = json{{"data", v.data}}; }
void from_json(const json& j, ProcessList& v) { Need(j, "data", v.data); }

void to_json(json& j, const ProcGetRequest& v) {
  j = RequestObject(v.kOp);
  j["id"] = v.id;
}
void from_json(const json& j, ProcGetRequest& v) { Need(j, "id", v.id); }

void to_json(json& j, const ProcOutputRequest& v) {
  j = RequestObject(v.kOp);
  j["id"] = v.id;
  j["cursor"] = v.cursor;
  j["waitMs"] = v.wait_ms;
  PutIf(j, "maxBytes", v.max_bytes);
}
void from_json(const json& j, ProcOutputRequest& v) {
  Need(j, "id", v.id);
  Take(j, "cursor", v.cursor);
  Take(j, "waitMs", v.wait_ms);
  Take(j, "maxBytes", v.max_bytes);
}

void to_json(json& j, const OutputChunk& v) {
  j = json{{"offset", v.offset}, {"stream", v.stream}, {"base64", Base64Encode(v.data)}};
}
void from_json(const json& j, OutputChunk& v) {
  Need(j, "offset", v.offset);
  Need(j, "stream", v.stream);
  std::string encoded;
  Need(j, "base64", encoded);
  v.data = Base64Decode(encoded).value_or("");
}

void to_json(json& j, const OutputPage& v) {
  j = json{{"chunks", v.chunks},
           {"nextCursor", v.next_cursor},
           {"firstOffset", v.first_offset},
           {"droppedBytes", v.dropped_bytes},
           {"complete", v.complete},
           {"process", v.process}};
}
void from_json(const json& j, OutputPage& v) {
  Need(j, "chunks", v.chunks);
  Need(j, "nextCursor", v.next_cursor);
  Need(j, "firstOffset", v.first_offset);
  Need(j, "droppedBytes", v.dropped_bytes);
  Need(j, "complete", v.complete);
  Need(j, "process", v.process);
}

void to_json(json& j, const ProcWriteRequest& v) {
  j = RequestObject(v.kOp);
  j["id"] = v.id;
  j["base64"] = v.base64;
  j["eof"] = v.eof;
}
void from_json(const json& j, ProcWriteRequest& v) {
  Need(j, "id", v.id);
  Take(j, "base64", v.base64);
  Take(j, "eof", v.eof);
}
void to_json(json& j, const ProcWritten& v) { j = json{{"offset", v.offset}}; }
void from_json(const json& j, ProcWritten& v) { Need(j, "offset", v.offset); }

void to_json(json& j, const ProcSignalRequest& v) {
  j = RequestObject(v.kOp);
  j["id"] = v.id;
  j["signal"] = v.signal;
}
void from_json(const json& j, ProcSignalRequest& v) {
  Need(j, "id", v.id);
  Need(j, "signal", v.signal);
}

void to_json(json& j, const ProcResizeRequest& v) {
  j = RequestObject(v.kOp);
  j["id"] = v.id;
  j["cols"] = v.size.cols;
  j["rows"] = v.size.rows;
}
void from_json(const json& j, ProcResizeRequest& v) {
  Need(j, "id", v.id);
  from_json(j, v.size);
}

}  // namespace kiln::proto
