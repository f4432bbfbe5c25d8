// envd's filesystem.Filesystem over kiln's file and watch services. Watches
// live in the sandbox's agent (src/agent/watches.h): WatchDir holds one
// for its stream and stops it when the stream ends, however it ends;
// CreateWatcher's last until RemoveWatcher (or a day, or the sandbox), at
// most EnvdState::kMaxWatchers per sandbox, their cursors in EnvdState.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "api/e2b/envd/rpc.h"
#include "api/e2b/envd/state.h"
#include "api/errors.h"
#include "api/utf8.h"
#include "common/ids.h"
#include "common/time.h"
#include "proto/filesystem.pb.h"

namespace kiln::api::e2b {
namespace {

// A watch's read waits this long for events: also how soon a stream
// notices a client that left.
constexpr int64_t kWatchWaitMs = 1000;
constexpr int kWatchCallMs = 6000;
// Changes within this long of the first are one batch (writes folded).
constexpr int64_t kWatchBatchMs = 50;
// The sandbox ends a watch nobody stopped after this (kilnd gone, say).
constexpr int64_t kWatchBackstopMs = 24 * 3600 * 1000;
// The last instant proto3 JSON prints: 9999-12-31T23:59:59.999Z.
constexpr int64_t kMaxTimestampMs = 253402300799999;
// The deepest ListDir goes (the agent lists at most 10,000 entries).
constexpr uint32_t kMaxListDepth = 16;

// What ls -l prints for a mode, as Go's FileMode.String() (envd's).
std::string Permissions(io::FileType type, uint32_t mode) {
  std::string out;
  out += type == io::FileType::kDirectory ? 'd' : type == io::FileType::kSymlink ? 'L' : '-';
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) out += (mode & (1u << (8 - i))) ? rwx[i] : '-';
  return out;
}

std::string NameOfId(uint32_t id) {
  // kiln's images have root and the sandbox's user; others go by number.
  if (id == 0) return "root";
  if (id == 1000) return "user";
  return std::to_string(id);
}

filesystem::EntryInfo EntryOf(const io::FileEntry& e) {
  // proto3 strings are UTF-8: a name that is not is shown with U+FFFD
  // rather than failing the answer.
  filesystem::EntryInfo info;
  info.set_name(SanitizeUtf8(e.name));
  info.set_path(SanitizeUtf8(e.path));
  switch (e.type) {
    case io::FileType::kFile:
      info.set_type(filesystem::FILE_TYPE_FILE);
      break;
    case io::FileType::kDirectory:
      info.set_type(filesystem::FILE_TYPE_DIRECTORY);
      break;
    case io::FileType::kSymlink:
      info.set_type(filesystem::FILE_TYPE_SYMLINK);
      info.set_is_symlink(true);
      break;
    default:
      info.set_type(filesystem::FILE_TYPE_UNSPECIFIED);
  }
  info.set_size(static_cast<int64_t>(e.size));
  uint32_t mode = 0;
  for (char c : e.mode) {
    if (c < '0' || c > '7') break;
    mode = mode * 8 + static_cast<uint32_t>(c - '0');
  }
  mode &= 0777;
  info.set_mode(mode);
  info.set_permissions(Permissions(e.type, mode));
  info.set_owner(NameOfId(e.uid));
  info.set_group(NameOfId(e.gid));
  // Within what proto3 JSON can print (0001..9999): a file's clock can be
  // anything, and a timestamp out of range would fail the whole answer.
  int64_t ms = std::clamp<int64_t>(e.modified_ms, 0, kMaxTimestampMs);
  info.mutable_modified_time()->set_seconds(ms / 1000);
  info.mutable_modified_time()->set_nanos(static_cast<int32_t>(ms % 1000) * 1000000);
  if (e.symlink_target) info.set_symlink_target(SanitizeUtf8(*e.symlink_target));
  for (const auto& [key, value] : e.xattrs)
    (*info.mutable_metadata())[SanitizeUtf8(key)] = SanitizeUtf8(value);
  return info;
}

// The entry at `path`; not_found when there is none.
io::FileEntry StatOrThrow(const io::SandboxIo& io, const std::string& path) {
  io::FileStat st = ValueOrThrow(io.Stat(path, kEnvdMetadataXattrPrefix));
  if (!st.exists) throw ApiError(Code::kNotFound, "path '" + path + "' does not exist");
  return st.entry;
}

// `target` (a symlink's text) as an absolute path from the link's folder.
std::string JoinTarget(const std::string& link, const std::string& target) {
  return CleanPath(target.starts_with('/') ? target
                                           : link.substr(0, link.rfind('/')) + "/" + target);
}

// A symlink's entry as envd gives it: the type of what it points to and
// that thing's absolute path (a link to a link followed, 8 hops at most);
// a dangling link stays a symlink.
io::FileEntry FollowLink(const io::SandboxIo& io, io::FileEntry link) {
  if (link.type != io::FileType::kSymlink) return link;
  io::FileEntry at = link;
  for (int hop = 0; hop < 8 && at.type == io::FileType::kSymlink && at.symlink_target; ++hop) {
    io::FileStat next =
        ValueOrThrow(io.Stat(JoinTarget(at.path, *at.symlink_target), kEnvdMetadataXattrPrefix));
    if (!next.exists) return link;
    at = next.entry;
  }
  if (at.type == io::FileType::kSymlink) return link;
  link.type = at.type;
  link.symlink_target = at.path;
  return link;
}

void Stat(Rpc& rpc) {
  filesystem::StatRequest req;
  rpc.ReadRequest(&req);
  std::string path = ResolvePath(rpc.user, req.path(), "path");
  io::SandboxIo io = rpc.Io();
  io::FileEntry entry = FollowLink(io, StatOrThrow(io, path));
  filesystem::StatResponse res;
  *res.mutable_entry() = EntryOf(entry);
  rpc.Reply(res);
}

void MakeDir(Rpc& rpc) {
  filesystem::MakeDirRequest req;
  rpc.ReadRequest(&req);
  std::string path = ResolvePath(rpc.user, req.path(), "path");
  io::SandboxIo io = rpc.Io();
  io::FileStat st = ValueOrThrow(io.Stat(path));
  // The SDKs' make_dir answers False for this code.
  if (st.exists && st.entry.type == io::FileType::kDirectory)
    throw ApiError(Code::kFileExists, "directory '" + path + "' already exists");
  if (st.exists)
    throw ApiError(Code::kInvalidRequest,
                   "path '" + path + "' already exists and is not a directory");
  filesystem::MakeDirResponse res;
  *res.mutable_entry() = EntryOf(ValueOrThrow(io.Mkdir(path, true)));
  rpc.Reply(res);
}

void Move(Rpc& rpc) {
  filesystem::MoveRequest req;
  rpc.ReadRequest(&req);
  std::string from = ResolvePath(rpc.user, req.source(), "source");
  std::string to = ResolvePath(rpc.user, req.destination(), "destination");
  io::SandboxIo io = rpc.Io();
  StatOrThrow(io, from);
  // As envd: the destination's directories are made, and a file there is
  // replaced.
  if (auto slash = to.rfind('/'); slash != std::string::npos && slash > 0)
    ValueOrThrow(io.Mkdir(to.substr(0, slash), true));
  filesystem::MoveResponse res;
  *res.mutable_entry() = EntryOf(ValueOrThrow(io.Rename(from, to, true, kEnvdMetadataXattrPrefix)));
  rpc.Reply(res);
}

void ListDir(Rpc& rpc) {
  filesystem::ListDirRequest req;
  rpc.ReadRequest(&req);
  std::string path = ResolvePath(rpc.user, req.path(), "path");
  uint32_t depth = req.depth() == 0 ? 1 : req.depth();
  if (depth > kMaxListDepth)
    throw InvalidField("depth", "must be at most " + std::to_string(kMaxListDepth));
  io::SandboxIo io = rpc.Io();
  io::FileEntry dir = FollowLink(io, StatOrThrow(io, path));  // a link to a folder lists it
  if (dir.type != io::FileType::kDirectory)
    throw ApiError(Code::kInvalidRequest, "path '" + path + "' is not a directory");
  filesystem::ListDirResponse res;
  for (const auto& e :
       ValueOrThrow(io.List(path, static_cast<int>(depth), kEnvdMetadataXattrPrefix)))
    *res.add_entries() = EntryOf(e);
  rpc.Reply(res);
}

void Remove(Rpc& rpc) {
  filesystem::RemoveRequest req;
  rpc.ReadRequest(&req);
  std::string path = ResolvePath(rpc.user, req.path(), "path");
  if (path == "/") throw InvalidField("path", "must not be the root directory");
  // As envd's (Go's os.RemoveAll): a path that is not there is no error.
  ValueOrThrow(rpc.Io().Remove(path, true));
  rpc.Reply(filesystem::RemoveResponse());
}

std::string NewWatchId(const char* prefix) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%s%016llx", prefix,
                static_cast<unsigned long long>(RandomU64()));
  return buf;
}

