#include "io/output_collector.h"

#include <algorithm>

#include "common/time.h"

namespace kiln::io {

void OutputCollector::Add(OutputStream stream, std::string_view data) {
  std::string& o = out_[Index(stream)];
  if (cap_ > 0) {
    uint64_t room = cap_ > o.size() ? cap_ - o.size() : 0;
    if (data.size() > room) {
      over_[Index(stream)] = true;
      data = data.substr(0, room);
    }
  }
  o.append(data);
}

Result<ExecResult> CollectExec(ExecStream& run, uint64_t cap, int64_t deadline_ms,
                               const std::function<bool()>& abandoned) {
  OutputCollector out(cap);
  ExecResult result;
  for (ExecEvent ev;;) {
    int64_t left = deadline_ms - MonotonicNowMs();
    if (left <= 0) {
      result.end = ExecResult::End::kDeadline;
      return result;
    }
    if (!run.Next(&ev, static_cast<int>(std::min<int64_t>(left, 250)))) {
      // Nobody will read the result: stop the command and all it started.
      if (abandoned && abandoned()) {
        run.Cancel();
        result.end = ExecResult::End::kAbandoned;
        return result;
      }
      continue;
    }
    switch (ev.kind) {
      case ExecEvent::kStarted:
        result.pid = ev.pid;
        break;
      case ExecEvent::kOutput:
        out.Add(ev.stream, ev.data);
        break;
      case ExecEvent::kExit:
        result.end = ExecResult::End::kExited;
        result.exit = std::move(ev.exit);
        result.stdout_truncated = result.exit.stdout_truncated || out.over(OutputStream::kStdout);
        result.stderr_truncated = result.exit.stderr_truncated || out.over(OutputStream::kStderr);
        result.stdout_data = out.text(OutputStream::kStdout);
        result.stderr_data = out.text(OutputStream::kStderr);
        return result;
      case ExecEvent::kError:
        return ev.error;
      case ExecEvent::kClosed:
        return Status(Code::kNotRunning, "the sandbox stopped while the command ran");
    }
  }
}

}  // namespace kiln::io
