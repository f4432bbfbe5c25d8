// envd's per-sandbox notes (see state.h).
#include "api/e2b/envd/state.h"

namespace kiln::api::e2b {

EnvdState& EnvdState::Instance() {
  static EnvdState* state = new EnvdState();  // lives as long as kilnd
  return *state;
}

EnvdState::PerSandbox* EnvdState::Find(const std::shared_ptr<control::Sandbox>& s, bool create) {
  for (auto it = by_id_.begin(); it != by_id_.end();) {
    if (it->second.sandbox.expired())
      it = by_id_.erase(it);
    else
      ++it;
  }
  auto it = by_id_.find(s->id());
  // Another object under the same id is another sandbox: start afresh.
  if (it != by_id_.end() && it->second.sandbox.lock() != s) {
    by_id_.erase(it);
    it = by_id_.end();
  }
  if (it == by_id_.end()) {
    if (!create) return nullptr;
    it = by_id_.emplace(s->id(), PerSandbox{}).first;
    it->second.sandbox = s;
  }
  return &it->second;
}

void EnvdState::NoteProcess(const std::shared_ptr<control::Sandbox>& s,
                            const std::string& process_id, ProcessNote note) {
  std::lock_guard lock(mu_);
  PerSandbox* p = Find(s, true);
  if (!p->processes.count(process_id)) p->order.push_back(process_id);
  p->processes[process_id] = std::move(note);
  while (p->order.size() > kMaxProcessNotes) {
    p->processes.erase(p->order.front());
    p->order.pop_front();
  }
}

std::optional<EnvdState::ProcessNote> EnvdState::Process(const std::shared_ptr<control::Sandbox>& s,
                                                         const std::string& process_id) {
  std::lock_guard lock(mu_);
  PerSandbox* p = Find(s, false);
  if (!p) return std::nullopt;
  auto it = p->processes.find(process_id);
  if (it == p->processes.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> EnvdState::ProcessesByTag(const std::shared_ptr<control::Sandbox>& s,
                                                   const std::string& tag) {
  std::lock_guard lock(mu_);
  std::vector<std::string> ids;
  PerSandbox* p = Find(s, false);
  if (!p) return ids;
  for (auto it = p->order.rbegin(); it != p->order.rend(); ++it) {
    const ProcessNote& n = p->processes[*it];
    if (n.tag && *n.tag == tag) ids.push_back(*it);
  }
  return ids;
}

bool EnvdState::AddWatcher(const std::shared_ptr<control::Sandbox>& s, const std::string& id) {
  std::lock_guard lock(mu_);
  PerSandbox* p = Find(s, true);
  if (p->watchers.size() >= kMaxWatchers) return false;
  p->watchers[id] = 0;
  return true;
}

std::optional<uint64_t> EnvdState::WatcherCursor(const std::shared_ptr<control::Sandbox>& s,
                                                 const std::string& id) {
  std::lock_guard lock(mu_);
  PerSandbox* p = Find(s, false);
  if (!p) return std::nullopt;
  auto it = p->watchers.find(id);
  if (it == p->watchers.end()) return std::nullopt;
  return it->second;
}

void EnvdState::SetWatcherCursor(const std::shared_ptr<control::Sandbox>& s, const std::string& id,
                                 uint64_t cursor) {
  std::lock_guard lock(mu_);
  PerSandbox* p = Find(s, false);
  if (!p) return;
  auto it = p->watchers.find(id);
  if (it != p->watchers.end()) it->second = cursor;
}

void EnvdState::RemoveWatcher(const std::shared_ptr<control::Sandbox>& s, const std::string& id) {
  std::lock_guard lock(mu_);
  if (PerSandbox* p = Find(s, false)) p->watchers.erase(id);
}

size_t EnvdState::sandboxes() {
  std::lock_guard lock(mu_);
  return by_id_.size();
}

}  // namespace kiln::api::e2b
