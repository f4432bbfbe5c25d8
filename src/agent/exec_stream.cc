#include "agent/exec_stream.h"

#include "proto/frame.h"
#include "proto/ops.h"
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
    json r = proto::ExecExit{.exit_code = err.error == ENOENT ? 127 : 126,
                             .stderr_bytes = text.size(),
                             .start_error = text};
    r.update(raw->extra_);
    agent.channel().SendResponse(stream, r);
    return;
  }
  agent.channel().SendEvent(stream, proto::ExecStarted{.pid = raw->command_->pid()});
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
  proto::ExecExit exit{
      .exit_code = r.exited ? std::optional<int>(r.exit_code) : std::nullopt,
      .signal = r.exited ? std::nullopt : std::optional<std::string>(proto::SignalName(r.signal)),
      .timed_out = r.timed_out,
      .duration_ms = r.duration_ms,
      .stdout_bytes = bytes_[1],
      .stderr_bytes = bytes_[2],
      .stdin_bytes = command_ ? command_->stdin_offset() : 0};
  if (options_.capture_limit > 0) {
    exit.stdout_truncated = bytes_[1] > options_.capture_limit;
    exit.stderr_truncated = bytes_[2] > options_.capture_limit;
  }
  json resp = exit;
  resp.update(extra_);
  agent_.channel().SendResponse(stream_, resp);
  agent_.Finish(stream_);
}

}  // namespace kiln::agent
