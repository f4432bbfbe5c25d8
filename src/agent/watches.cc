#include "agent/watches.h"

#include <dirent.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "agent/agent.h"
#include "agent/files.h"
#include "agent/watch_events.h"
#include "agent/xattrs.h"
#include "common/unique_fd.h"

namespace kiln::agent {

using nlohmann::json;

namespace {

constexpr uint32_t kWatchMask = IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM |
                                IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF;
constexpr size_t kWatchPageItems = 1000;       // items in one read's answer
constexpr size_t kWatchPageBytes = 512 << 10;  // about, in one read's answer
constexpr size_t kInotifyBuffer = 64 << 10;    // inotify bytes per wakeup
constexpr int64_t kWatchMaxWaitMs = 60000;

std::string JoinPath(const std::string& dir, const char* name) {
  return dir == "/" ? "/" + std::string(name) : dir + "/" + name;
}

bool PathUnderOrAt(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         (dir == "/" || path[dir.size()] == '/'));
}

// /proc, /sys and /dev change without files changing: a recursive watch
// of / does not descend into them (watching one of them directly works).
bool PseudoFs(const std::string& path) {
  return path == "/proc" || path == "/sys" || path == "/dev";
}

}  // namespace

struct WatchTable::Watch {
  struct Waiter {
    uint32_t stream;
    uint64_t cursor;
    EventLoop::TimerId timer;
  };

  Watch(WatchTable& table, const proto::WatchStartRequest& req, uint64_t seq)
      : table(table),
        seq(seq),
        request(req),
        filter(req.path, req.events, req.include, req.exclude),
        batch(filter, [this](const proto::WatchEvent& e) { OnResolved(e); }) {}

  ~Watch() { Close(); }

  EventLoop& loop() { return table.agent_.loop(); }

  // Starts inotify on the root (and its tree); the error answer if not.
  std::optional<proto::AgentError> Open() {
    struct stat st;
    if (::stat(request.path.c_str(), &st) != 0) return FileError(errno, request.path);
    root_is_dir = S_ISDIR(st.st_mode);
    fd = UniqueFd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (!fd)
      return proto::AgentError{.code = "io_error",
                               .message = std::string("inotify_init1: ") + std::strerror(errno)};
    root_wd = ::inotify_add_watch(fd.get(), request.path.c_str(), kWatchMask);
    if (root_wd < 0) return FileError(errno, request.path);
    dirs[root_wd] = request.path;
    by_path[request.path] = root_wd;
    if (root_is_dir && request.recursive)
      AddTree(request.path, /*announce=*/false, /*skip_root=*/true);
    loop().Add(fd.get(), EPOLLIN, [this](uint32_t) { OnReadable(); });
    if (request.timeout_ms > 0)
      timeout_timer = loop().AddTimer(request.timeout_ms, [this] {
        timeout_timer = 0;
        End("timeout");
      });
    return std::nullopt;
  }

  void Close() {
    if (fd) {
      loop().Remove(fd.get());
      fd.reset();  // drops every inotify watch with it
    }
    if (batch_timer) loop().CancelTimer(batch_timer);
    if (timeout_timer) loop().CancelTimer(timeout_timer);
    batch_timer = timeout_timer = 0;
    dirs.clear();
    by_path.clear();
  }

