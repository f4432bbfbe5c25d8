// POST /v1/sandboxes/{id}:exec -- a command to completion, answered as one
// CommandResult or streamed as NDJSON events.
#include "api/errors.h"
#include "api/routes.h"
#include "api/utf8.h"
#include "api/validate.h"
#include "common/time.h"
#include "proto/base64.h"
#include "proto/frame.h"

namespace kiln::api {

using AgentOp = engine::AgentStream;
using nlohmann::json;

namespace {

constexpr uint64_t kOutputCap = 64 * 1024;
// How long past its own timeout a command may take to answer (killing a
// large process tree inside gVisor is not instant).
constexpr int kGraceMs = 30000;

struct ExecRequest {
  json agent;
  std::optional<std::string> stdin_bytes;
  bool stream = false;
  bool base64 = false;
  int64_t timeout_ms = 60000;
};

ExecRequest ReadExec(const json& body, const control::Sandbox& s) {
  FieldReader f(body);
  ExecRequest r;
  r.agent = json{{"op", "exec"}};
  ReadCommandFields(f, s, &r.agent);
  auto text = f.String("stdin", 64 << 20);
  auto b64 = f.String("stdinBase64", 96 << 20);
  if (text && b64) f.Issue("stdin", "give either stdin or stdinBase64, not both");
  if (text) r.stdin_bytes = *text;
  if (b64) {
    r.stdin_bytes = proto::Base64Decode(*b64);
    if (!r.stdin_bytes) f.Issue("stdinBase64", "is not valid base64");
  }
  if (auto t = f.Int("timeoutMs", 1, 86400000)) r.timeout_ms = *t;
  r.stream = f.Bool("stream").value_or(false);
  // kiln's own: a command whose output passes the answer's cap is killed at
  // once (graders: its answer is already wrong, and a flood costs CPU).
  bool stop_at_cap = f.Bool("stopAtOutputCap").value_or(false);
  if (stop_at_cap && r.stream) f.Issue("stopAtOutputCap", "applies to JSON answers, not streams");
  if (auto enc = f.String("outputEncoding", 16)) {
    if (*enc != "utf8" && *enc != "base64") f.Issue("outputEncoding", "must be utf8 or base64");
    r.base64 = *enc == "base64";
  }
  f.Finish();
  r.agent["timeoutMs"] = r.timeout_ms;
  r.agent["stdin"] = r.stdin_bytes.has_value();
  r.agent["captureLimit"] = r.stream ? 0 : kOutputCap;
  r.agent["killPastLimit"] = stop_at_cap;
  return r;
}

json ExitFields(const json& resp) {
  return json{{"exitCode", resp.value("exitCode", json(nullptr))},
              {"signal", resp.value("signal", json(nullptr))},
              {"timedOut", resp.value("timedOut", false)},
              {"durationMs", resp.value("durationMs", 0)}};
}

void RunJson(Exchange& ex, AgentOp& op, const ExecRequest& req) {
  std::string out[3];
  std::string pid;
  AgentOp::Message m;
  int64_t deadline = MonotonicNowMs() + req.timeout_ms + kGraceMs;
  for (;;) {
    int64_t left = deadline - MonotonicNowMs();
    if (left <= 0)
      throw ApiError(Code::kAgentTimeout, "the command did not finish within its timeout");
    if (!op.Next(&m, static_cast<int>(std::min<int64_t>(left, 250)))) {
      // Nobody will read the result: stop the command and all it started.
      if (ex.ClientGone()) return op.Cancel();
      continue;
    }
    if (m.kind == AgentOp::Message::kData) {
      op.Ack(static_cast<uint32_t>(m.data.size()));
      if (m.channel <= 2) out[m.channel] += m.data;
    } else if (m.kind == AgentOp::Message::kEvent) {
      pid = std::to_string(m.body.value("pid", 0));
    } else if (m.kind == AgentOp::Message::kResponse) {
      if (m.body.contains("error")) throw FromAgentError(m.body);
      json result = ExitFields(m.body);
      result["stdout"] = SanitizeUtf8(out[1]);
      result["stderr"] = SanitizeUtf8(out[2]);
      result["stdoutTruncated"] = m.body.value("stdoutTruncated", false);
      result["stderrTruncated"] = m.body.value("stderrTruncated", false);
      result["processId"] = pid;
      return ex.SendJson(200, result);
    } else {
      throw ApiError(Code::kNotRunning, "the sandbox stopped while the command ran");
    }
  }
}

// One base64 output event as an NDJSON line. The payload is spliced into the
// serialized envelope: base64 needs no escaping, and running a 64 KiB chunk
// through the serializer's character-by-character escaping took most of
// kilnd's CPU when streaming.
std::string Base64EventLine(uint8_t channel, uint64_t offset, std::string_view data) {
  json ev{{"type", channel == 1 ? "stdout" : "stderr"},
          {"offset", offset},
          {"base64", true},
          {"data", ""}};
  std::string line = ev.dump();
  line.insert(line.find("\"data\":\"\"") + 8, proto::Base64Encode(data));
  line += '\n';
  return line;
}

void RunStream(Exchange& ex, AgentOp& op, const ExecRequest& req) {
  auto line = [&](const json& j) {
    return ex.WriteChunk(j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
  };
  bool started = false;
  // Answers 200 and the start event once (a command that failed to start
  // reports on stderr before any start event: its processId is "0").
  auto begin = [&](const std::string& pid) {
    if (started) return true;
    started = true;
    return ex.BeginStream(200, "application/x-ndjson") &&
           line(json{{"type", "start"}, {"processId", pid}});
  };
  // Bytes of a character split across chunks, held back with the offset of
  // their first byte in the combined output.
  std::string carry[3];
  uint64_t carry_offset[3] = {0, 0, 0};
  uint64_t offset = 0;
  AgentOp::Message m;
  int64_t deadline = MonotonicNowMs() + req.timeout_ms + kGraceMs;
  for (;;) {
    if (MonotonicNowMs() > deadline) {
      if (!started) throw ApiError(Code::kAgentTimeout, "the command did not start");
      line(json{{"type", "error"},
                {"error", {{"code", "agent_timeout"}, {"message", "no answer from the sandbox"}}}});
      return ex.EndStream();
    }
    if (!op.Next(&m, 250)) {
      if (ex.ClientGone()) return op.Cancel();  // a silent command, and nobody listens
      continue;
    }
    if (m.kind == AgentOp::Message::kEvent) {
      if (!begin(std::to_string(m.body.value("pid", 0)))) return op.Cancel();
    } else if (m.kind == AgentOp::Message::kData && m.channel >= 1 && m.channel <= 2) {
      uint8_t ch = m.channel;
      if (req.base64) {
        if (!begin("0") || !ex.WriteChunk(Base64EventLine(ch, offset, m.data))) return op.Cancel();
        offset += m.data.size();
        op.Ack(static_cast<uint32_t>(m.data.size()));
        continue;
      }
      uint64_t first = carry[ch].empty() ? offset : carry_offset[ch];
      std::string text = carry[ch] + m.data;
      size_t whole = CompleteUtf8Prefix(text);
      carry[ch] = text.substr(whole);
      carry_offset[ch] = first + whole;
      json ev{{"type", ch == 1 ? "stdout" : "stderr"},
              {"offset", first},
              {"data", SanitizeUtf8(std::string_view(text).substr(0, whole))}};
      offset += m.data.size();
      if (!begin("0") || !line(ev)) return op.Cancel();  // the client left: stop the command
      op.Ack(static_cast<uint32_t>(m.data.size()));
    } else if (m.kind == AgentOp::Message::kResponse) {
      if (m.body.contains("error") && !started) throw FromAgentError(m.body);
      if (!begin("0")) return;
      for (uint8_t ch = 1; ch <= 2; ++ch) {
        if (!carry[ch].empty())
          line(json{{"type", ch == 1 ? "stdout" : "stderr"},
                    {"offset", carry_offset[ch]},
                    {"data", SanitizeUtf8(carry[ch])}});
      }
      json exit = ExitFields(m.body);
      exit["type"] = "exit";
      exit["state"] = exit["timedOut"].get<bool>() ? "timed_out"
                      : exit["exitCode"].is_null() ? "killed"
                                                   : "exited";
      line(exit);
      return ex.EndStream();
    } else if (m.kind == AgentOp::Message::kClosed) {
      if (!started) throw ApiError(Code::kNotRunning, "the sandbox stopped while the command ran");
      line(json{{"type", "error"},
                {"error", {{"code", "not_running"}, {"message", "the sandbox stopped"}}}});
      return ex.EndStream();
    }
  }
}

}  // namespace

void AddExecRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/v1/sandboxes/{id}:exec", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    ExecRequest req = ReadExec(ex.JsonBody(16 << 20), *s);
    auto conn = RunningConn(*s);
    auto op = conn->Start(req.agent);
    if (req.stdin_bytes) op->SendData(proto::kStdin, *req.stdin_bytes, true);
    if (req.stream) {
      RunStream(ex, *op, req);
    } else {
      RunJson(ex, *op, req);
    }
    ctx.sandboxes.CommandFinished(s);
  });
}

}  // namespace kiln::api
