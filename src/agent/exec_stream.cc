#include "agent/exec_stream.h"

#include "proto/frame.h"
#include "proto/signals.h"

namespace kiln::agent {

using nlohmann::json;

void ExecStream::Start(Agent& agent, uint32_t stream, SpawnSpec spec, ExecOptions options,
                       json extra_response) {
  std::unique_ptr<ExecStream> self(new ExecStream(agent, stream));
  self->options_ = options;
  self->extra_ = std::move(extra_response);
  ExecStream* raw = self.get();
  Command::Callbacks cb;
  cb.on_output = [raw](uint8_t ch, std::string_view d) { raw->OnOutput(ch, d); };
  cb.on_done = [raw](const CommandResult& r) { raw->OnDone(r); };
  Command::Options copts;
  copts.stdin_pipe = options.stdin_data;
  SpawnResult err;
  std::string token = agent.NewToken('e');
  raw->command_ = Command::Start(agent.loop(), agent.registry(), spec, token, copts, cb, &err);
  if (!raw->command_) {
    // Answer as a shell would: the failure is the command's result.
    std::string text = SpawnFailureText(spec, err);
    agent.channel().SendData(stream, proto::kStderr, text);
    json r = {{"exitCode", err.error == ENOENT ? 127 : 126},
              {"signal", nullptr},
              {"timedOut", false},
              {"durationMs", 0},
              {"stdoutBytes", 0},
              {"stderrBytes", text.size()},
              {"startError", text}};
    r.update(raw->extra_);
    agent.channel().SendResponse(stream, r);
    return;
  }
  agent.channel().SendEvent(stream, json{{"type", "start"}, {"pid", raw->command_->pid()}});
  if (options.timeout_ms > 0) {
    raw->timer_ = agent.loop().AddTimer(options.timeout_ms, [raw] {
      raw->timer_ = 0;
      raw->command_->KillAll(/*timed_out=*/true);
    });
  }
  agent.Attach(stream, std::move(self));
}

void ExecStream::OnOutput(uint8_t channel, std::string_view data) {
  uint64_t before = bytes_[channel];
  bytes_[channel] += data.size();
  if (options_.capture_limit > 0) {
    if (options_.kill_past_limit && bytes_[channel] > options_.capture_limit &&
        !killed_past_limit_) {
      killed_past_limit_ = true;
      command_->KillAll(/*timed_out=*/false);
    }
    if (before >= options_.capture_limit) return;  // read and dropped
    data = data.substr(0, static_cast<size_t>(options_.capture_limit - before));
  }
  agent_.channel().SendData(stream_, channel, data);
  unacked_ += data.size();
  if (unacked_ >= proto::kStreamWindow) command_->PauseOutput(true);
}

void ExecStream::OnWindow(uint32_t bytes) {
  unacked_ = bytes > unacked_ ? 0 : unacked_ - bytes;
  if (unacked_ < proto::kStreamWindow && command_) command_->PauseOutput(false);
}

void ExecStream::OnData(uint8_t channel, std::string data, bool end) {
  if (channel != proto::kStdin || !command_) return;
  if (!data.empty()) command_->WriteStdin(data);
  if (end) command_->CloseStdin();
}

void ExecStream::OnDone(const CommandResult& r) {
  if (timer_) agent_.loop().CancelTimer(timer_);
  timer_ = 0;
  json resp = {
      {"exitCode", r.exited ? json(r.exit_code) : json(nullptr)},
      {"signal", r.exited ? json(nullptr) : json(proto::SignalName(r.signal))},
      {"timedOut", r.timed_out},
      {"durationMs", r.duration_ms},
      {"stdoutBytes", bytes_[1]},
      {"stderrBytes", bytes_[2]},
      {"stdinBytes", command_ ? command_->stdin_offset() : 0},
  };
  if (options_.capture_limit > 0) {
    resp["stdoutTruncated"] = bytes_[1] > options_.capture_limit;
    resp["stderrTruncated"] = bytes_[2] > options_.capture_limit;
  }
  resp.update(extra_);
  agent_.channel().SendResponse(stream_, resp);
  agent_.Finish(stream_);
}

}  // namespace kiln::agent