  // Watches `top`'s subdirectories (and `top` unless skip_root); with
  // announce, each entry found is a create (it was made before the watch
  // on its directory was, and inotify did not see it).
  void AddTree(const std::string& top, bool announce, bool skip_root) {
    std::vector<std::string> todo{top};
    scanning = true;
    while (!todo.empty() && fd) {
      std::string dir = std::move(todo.back());
      todo.pop_back();
      if (!(skip_root && dir == top) && !AddDir(dir)) continue;
      DIR* d = ::opendir(dir.c_str());
      if (!d) continue;
      while (dirent* ent = ::readdir(d)) {
        if (!std::strcmp(ent->d_name, ".") || !std::strcmp(ent->d_name, "..")) continue;
        std::string child = JoinPath(dir, ent->d_name);
        bool is_dir = ent->d_type == DT_DIR;
        if (ent->d_type == DT_UNKNOWN) {
          struct stat st;
          is_dir = ::lstat(child.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
        }
        if (announce)
          batch.AddEvent(proto::WatchEvent{.type = "create", .path = child, .is_dir = is_dir});
        if (is_dir && !filter.Excluded(child) && !PseudoFs(child)) todo.push_back(child);
      }
      ::closedir(d);
    }
    scanning = false;
  }

  // False when the directory is not watched (gone, or past the limit).
  bool AddDir(const std::string& dir) {
    if (by_path.count(dir)) return true;
    if (dirs.size() >= request.max_watches) return Limit();
    int wd = ::inotify_add_watch(fd.get(), dir.c_str(), kWatchMask | IN_ONLYDIR | IN_DONT_FOLLOW);
    if (wd < 0) return errno == ENOSPC ? Limit() : false;
    dirs[wd] = dir;
    by_path[dir] = wd;
    return true;
  }

  bool Limit() {
    if (!limit_noticed) {
      limit_noticed = true;
      FlushBatch();
      ring.PushNotice(proto::WatchNotice{.kind = "limit", .watches = request.max_watches});
      table.WakeWaiters(*this);
    }
    return false;
  }

  // What every resolved change means for the directories watched.
  void OnResolved(const proto::WatchEvent& e) {
    if (!e.is_dir || !request.recursive || !fd) return;
    if (e.type == "create" && !scanning && !filter.Excluded(e.path)) {
      AddTree(e.path, /*announce=*/true, /*skip_root=*/false);
    } else if (e.type == "remove") {
      DropTree(e.path);
    } else if (e.type == "rename" && e.old_path) {
      std::vector<std::pair<std::string, int>> moved;
      for (auto it = by_path.lower_bound(*e.old_path);
           it != by_path.end() && PathUnderOrAt(it->first, *e.old_path);)
        moved.emplace_back(e.path + it->first.substr(e.old_path->size()), it->second),
            it = by_path.erase(it);
      for (auto& [path, wd] : moved) {
        dirs[wd] = path;
        by_path[path] = wd;
      }
    }
  }

  void DropTree(const std::string& top) {
    for (auto it = by_path.lower_bound(top);
         it != by_path.end() && PathUnderOrAt(it->first, top);) {
      if (it->second != root_wd) {
        ::inotify_rm_watch(fd.get(), it->second);  // EINVAL when already gone
        dirs.erase(it->second);
      }
      it = by_path.erase(it);
    }
  }

  void OnReadable() {
    alignas(inotify_event) char buf[kInotifyBuffer];
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n <= 0) return;
    bool root_gone = false;
    for (ssize_t off = 0; off + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      auto* ev = reinterpret_cast<inotify_event*>(buf + off);
      off += sizeof(inotify_event) + ev->len;
      if (off > n) break;
      if (ev->mask & IN_Q_OVERFLOW) {
        FlushBatch();
        ring.PushNotice(proto::WatchNotice{.kind = "overflow", .reason = "kernel"});
        continue;
      }
      if (ev->wd == root_wd && (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))) {
        root_gone = true;
        break;
      }
      auto dir = dirs.find(ev->wd);
      if (ev->mask & IN_IGNORED) {
        if (dir != dirs.end()) by_path.erase(dir->second), dirs.erase(dir);
        continue;
      }
      if (dir == dirs.end() || (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF))) continue;
      RawChange c{
          .mask = ev->mask,
          .cookie = ev->cookie,
          .path = ev->len > 0 && ev->name[0] ? JoinPath(dir->second, ev->name) : dir->second,
          .is_dir = (ev->mask & IN_ISDIR) != 0};
      batch.Add(c);
      if (!fd) return;  // a scan's limit ended nothing, but be safe
      if (batch.size() >= kMaxWatchBatch) FlushBatch();
    }
    if (root_gone) return End("root-removed");
    if (batch.size() == 0) return;
    if (request.batch_ms <= 0) return FlushBatch();
    if (!batch_timer)
      batch_timer = loop().AddTimer(request.batch_ms, [this] {
        batch_timer = 0;
        FlushBatch();
      });
  }

  void FlushBatch() {
    if (batch_timer) loop().CancelTimer(batch_timer);
    batch_timer = 0;
    auto events = batch.Flush();
    for (auto& e : events) {
      // What is there as the batch ends: a file made and removed within
      // one batch has none.
      struct stat st;
      if (request.entries && e.type != "remove" && ::lstat(e.path.c_str(), &st) == 0)
        e.entry = EntryAt(e.path, st, request.xattr_prefix);
      ring.PushEvent(std::move(e));
    }
    if (!events.empty()) table.WakeWaiters(*this);
  }

  void End(const std::string& reason) {
    if (state != "running") return;
    FlushBatch();
    Close();
    state = "ended";
    end_reason = reason;
    ended_ms = WallClockMs();
    ring.PushNotice(proto::WatchNotice{.kind = "end", .reason = reason});
    table.WakeWaiters(*this);
  }

  proto::WatchInfo Info() const {
    return proto::WatchInfo{.id = request.id,
                            .path = request.path,
                            .recursive = request.recursive,
                            .events = request.events,
                            .include = request.include,
                            .exclude = request.exclude,
                            .batch_ms = request.batch_ms,
                            .timeout_ms = request.timeout_ms,
                            .max_watches = request.max_watches,
                            .watched = static_cast<uint32_t>(dirs.size()),
                            .cursor = ring.end(),
                            .first_cursor = ring.first(),
                            .state = state,
                            .end_reason = end_reason,
                            .started_ms = started_ms,
                            .ended_ms = ended_ms};
  }

  WatchTable& table;
  uint64_t seq;
  proto::WatchStartRequest request;
  WatchFilter filter;
  EventBatch batch;
  WatchRing ring{kWatchRingItems, kWatchRingBytes};
  UniqueFd fd;
  int root_wd = -1;
  bool root_is_dir = false;
  bool scanning = false;
  bool limit_noticed = false;
  std::map<int, std::string> dirs;     // wd -> directory
  std::map<std::string, int> by_path;  // directory -> wd, sorted for subtrees
  EventLoop::TimerId batch_timer = 0, timeout_timer = 0;
  std::string state = "running";
  std::optional<std::string> end_reason;
  int64_t started_ms = WallClockMs();
  std::optional<int64_t> ended_ms;
  std::list<Waiter> waiters;
};

