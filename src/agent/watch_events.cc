#include "agent/watch_events.h"

#include <fnmatch.h>
#include <sys/inotify.h>

#include <algorithm>

namespace kiln::agent {

namespace {

bool WatchGlob(const std::string& pattern, const std::string& text) {
  return ::fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

// Whether `pattern` matches `rel` (a path relative to the root): a
// pattern with '/' the whole of it; one without, the last component or,
// with any_component, any of them.
bool WatchGlobMatches(const std::string& pattern, const std::string& rel, bool any_component) {
  if (pattern.find('/') != std::string::npos) return WatchGlob(pattern, rel);
  size_t start = 0;
  for (;;) {
    size_t slash = rel.find('/', start);
    std::string part =
        rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    bool last = slash == std::string::npos;
    if ((any_component || last) && WatchGlob(pattern, part)) return true;
    if (last) return false;
    start = slash + 1;
  }
}

}  // namespace

WatchFilter::WatchFilter(std::string root, std::vector<std::string> types,
                         std::vector<std::string> include, std::vector<std::string> exclude)
    : root_(std::move(root)),
      types_(std::move(types)),
      include_(std::move(include)),
      exclude_(std::move(exclude)) {}

std::string WatchFilter::Relative(const std::string& path) const {
  if (path == root_) return "";
  std::string prefix = root_ == "/" ? "/" : root_ + "/";
  if (path.compare(0, prefix.size(), prefix) == 0) return path.substr(prefix.size());
  return path;
}

bool WatchFilter::Excluded(const std::string& path) const {
  std::string rel = Relative(path);
  if (rel.empty()) return false;
  return std::any_of(exclude_.begin(), exclude_.end(),
                     [&](const std::string& p) { return WatchGlobMatches(p, rel, true); });
}

bool WatchFilter::Keep(const proto::WatchEvent& e) const {
  if (!types_.empty() && std::find(types_.begin(), types_.end(), e.type) == types_.end())
    return false;
  auto kept = [&](const std::string& path) {
    if (Excluded(path)) return false;
    if (include_.empty()) return true;
    std::string rel = Relative(path);
    return std::any_of(include_.begin(), include_.end(),
                       [&](const std::string& p) { return WatchGlobMatches(p, rel, false); });
  };
  return kept(e.path) || (e.old_path && kept(*e.old_path));
}

void EventBatch::Add(const RawChange& c) {
  proto::WatchEvent e{.path = c.path, .is_dir = c.is_dir};
  if (c.mask & IN_MOVED_FROM) {
    // A cookie seen twice (a confused or hostile kernel) keeps the newest.
    moves_[c.cookie] = c;
    return;
  }
  if (c.mask & IN_MOVED_TO) {
    auto from = moves_.find(c.cookie);
    if (from != moves_.end() && c.cookie != 0) {
      e.type = "rename";
      e.old_path = from->second.path;
      moves_.erase(from);
    } else {
      e.type = "create";  // moved in from outside the watch
    }
  } else if (c.mask & IN_CREATE) {
    e.type = "create";
  } else if (c.mask & IN_DELETE) {
    e.type = "remove";
  } else if (c.mask & IN_MODIFY) {
    e.type = "write";
  } else if (c.mask & IN_ATTRIB) {
    e.type = "chmod";
  } else {
    return;
  }
  AddEvent(std::move(e));
}

void EventBatch::AddEvent(proto::WatchEvent e) {
  // Kept first, then resolved: a new directory's scan (from on_resolved_)
  // reports its entries after the directory itself.
  proto::WatchEvent copy = e;
  if (filter_.Keep(e)) Push(std::move(e));
  if (on_resolved_) on_resolved_(copy);
}

void EventBatch::Push(proto::WatchEvent e) {
  auto last = last_.find(e.path);
  if (last != last_.end()) {
    proto::WatchEvent& prev = events_[last->second];
    if (e.type == "write" && prev.type == "write") {
      prev.count += e.count;
      return;
    }
    if (e.type == "chmod" && (prev.type == "create" || prev.type == "chmod")) return;
    if (e.type == "create" && prev.type == "create") return;
  }
  if (e.old_path) last_.erase(*e.old_path);
  last_[e.path] = events_.size();
  events_.push_back(std::move(e));
}

std::vector<proto::WatchEvent> EventBatch::Flush() {
  auto moves = std::move(moves_);
  moves_.clear();
  for (auto& [cookie, c] : moves)  // moved out of the watch
    AddEvent(proto::WatchEvent{.type = "remove", .path = c.path, .is_dir = c.is_dir});
  last_.clear();
  return std::exchange(events_, {});
}

size_t ItemBytes(const proto::WatchItem& item) {
  size_t n = 64;
  if (item.event) {
    n += item.event->path.size() + (item.event->old_path ? item.event->old_path->size() : 0);
    if (const auto& entry = item.event->entry) {
      n += 128 + entry->path.size() + entry->name.size() +
           (entry->symlink_target ? entry->symlink_target->size() : 0);
      for (const auto& [name, value] : entry->xattrs) n += name.size() + value.size();
    }
  }
  return n;
}

void WatchRing::Push(proto::WatchItem item) {
  item.seq = end();
  bytes_ += ItemBytes(item);
  items_.push_back(std::move(item));
  while (!items_.empty() && (items_.size() > max_items_ || bytes_ > max_bytes_)) {
    bytes_ -= ItemBytes(items_.front());
    items_.pop_front();
    ++first_;
  }
}

void WatchRing::PushEvent(proto::WatchEvent e) { Push(proto::WatchItem{.event = std::move(e)}); }

void WatchRing::PushNotice(proto::WatchNotice n) { Push(proto::WatchItem{.notice = std::move(n)}); }

std::vector<proto::WatchItem> WatchRing::Read(uint64_t cursor, size_t max_items, size_t max_bytes,
                                              uint64_t* dropped) const {
  *dropped = cursor < first_ ? first_ - cursor : 0;
  std::vector<proto::WatchItem> out;
  size_t bytes = 0;
  for (uint64_t at = std::max(cursor, first_); at < end(); ++at) {
    const proto::WatchItem& item = items_[at - first_];
    bytes += ItemBytes(item);
    if (out.size() >= max_items || (!out.empty() && bytes > max_bytes)) break;
    out.push_back(item);
  }
  return out;
}

}  // namespace kiln::agent
