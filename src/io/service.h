// How a front reaches a running sandbox for I/O, the way launch::Launcher
// is how it makes one: the one place that decides whether a call may go
// in. A paused sandbox with autoWake on is woken first, under the caller's
// daily spending limit as an explicit wake is; one paused without autoWake
// or not running is refused. What a front gets back is a SandboxIo; it
// never touches the agent's client or its wire structs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/status.h"
#include "control/sandbox.h"
#include "io/sandbox_io.h"

namespace kiln::io {

// Whose call it is: a wake is charged to this key.
struct Caller {
  std::string key_id;
  std::optional<int64_t> daily_limit_micros;  // none: no limit
};

class Service {
 public:
  // spending_limit_reached if the key spent its daily limit (the daemon
  // gives launch::Launcher::CheckSpendingLimit: create and wake check it too).
  using SpendingCheck =
      std::function<Status(const std::string& key_id, std::optional<int64_t> daily_limit_micros)>;

  explicit Service(SpendingCheck check_spending) : check_spending_(std::move(check_spending)) {}

  // `sandbox`'s I/O for `caller`, waking it first if it is paused and its
  // autoWake is on. sandbox_paused if paused without autoWake, the wake's
  // or the spending check's Status if they fail, not_running unless it runs.
  Result<SandboxIo> Reach(const control::Sandbox& sandbox, const Caller& caller) const;
  // The same, but never waking it: sandbox_paused whenever it is paused
  // (reading a watch must not wake a sandbox).
  Result<SandboxIo> ReachAwake(const control::Sandbox& sandbox) const;

 private:
  SpendingCheck check_spending_;
};

}  // namespace kiln::io