// Starts a watch of `path` (which must be a directory) in the sandbox;
// with `entries`, each event carries what is at its path (envd 0.6.3).
// Network mounts need nothing: a sandbox has none (gVisor's gofer mounts
// are local to inotify), so allow_network_mounts changes nothing.
io::WatchInfo StartWatch(const io::SandboxIo& io, const std::string& path, bool recursive,
                         bool entries, const std::string& id, int64_t timeout_ms) {
  io::FileEntry dir = FollowLink(io, StatOrThrow(io, path));  // a link to a folder lists it
  if (dir.type != io::FileType::kDirectory)
    throw ApiError(Code::kInvalidRequest, "path '" + path + "' is not a directory");
  io::WatchSpec spec;
  spec.id = id;
  spec.path = path;
  spec.recursive = recursive;
  spec.batch_ms = kWatchBatchMs;
  spec.timeout_ms = timeout_ms;
  spec.entries = entries;
  if (entries) spec.xattr_prefix = std::string(kEnvdMetadataXattrPrefix);
  return ValueOrThrow(io.WatchStart(spec));
}

filesystem::FilesystemEvent EventOf(const std::string& root, const std::string& path,
                                    filesystem::EventType type,
                                    const std::optional<io::FileEntry>& entry = std::nullopt) {
  filesystem::FilesystemEvent event;
  std::string name = path;
  if (path.starts_with(root + "/"))
    name = path.substr(root.size() + 1);
  else if (root == "/" && path.starts_with("/"))
    name = path.substr(1);
  event.set_name(SanitizeUtf8(name));
  event.set_type(type);
  if (entry) *event.mutable_entry() = EntryOf(*entry);
  return event;
}

