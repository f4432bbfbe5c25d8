// Every kiln-agent build a sandbox on this host booted with, kept by its
// SHA-256 under <state>/agents/<hex>.
//
// Why: a checkpoint holds the agent's memory, but its code pages come back
// from the binary bind-mounted at /opt/kiln/kiln-agent. Restored over
// another build (kilnd upgraded on a kept state directory), the agent runs
// foreign code and never answers. So a sandbox boots from the stored copy
// of kilnd's agent, its directory and its checkpoints record that digest,
// and a restore binds the build the checkpoint names. A few MB per upgrade;
// kept while the state directory is.
#pragma once

#include <optional>
#include <string>

#include "common/path_ids.h"
#include "common/status.h"

namespace kiln::engine {

// The file in a sandbox's directory, and in each of its checkpoints, that
// names its agent: 64 hex digits.
inline constexpr char kAgentMarker[] = "kiln-agent.sha256";

class AgentBinaries {
 public:
  // Stores `current` (kilnd's --agent) under `dir` unless a copy is there.
  // A store that fails (an unreadable binary, a full disk) leaves current()
  // empty: sandboxes then boot from `current` itself, unrecorded.
  AgentBinaries(std::string dir, std::string current);

  const std::optional<Sha256Digest>& current() const { return current_; }
  // The stored build with that digest, or `current` when there is none.
  std::string PathOf(const std::optional<Sha256Digest>& digest) const;

  // The build a checkpoint was taken with: its marker's digest, or
  // current() for a checkpoint older than markers. kStartupFailed, naming
  // it, when that build is not on this host (a snapshot from another).
  Result<std::optional<Sha256Digest>> Of(const std::string& checkpoint) const;

  // Writes `digest`'s marker into `dir` (removes it for none).
  static void Mark(const std::string& dir, const std::optional<Sha256Digest>& digest);
  // The marker in `dir`; nullopt when absent or not 64 hex digits.
  static std::optional<Sha256Digest> MarkOf(const std::string& dir);

 private:
  std::string dir_, source_;
  std::optional<Sha256Digest> current_;
};

}  // namespace kiln::engine
