// A sandbox's durable state: what it was asked for (SandboxSpec), where it
// is in its life (SandboxState) and what it has used (Meter). Written to the
// sandbox table as JSON at every change (to_json/from_json below; the key
// names are the stored format), read back by a restarted kilnd.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/run_as.h"
#include "common/shape.h"
#include "network/policy.h"

namespace kiln::control {

// starting -> running -> stopping -> stopped; starting -> stopping (a start
// that failed); running -> pausing -> paused (-> running again if the
// capture failed); paused -> resuming -> running (-> paused again if the
// restore failed); paused -> stopping. Sandbox's Mark* methods enforce it.
enum class SandboxState { kStarting, kRunning, kStopping, kStopped, kPausing, kPaused, kResuming };

// The API's spelling ("running"), and back; nullopt for anything else.
std::string_view StateName(SandboxState state);
std::optional<SandboxState> ParseState(std::string_view name);

struct SandboxSpec {
  std::string owner;  // the API key that created it
  Shape shape;
  int timeout_seconds = 1800;
  std::optional<int64_t> max_cost_micros;
  std::optional<std::string> name;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> env;
  // Which parts of `shape` the create named: a disk snapshot's copy takes
  // those and the snapshot's others (a memory snapshot's shape always wins).
  ShapeGiven shape_given;
  std::optional<std::string> snapshot;  // start from this snapshot
  // The image it runs (an id; unset = the daemon's base image), the root
  // filesystem the image resolved to ("" = the daemon's) and its user.
  std::optional<std::string> image;
  std::string rootfs;
  RunAs run_as;
  // Egress rules; unset = the snapshot's (for a copy) or internet off.
  std::optional<network::Policy> network;
  // Pause and wake (see SandboxManager::Pause): whether it may pause, after
  // how long without API activity it pauses (0 = never), whether a call on
  // it while paused wakes it, and what its lease end does.
  bool pausable = true;
  int idle_pause_seconds = 0;
  bool auto_wake = true;
  bool pause_on_lease_end = false;  // onLeaseEnd "pause" (else "stop")
  // What a pause keeps unless it says: memory and processes (a checkpoint),
  // or only the files (a disk capture; the wake boots afresh from them).
  bool pause_memory = true;
  // onLeaseEnd "delete": stopped and deleted (as DELETE) when its lease ends.
  bool delete_on_lease_end = false;
  // Outlives its lease and a graceful kilnd stop: paused instead of stopped.
  bool persistent = false;
  // Stopped (stopReason lifetime_cap) once its total charge reaches this.
  std::optional<int64_t> max_total_cost_micros;
  // false: the sudo shim does nothing (a grader root-owned and 0500 stays
  // out of the user's reach).
  bool sudo = true;
};

// What a sandbox has been billed so far.
struct Meter {
  uint64_t cpu_ns = 0;  // cgroup CPU total at the last reading
  int64_t at_ms = 0;    // when it was read
  double cpu_seconds = 0, gib_hours = 0, micros = 0;
};

struct SandboxRecord {
  std::string id;
  SandboxSpec spec;
  SandboxState state = SandboxState::kStarting;
  int64_t created_ms = 0;
  int64_t ready_ms = 0;  // 0 until it first ran
  int64_t expires_ms = 0;
  int64_t ended_ms = 0;  // 0 until stopped
  std::string stop_reason;
  network::Policy network;  // the rules in force
  int64_t network_version = 1;
  int64_t network_updated_ms = 0;
  Meter meter;
  // While paused: when it paused, the lease it had left then, its
  // checkpoint (a hidden snapshot) and when a non-persistent one is stopped
  // if no one wakes it (0 = never).
  int64_t paused_ms = 0;
  int64_t paused_lease_ms = 0;
  std::string checkpoint;
  int64_t paused_expires_ms = 0;
  // When it was re-adopted by a kilnd whose predecessor ended without a
  // clean stop (a crash), within the last kCrashLoopWindowMs: an agent that
  // crashes kilnd must not be re-adopted, and crash it, forever.
  std::vector<int64_t> crash_adoptions_ms;
};

void to_json(nlohmann::json& j, const SandboxRecord& r);
// Throws nlohmann::json::exception on a record without an id; other missing
// keys take the defaults of records written by older kilnds.
void from_json(const nlohmann::json& j, SandboxRecord& r);

}  // namespace kiln::control