// A kiln watch event as envd's: a rename is the old name renamed and the
// new one created, as inotify (and so envd) tells it.
std::vector<filesystem::FilesystemEvent> EventsOf(const std::string& root,
                                                  const io::WatchEvent& e) {
  std::vector<filesystem::FilesystemEvent> out;
  // The entry (when the watch asked for it) is what is at e.path: the new
  // name's, never a rename's old name.
  if (e.type == "create")
    out.push_back(EventOf(root, e.path, filesystem::EVENT_TYPE_CREATE, e.entry));
  else if (e.type == "write")
    out.push_back(EventOf(root, e.path, filesystem::EVENT_TYPE_WRITE, e.entry));
  else if (e.type == "remove")
    out.push_back(EventOf(root, e.path, filesystem::EVENT_TYPE_REMOVE));
  else if (e.type == "chmod")
    out.push_back(EventOf(root, e.path, filesystem::EVENT_TYPE_CHMOD, e.entry));
  else if (e.type == "rename" && e.old_path) {
    out.push_back(EventOf(root, *e.old_path, filesystem::EVENT_TYPE_RENAME));
    out.push_back(EventOf(root, e.path, filesystem::EVENT_TYPE_CREATE, e.entry));
  } else if (e.type == "rename") {
    out.push_back(EventOf(root, e.path, filesystem::EVENT_TYPE_RENAME, e.entry));
  }
  return out;
}

// Stops the sandbox's watch when the stream ends, whichever way it does.
class WatchGuard {
 public:
  WatchGuard(const io::SandboxIo& io, std::string id) : io_(io), id_(std::move(id)) {}
  ~WatchGuard() { (void)io_.WatchStop(id_); }
  WatchGuard(const WatchGuard&) = delete;
  WatchGuard& operator=(const WatchGuard&) = delete;

 private:
  const io::SandboxIo& io_;
  std::string id_;
};

void WatchDir(Rpc& rpc) {
  filesystem::WatchDirRequest req;
  rpc.ReadRequest(&req);
  std::string path = ResolvePath(rpc.user, req.path(), "path");
  io::SandboxIo io = rpc.Io();
  auto stream_slot = OpenStream(rpc.ctx, *rpc.target.sandbox);
  const std::string id = NewWatchId("e2b-stream-");
  int64_t backstop =
      rpc.timeout_ms && *rpc.timeout_ms > 0 ? *rpc.timeout_ms + 10000 : kWatchBackstopMs;
  io::WatchInfo watch = StartWatch(io, path, req.recursive(), req.include_entry(), id, backstop);
  WatchGuard guard(io, id);
  filesystem::WatchDirResponse start;
  start.mutable_start();
  if (!rpc.Send(start)) return;
  uint64_t cursor = watch.cursor;
  int64_t last_sent = MonotonicNowMs();
  for (;;) {
    if (rpc.ex.ClientGone()) return;
    if (rpc.Expired())
      return rpc.End(Status(Code::kAgentTimeout, "the call's Connect-Timeout-Ms passed"));
    auto page = io.WatchRead(id, cursor, kWatchWaitMs, kWatchCallMs, kEnvdMetadataXattrPrefix);
    if (!page.ok()) return rpc.End(page.status());
    for (const auto& item : page->items) {
      if (!item.event) continue;
      for (auto& event : EventsOf(path, *item.event)) {
        filesystem::WatchDirResponse res;
        *res.mutable_filesystem() = std::move(event);
        if (!rpc.Send(res)) return;
        last_sent = MonotonicNowMs();
      }
    }
    cursor = page->next_cursor;
    if (page->ended)
      return rpc.End(Status(Code::kNotFound, "the watch of '" + path + "' ended: " +
                                                 page->watch.end_reason.value_or("stopped")));
    if (MonotonicNowMs() - last_sent >= rpc.keepalive_ms) {
      filesystem::WatchDirResponse keepalive;
      keepalive.mutable_keepalive();
      if (!rpc.Send(keepalive)) return;
      last_sent = MonotonicNowMs();
    }
  }
}

