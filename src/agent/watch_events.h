// The pure parts of a file watch (src/agent/watches.h), kept apart so unit
// tests reach them without inotify: how raw changes become the events a
// reader sees (folding, rename pairing, filters), and the bounded ring of
// events and notices addressed by cursor.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "proto/ops.h"

namespace kiln::agent {

// Which events a watch keeps: by type, and by include/exclude globs. A
// glob without '/' matches one path component (exclude: any component
// below the root, so "node_modules" hides its whole tree; include: the
// last one, so "*.py" keeps Python files); with '/' it matches the path
// relative to the root (fnmatch, '*' crossing '/').
class WatchFilter {
 public:
  WatchFilter() = default;
  WatchFilter(std::string root, std::vector<std::string> types, std::vector<std::string> include,
              std::vector<std::string> exclude);

  bool Keep(const proto::WatchEvent& e) const;
  // An excluded directory is not watched at all (saves descriptors).
  bool Excluded(const std::string& path) const;

 private:
  std::string Relative(const std::string& path) const;

  std::string root_;
  std::vector<std::string> types_, include_, exclude_;
};

// One raw change, as inotify reports it, with its absolute path.
struct RawChange {
  uint32_t mask = 0;  // IN_* bits
  uint32_t cookie = 0;
  std::string path;
  bool is_dir = false;
};

// Collects one batch of changes. A move's two halves (IN_MOVED_FROM and
// IN_MOVED_TO with one cookie) become one rename; a half alone by the end
// of the batch is a remove (moved out) or a create (moved in). Writes to a
// path fold into one event with a count until another event for the path;
// a chmod right after its create or chmod, and a second create of a path
// (a new directory's scan racing inotify), are dropped.
class EventBatch {
 public:
  // Called with every resolved event, kept or filtered out, after it is
  // added (the watch adds, moves and drops directory watches from it).
  using Resolved = std::function<void(const proto::WatchEvent&)>;
  EventBatch(WatchFilter filter, Resolved on_resolved)
      : filter_(std::move(filter)), on_resolved_(std::move(on_resolved)) {}

  void Add(const RawChange& change);
  // An event found by scanning (a new directory's entries).
  void AddEvent(proto::WatchEvent e);
  // The batch's events, unpaired moves resolved; starts the next batch.
  std::vector<proto::WatchEvent> Flush();
  // Events and unpaired moves held (to bound a batch).
  size_t size() const { return events_.size() + moves_.size(); }

 private:
  void Push(proto::WatchEvent e);

  WatchFilter filter_;
  Resolved on_resolved_;
  std::vector<proto::WatchEvent> events_;
  std::map<uint32_t, RawChange> moves_;  // IN_MOVED_FROM by cookie
  // Per path: the index of its last event in events_.
  std::unordered_map<std::string, size_t> last_;
};

// A watch's kept items (events and notices), each at a cursor one past
// the last's; the oldest are dropped past `max_items` or `max_bytes`.
class WatchRing {
 public:
  WatchRing(size_t max_items, size_t max_bytes) : max_items_(max_items), max_bytes_(max_bytes) {}

  void PushEvent(proto::WatchEvent e);
  void PushNotice(proto::WatchNotice n);
  // Items at or after `cursor`, at most max_items and about max_bytes;
  // *dropped: how many between the cursor and the oldest kept were lost.
  std::vector<proto::WatchItem> Read(uint64_t cursor, size_t max_items, size_t max_bytes,
                                     uint64_t* dropped) const;

  uint64_t first() const { return first_; }
  uint64_t end() const { return first_ + items_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  void Push(proto::WatchItem item);

  size_t max_items_, max_bytes_;
  std::deque<proto::WatchItem> items_;
  uint64_t first_ = 0;
  size_t bytes_ = 0;
};

// What an item costs the ring, about as its JSON would.
size_t ItemBytes(const proto::WatchItem& item);

}  // namespace kiln::agent