WatchTable::WatchTable(Agent& agent) : agent_(agent) {}
WatchTable::~WatchTable() = default;

bool WatchTable::Handle(uint32_t stream, const std::string& op, const json& req) {
  auto& ch = agent_.channel();
  if (op == proto::kWatchStart) {
    Start(stream, req.get<proto::WatchStartRequest>());
  } else if (op == proto::kWatchRead) {
    auto r = req.get<proto::WatchReadRequest>();
    if (Watch* w = Find(stream, r.id)) Read(stream, *w, r);
  } else if (op == proto::kWatchStop) {
    Stop(stream, req.get<proto::WatchStopRequest>().id);
  } else if (op == proto::kWatchList) {
    std::vector<const Watch*> sorted;
    for (const auto& [id, w] : watches_) sorted.push_back(w.get());
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->seq < b->seq; });
    proto::WatchList list;
    for (const Watch* w : sorted) list.data.push_back(w->Info());
    ch.SendResponse(stream, list);
  } else {
    return false;
  }
  return true;
}

WatchTable::Watch* WatchTable::Find(uint32_t stream, const std::string& id) {
  auto it = watches_.find(id);
  if (it != watches_.end()) return it->second.get();
  agent_.channel().SendError(stream, "not_found", "no watch '" + id + "'");
  return nullptr;
}

