// What envd keeps in kilnd between calls, per sandbox: a process's tag and
// the variables it was started with (kiln's process list has neither), and
// each polling watcher's cursor. Bounded per sandbox; a sandbox's share is
// dropped once the sandbox is gone (its weak_ptr expired), the next time
// any sandbox's is touched. Its processes and watches themselves live in
// the sandbox's agent and end with it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "control/sandbox.h"

namespace kiln::api::e2b {

class EnvdState {
 public:
  // Most processes remembered per sandbox (the oldest go first), and most
  // polling watchers (CreateWatcher refuses past it).
  static constexpr size_t kMaxProcessNotes = 1024;
  static constexpr size_t kMaxWatchers = 64;

  static EnvdState& Instance();

  struct ProcessNote {
    std::optional<std::string> tag;
    std::map<std::string, std::string> envs;
  };
  void NoteProcess(const std::shared_ptr<control::Sandbox>& s, const std::string& process_id,
                   ProcessNote note);
  std::optional<ProcessNote> Process(const std::shared_ptr<control::Sandbox>& s,
                                     const std::string& process_id);
  // kiln's ids of the processes started with `tag`, newest first.
  std::vector<std::string> ProcessesByTag(const std::shared_ptr<control::Sandbox>& s,
                                          const std::string& tag);

  // False when the sandbox has kMaxWatchers already.
  bool AddWatcher(const std::shared_ptr<control::Sandbox>& s, const std::string& id);
  // nullopt for a watcher this kilnd did not create (or forgot).
  std::optional<uint64_t> WatcherCursor(const std::shared_ptr<control::Sandbox>& s,
                                        const std::string& id);
  void SetWatcherCursor(const std::shared_ptr<control::Sandbox>& s, const std::string& id,
                        uint64_t cursor);
  void RemoveWatcher(const std::shared_ptr<control::Sandbox>& s, const std::string& id);
  // Sandboxes with something kept (for tests).
  size_t sandboxes();

 private:
  struct PerSandbox {
    std::weak_ptr<control::Sandbox> sandbox;
    std::map<std::string, ProcessNote> processes;
    std::deque<std::string> order;  // process ids, oldest first
    std::map<std::string, uint64_t> watchers;
  };
  // The sandbox's share, made if `create`; prunes those of gone sandboxes.
  PerSandbox* Find(const std::shared_ptr<control::Sandbox>& s, bool create);

  std::mutex mu_;
  std::map<std::string, PerSandbox> by_id_;
};

}  // namespace kiln::api::e2b
