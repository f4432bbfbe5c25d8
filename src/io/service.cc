#include "io/service.h"

namespace kiln::io {

Result<SandboxIo> Service::Reach(const control::Sandbox& s, const Caller& caller) const {
  auto conn = s.channel();
  if (!conn) {
    control::SandboxState st = s.state();
    bool paused = st == control::SandboxState::kPaused || st == control::SandboxState::kPausing ||
                  st == control::SandboxState::kResuming;
    if (paused && !s.spec().auto_wake)
      return Status(Code::kSandboxPaused,
                    "sandbox " + s.id() + " is paused and autoWake is off; POST :wake first");
    // A call on a paused sandbox wakes it first (autoWake), as a wake would.
    if (paused) {
      if (Status spent = check_spending_(caller.key_id, caller.daily_limit_micros); !spent.ok())
        return spent;
      if (Status woke = s.Wake(); !woke.ok()) return woke;
    }
    conn = s.channel();
  }
  if (!conn || !conn->alive()) {
    if (Status running = s.RequireRunning(); !running.ok()) return running;
    return Status(Code::kNotRunning, "sandbox " + s.id() + " is stopping");
  }
  return SandboxIo(std::move(conn), s.spec().env);
}

Result<SandboxIo> Service::ReachAwake(const control::Sandbox& s) const {
  auto conn = s.channel();
  control::SandboxState st = s.state();
  if (!conn && (st == control::SandboxState::kPaused || st == control::SandboxState::kPausing ||
                st == control::SandboxState::kResuming))
    return Status(Code::kSandboxPaused, "sandbox " + s.id() + " is paused");
  if (!conn || !conn->alive()) {
    if (Status running = s.RequireRunning(); !running.ok()) return running;
    return Status(Code::kNotRunning, "sandbox " + s.id() + " is stopping");
  }
  return SandboxIo(std::move(conn), s.spec().env);
}

}  // namespace kiln::io