void CreateWatcher(Rpc& rpc) {
  filesystem::CreateWatcherRequest req;
  rpc.ReadRequest(&req);
  std::string path = ResolvePath(rpc.user, req.path(), "path");
  io::SandboxIo io = rpc.Io();
  const std::string id = NewWatchId("e2b-watcher-");
  if (!EnvdState::Instance().AddWatcher(rpc.target.sandbox, id))
    throw ApiError(Code::kQuotaExceeded, "the sandbox has " +
                                             std::to_string(EnvdState::kMaxWatchers) +
                                             " watchers already: remove one first");
  try {
    io::WatchInfo watch =
        StartWatch(io, path, req.recursive(), req.include_entry(), id, kWatchBackstopMs);
    EnvdState::Instance().SetWatcherCursor(rpc.target.sandbox, id, watch.cursor);
  } catch (...) {
    EnvdState::Instance().RemoveWatcher(rpc.target.sandbox, id);
    throw;
  }
  filesystem::CreateWatcherResponse res;
  res.set_watcher_id(id);
  rpc.Reply(res);
}

void GetWatcherEvents(Rpc& rpc) {
  filesystem::GetWatcherEventsRequest req;
  rpc.ReadRequest(&req);
  auto cursor = EnvdState::Instance().WatcherCursor(rpc.target.sandbox, req.watcher_id());
  if (!cursor) throw ApiError(Code::kNotFound, "watcher '" + req.watcher_id() + "' not found");
  io::SandboxIo io = rpc.Io();
  // A poll right after a change gets it: the agent flushes a batch of
  // changes kWatchBatchMs after the first, so an empty read waits that long
  // and a little more (E2B's tests write, then read the events at once).
  io::WatchPage page = ValueOrThrow(io.WatchRead(req.watcher_id(), *cursor, kWatchBatchMs * 4,
                                                 kWatchCallMs, kEnvdMetadataXattrPrefix));
  filesystem::GetWatcherEventsResponse res;
  for (const auto& item : page.items) {
    if (!item.event) continue;
    for (auto& event : EventsOf(page.watch.spec.path, *item.event))
      *res.add_events() = std::move(event);
  }
  EnvdState::Instance().SetWatcherCursor(rpc.target.sandbox, req.watcher_id(), page.next_cursor);
  rpc.Reply(res);
}

void RemoveWatcher(Rpc& rpc) {
  filesystem::RemoveWatcherRequest req;
  rpc.ReadRequest(&req);
  if (!EnvdState::Instance().WatcherCursor(rpc.target.sandbox, req.watcher_id()))
    throw ApiError(Code::kNotFound, "watcher '" + req.watcher_id() + "' not found");
  EnvdState::Instance().RemoveWatcher(rpc.target.sandbox, req.watcher_id());
  (void)rpc.Io().WatchStop(req.watcher_id());
  rpc.Reply(filesystem::RemoveWatcherResponse());
}

}  // namespace

bool ServeFilesystemRpc(Rpc& rpc, std::string_view method) {
  if (method == "Stat") return Stat(rpc), true;
  if (method == "MakeDir") return MakeDir(rpc), true;
  if (method == "Move") return Move(rpc), true;
  if (method == "ListDir") return ListDir(rpc), true;
  if (method == "Remove") return Remove(rpc), true;
  if (method == "WatchDir") return WatchDir(rpc), true;
  if (method == "CreateWatcher") return CreateWatcher(rpc), true;
  if (method == "GetWatcherEvents") return GetWatcherEvents(rpc), true;
  if (method == "RemoveWatcher") return RemoveWatcher(rpc), true;
  return false;
}

}  // namespace kiln::api::e2b