void WatchTable::Start(uint32_t stream, const proto::WatchStartRequest& req) {
  auto& ch = agent_.channel();
  auto bad = [&](const std::string& why) { ch.SendError(stream, "invalid_request", why); };
  if (req.id.empty() || req.id.size() > 64) return bad("id must be 1 to 64 characters");
  if (req.path.empty() || req.path[0] != '/') return bad("path must be absolute");
  if (req.max_watches < 1 || req.max_watches > kMaxWatchDescriptors)
    return bad("maxWatches must be from 1 to " + std::to_string(kMaxWatchDescriptors));
  if (req.batch_ms < 0 || req.timeout_ms < 0) return bad("batchMs and timeoutMs must be >= 0");
  if (!req.xattr_prefix.empty())
    if (std::string why = CheckXattrPrefix(req.xattr_prefix); !why.empty()) return bad(why);
  size_t running = 0;
  for (const auto& [id, w] : watches_) running += w->state == "running";
  auto same = watches_.find(req.id);
  if (same != watches_.end() && same->second->state == "running")
    return ch.SendError(stream, "name_taken", "a watch '" + req.id + "' is running");
  if (running >= kMaxRunningWatches)
    return ch.SendError(stream, "quota_exceeded",
                        "at most " + std::to_string(kMaxRunningWatches) +
                            " watches run in a sandbox at once; stop one first");
  auto w = std::make_unique<Watch>(*this, req, next_seq_++);
  if (auto error = w->Open()) return ch.SendResponse(stream, *error);
  proto::WatchInfo info = w->Info();
  info.cursor = 0;  // a limit notice may already be there
  ch.SendResponse(stream, info);
  watches_[req.id] = std::move(w);  // replaces an ended one of that id
  EvictEnded();
}

void WatchTable::Read(uint32_t stream, Watch& w, const proto::WatchReadRequest& req) {
  uint64_t cursor = std::min(req.cursor, w.ring.end());
  int64_t wait_ms = std::min(req.wait_ms, kWatchMaxWaitMs);
  if (w.ring.end() > cursor || w.state != "running" || wait_ms <= 0)
    return Answer(stream, w, cursor);
  Watch* raw = &w;
  w.waiters.push_back(Watch::Waiter{stream, cursor, 0});
  w.waiters.back().timer = agent_.loop().AddTimer(wait_ms, [this, raw, stream] {
    for (auto it = raw->waiters.begin(); it != raw->waiters.end(); ++it) {
      if (it->stream != stream) continue;
      uint64_t at = it->cursor;
      raw->waiters.erase(it);
      return Answer(stream, *raw, at);
    }
  });
}

void WatchTable::Answer(uint32_t stream, Watch& w, uint64_t cursor) {
  proto::WatchPage page;
  page.items = w.ring.Read(cursor, kWatchPageItems, kWatchPageBytes, &page.dropped);
  page.next_cursor =
      page.items.empty() ? std::max(cursor, w.ring.first()) : page.items.back().seq + 1;
  page.ended = w.state != "running" && page.next_cursor >= w.ring.end();
  page.watch = w.Info();
  agent_.channel().SendResponse(stream, page);
}

void WatchTable::WakeWaiters(Watch& w) {
  auto waiters = std::move(w.waiters);
  w.waiters.clear();
  for (auto& waiter : waiters) {
    agent_.loop().CancelTimer(waiter.timer);
    Answer(waiter.stream, w, waiter.cursor);
  }
}

void WatchTable::Stop(uint32_t stream, const std::string& id) {
  Watch* w = Find(stream, id);
  if (!w) return;
  bool running = w->state == "running";
  if (running) {
    w->End("stopped");  // kept, so its readers see the end
  } else {
    watches_.erase(id);
  }
  agent_.channel().SendResponse(stream, proto::WatchStopped{.stopped = running});
}

void WatchTable::CancelWaiter(uint32_t stream) {
  for (auto& [id, w] : watches_) {
    for (auto it = w->waiters.begin(); it != w->waiters.end(); ++it) {
      if (it->stream != stream) continue;
      agent_.loop().CancelTimer(it->timer);
      w->waiters.erase(it);
      return;
    }
  }
}

void WatchTable::CancelAllWaiters() {
  for (auto& [id, w] : watches_) {
    for (auto& waiter : w->waiters) agent_.loop().CancelTimer(waiter.timer);
    w->waiters.clear();
  }
}

void WatchTable::EvictEnded() {
  for (;;) {
    size_t ended = 0;
    auto oldest = watches_.end();
    for (auto it = watches_.begin(); it != watches_.end(); ++it) {
      if (it->second->state == "running") continue;
      ++ended;
      if (oldest == watches_.end() || it->second->seq < oldest->second->seq) oldest = it;
    }
    if (ended <= kMaxEndedWatches) return;
    watches_.erase(oldest);
  }
}

}  // namespace kiln::agent
