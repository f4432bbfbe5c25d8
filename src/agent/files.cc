#include "agent/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "agent/agent.h"
#include "agent/xattrs.h"
#include "common/unique_fd.h"
#include "proto/frame.h"
#include "proto/ops.h"

namespace kiln::agent {
namespace {

using nlohmann::json;

std::string Octal(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%o", static_cast<unsigned>(m & 07777));
  return buf;
}

const char* TypeName(mode_t m) {
  if (S_ISREG(m)) return "file";
  if (S_ISDIR(m)) return "directory";
  if (S_ISLNK(m)) return "symlink";
  return "other";
}

std::string BaseName(const std::string& path) {
  if (path == "/") return "/";
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

proto::FileEntry EntryAt(const std::string& path, const struct stat& st,
                         std::string_view xattr_prefix) {
  proto::FileEntry e{
      .name = BaseName(path),
      .path = path,
      .type = TypeName(st.st_mode),
      .size = static_cast<uint64_t>(st.st_size),
      .mode = Octal(st.st_mode),
      .modified_ms = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000,
      .uid = st.st_uid,
      .gid = st.st_gid};
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    ssize_t n = readlink(path.c_str(), target, sizeof target);
    if (n >= 0) e.symlink_target = std::string(target, static_cast<size_t>(n));
  }
  e.xattrs = ReadXattrs(path, xattr_prefix);
  return e;
}

namespace {

proto::FileEntry Entry(const std::string& path, const struct stat& st) {
  return EntryAt(path, st, "");
}

// Rejects what the kernel would misread: relative paths and NUL bytes.
std::string CheckPath(const std::string& path) {
  if (path.empty() || path[0] != '/') return "path must be absolute";
  if (path.find('\0') != std::string::npos) return "path contains a NUL byte";
  if (path.size() > 4096) return "path is longer than 4096 bytes";
  return "";
}

// mkdir -p; new folders belong to the user.
int MakeParents(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  if (dir != "/") {
    int err = MakeParents(DirName(dir));
    if (err) return err;
  }
  if (mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST) return errno;
  if (chown(dir.c_str(), TheRunAs().uid, TheRunAs().gid) < 0) return errno;
  return 0;
}

void ListInto(const std::string& dir, int depth, std::string_view xattr_prefix,
              std::vector<proto::FileEntry>& out, size_t limit) {
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    if (out.size() >= limit) return;
    std::string p = dir == "/" ? "/" + n : dir + "/" + n;
    struct stat st;
    if (lstat(p.c_str(), &st) < 0) continue;
    out.push_back(EntryAt(p, st, xattr_prefix));
    if (depth > 1 && S_ISDIR(st.st_mode)) ListInto(p, depth - 1, xattr_prefix, out, limit);
  }
}

int RemoveTree(const std::string& path) {
  auto rm = [](const char* p, const struct stat*, int, FTW*) -> int {
    return ::remove(p) < 0 ? errno : 0;
  };
  return nftw(path.c_str(), rm, 64, FTW_DEPTH | FTW_PHYS);
}

// file.read: streams the file as data frames, within the window.
class FileReader : public Stream {
 public:
  FileReader(Agent& agent, uint32_t stream, UniqueFd fd)
      : agent_(agent), stream_(stream), fd_(std::move(fd)) {}
  void Pump() {
    char buf[64 * 1024];
    while (unacked_ < proto::kStreamWindow) {
      ssize_t n = ::read(fd_.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        agent_.channel().SendResponse(stream_, FileError(errno, "read"));
        return agent_.Finish(stream_);
      }
      if (n == 0) {
        agent_.channel().SendData(stream_, proto::kStdout, "", true);
        agent_.channel().SendResponse(stream_, proto::FileReadDone{.size = total_});
        return agent_.Finish(stream_);
      }
      agent_.channel().SendData(stream_, proto::kStdout,
                                std::string_view(buf, static_cast<size_t>(n)));
      total_ += static_cast<uint64_t>(n);
      unacked_ += static_cast<uint64_t>(n);
    }
  }
  void OnWindow(uint32_t bytes) override {
    unacked_ = bytes > unacked_ ? 0 : unacked_ - bytes;
    Pump();
  }

 private:
  Agent& agent_;
  uint32_t stream_;
  UniqueFd fd_;
  uint64_t total_ = 0;
  uint64_t unacked_ = 0;
};

// file.write: data frames into a temporary file, renamed over the target
// at the end, so a reader never sees half a file; or, in place (tmp empty),
// into the target itself, as E2B's envd writes.
class FileWriter : public Stream {
 public:
  // `tmp` is the temporary file to rename over `path`, or "" to write in
  // place; `owns_mode`: the mode and owner are set at the end (a file this
  // write makes), after the data, as envd's chown follows its create.
  FileWriter(Agent& agent, uint32_t stream, std::string path, std::string tmp, UniqueFd fd,
             mode_t mode, bool owns_mode, const proto::FileWriteRequest& request)
      : agent_(agent),
        stream_(stream),
        path_(std::move(path)),
        tmp_(std::move(tmp)),
        fd_(std::move(fd)),
        mode_(mode),
        owns_mode_(owns_mode),
        xattr_prefix_(request.xattr_prefix),
        xattrs_(request.xattrs) {}
  ~FileWriter() override {
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
  }
  void OnData(uint8_t, std::string data, bool end) override {
    if (failed_) return;
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::write(fd_.get(), data.data() + off, data.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Fail(errno);
      off += static_cast<size_t>(n);
    }
    size_ += data.size();
    if (!end) return;
    if (owns_mode_ &&
        (fchmod(fd_.get(), mode_) < 0 || fchown(fd_.get(), TheRunAs().uid, TheRunAs().gid) < 0))
      return Fail(errno);
    if (!xattr_prefix_.empty())
      if (int err = ReplaceXattrs(fd_.get(), xattr_prefix_, xattrs_)) return Fail(err);
    if (!tmp_.empty()) {
      fd_.reset();
      if (::rename(tmp_.c_str(), path_.c_str()) < 0) return Fail(errno);
      tmp_.clear();
    }
    fd_.reset();  // in place: the close a watcher sees as the write's end
    agent_.channel().SendResponse(stream_, proto::FileWritten{.path = path_, .size = size_});
    agent_.Finish(stream_);
  }

 private:
  void Fail(int err) {
    failed_ = true;
    agent_.channel().SendResponse(stream_, FileError(err, path_));
    agent_.Finish(stream_);
  }
  Agent& agent_;
  uint32_t stream_;
  std::string path_, tmp_;
  UniqueFd fd_;
  mode_t mode_;
  bool owns_mode_;
  std::string xattr_prefix_;
  std::map<std::string, std::string> xattrs_;
  uint64_t size_ = 0;
  bool failed_ = false;
};

void Read(Agent& agent, uint32_t stream, const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer (and the
  // agent with it); only regular files are read, so a path the policy
  // pointed at a FIFO, a socket or a device (/dev/zero, /dev/urandom) is
  // refused, not streamed forever.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd) return agent.channel().SendResponse(stream, FileError(errno, path));
  struct stat st;
  fstat(fd.get(), &st);
  if (S_ISDIR(st.st_mode)) return agent.channel().SendResponse(stream, FileError(EISDIR, path));
  if (!S_ISREG(st.st_mode))
    return agent.channel().SendResponse(
        stream, proto::AgentError{.code = "invalid_request",
                                  .message = path + " is not a regular file (a device, FIFO or "
                                                    "socket): only regular files are read",
                                  .path = path});
  fcntl(fd.get(), F_SETFL, 0);
  agent.channel().SendEvent(stream, proto::FileReadStart{.size = static_cast<uint64_t>(st.st_size),
                                                         .mode = Octal(st.st_mode)});
  auto reader = std::make_unique<FileReader>(agent, stream, std::move(fd));
  FileReader* raw = reader.get();
  agent.Attach(stream, std::move(reader));
  raw->Pump();
}

// Opens `path` itself for writing, truncated; *created: whether this made
// it (it then gets its mode and the run-as user when written; an existing
// file keeps both, as with `>` in a shell). Only a regular file: O_NONBLOCK
// so a FIFO without a reader cannot hold the agent.
UniqueFd OpenInPlace(const std::string& path, bool* created, int* err) {
  const int flags = O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  UniqueFd fd(::open(path.c_str(), flags | O_CREAT | O_EXCL, 0600));
  *created = static_cast<bool>(fd);
  if (!fd && errno == EEXIST) fd = UniqueFd(::open(path.c_str(), flags));
  struct stat st;
  if (!fd || fstat(fd.get(), &st) < 0) {
    *err = errno;
    return UniqueFd();
  }
  if (!S_ISREG(st.st_mode)) {
    *err = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    return UniqueFd();
  }
  if ((!*created && ftruncate(fd.get(), 0) < 0) || fcntl(fd.get(), F_SETFL, 0) < 0) {
    *err = errno;
    return UniqueFd();
  }
  return fd;
}

void Write(Agent& agent, uint32_t stream, const proto::FileWriteRequest& r) {
  const std::string& path = r.path;
  const mode_t mode = static_cast<mode_t>(r.mode) & 07777;
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return agent.channel().SendResponse(stream, FileError(EISDIR, path));
  int err = MakeParents(DirName(path));
  if (err) return agent.channel().SendResponse(stream, FileError(err, DirName(path)));
  if (r.in_place) {
    bool created = false;
    UniqueFd fd = OpenInPlace(path, &created, &err);
    if (!fd) return agent.channel().SendResponse(stream, FileError(err, path));
    return agent.Attach(stream, std::make_unique<FileWriter>(agent, stream, path, "", std::move(fd),
                                                             mode, created, r));
  }
  static std::mt19937_64 rng{std::random_device{}()};
  char suffix[20];
  std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(rng()));
  std::string tmp = DirName(path) + "/." + BaseName(path) + ".kiln-" + suffix;
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) return agent.channel().SendResponse(stream, FileError(errno, path));
  agent.Attach(
      stream, std::make_unique<FileWriter>(agent, stream, path, tmp, std::move(fd), mode, true, r));
}

json Stat(const std::string& path, std::string_view xattr_prefix) {
  struct stat st;
  if (lstat(path.c_str(), &st) < 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return proto::FileStat{.exists = false, .entry = {.path = path}};
    return FileError(errno, path);
  }
  return proto::FileStat{.exists = true, .entry = EntryAt(path, st, xattr_prefix)};
}

json List(const std::string& path, int depth, std::string_view xattr_prefix) {
  struct stat st;
  if (stat(path.c_str(), &st) < 0) return FileError(errno, path);
  if (!S_ISDIR(st.st_mode)) return FileError(ENOTDIR, path);
  proto::FileList out;
  ListInto(path, depth, xattr_prefix, out.data, 10000);
  return out;
}

json Mkdir(const std::string& path, bool parents) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return FileError(EEXIST, path);
    if (!parents) return FileError(EEXIST, path);
    return Entry(path, st);
  }
  int err = parents ? MakeParents(path) : 0;
  if (!parents) {
    if (mkdir(path.c_str(), 0755) < 0)
      err = errno;
    else if (chown(path.c_str(), TheRunAs().uid, TheRunAs().gid) < 0)
      err = errno;
  }
  if (err) return FileError(err, path);
  stat(path.c_str(), &st);
  return Entry(path, st);
}

json Remove(const std::string& path, bool recursive) {
  struct stat st;
  if (lstat(path.c_str(), &st) < 0) {
    if (errno == ENOENT) return proto::FileRemoved{.removed = false};
    return FileError(errno, path);
  }
  if (path == "/") return FileError(EBUSY, path);
  int err = 0;
  if (S_ISDIR(st.st_mode)) {
    err = recursive ? RemoveTree(path) : (rmdir(path.c_str()) < 0 ? errno : 0);
  } else if (unlink(path.c_str()) < 0) {
    err = errno;
  }
  if (err) return FileError(err, path);
  return proto::FileRemoved{.removed = true};
}

json Rename(const std::string& from, const std::string& to, bool overwrite,
            std::string_view xattr_prefix) {
  struct stat st;
  if (lstat(from.c_str(), &st) < 0) return FileError(errno, from);
  if (!overwrite && lstat(to.c_str(), &st) == 0) return FileError(EEXIST, to);
  int err = MakeParents(DirName(to));
  if (err) return FileError(err, DirName(to));
  if (::rename(from.c_str(), to.c_str()) < 0) return FileError(errno, to);
  lstat(to.c_str(), &st);
  return EntryAt(to, st, xattr_prefix);
}

}  // namespace

proto::AgentError FileError(int err, const std::string& path) {
  const char* code = "io_error";
  switch (err) {
    case ENOENT:
      code = "file_not_found";
      break;
    case EISDIR:
      code = "is_a_directory";
      break;
    case ENOTDIR:
      code = "not_a_directory";
      break;
    case EEXIST:
      code = "file_exists";
      break;
    case EACCES:
    case EPERM:
      code = "permission_denied";
      break;
    case ENOTEMPTY:
      code = "directory_not_empty";
      break;
    case ENOSPC:
    case EDQUOT:
      code = "insufficient_storage";
      break;
    case EBUSY:
      code = "busy";
      break;
  }
  return proto::AgentError{.code = code, .message = path + ": " + std::strerror(err), .path = path};
}

std::optional<proto::AgentError> PrepareArchiveDir(const std::string& path, bool create) {
  std::string bad = CheckPath(path);
  if (!bad.empty())
    return proto::AgentError{.code = "invalid_request", .message = bad, .path = path};
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return std::nullopt;
    return FileError(ENOTDIR, path);
  }
  if (!create) return FileError(errno, path);
  int err = MakeParents(path);
  if (err) return FileError(err, path);
  return std::nullopt;
}

bool HandleFileOp(Agent& agent, uint32_t stream, const std::string& op, const json& req) {
  auto& ch = agent.channel();
  // Answers now, unless `path` is one the kernel would misread or the
  // attributes asked for are outside what may be.
  auto answer = [&](const std::string& path, auto&& handle, std::string_view prefix = {}) {
    std::string bad = CheckPath(path);
    if (bad.empty() && !prefix.empty()) bad = CheckXattrPrefix(prefix);
    if (!bad.empty()) return ch.SendError(stream, "invalid_request", bad);
    handle();
  };
  if (op == proto::kFileRead) {
    auto r = req.get<proto::FileReadRequest>();
    answer(r.path, [&] { Read(agent, stream, r.path); });
  } else if (op == proto::kFileWrite) {
    auto r = req.get<proto::FileWriteRequest>();
    answer(
        r.path, [&] { Write(agent, stream, r); }, r.xattr_prefix);
  } else if (op == proto::kFileStat) {
    auto r = req.get<proto::FileStatRequest>();
    answer(
        r.path, [&] { ch.SendResponse(stream, Stat(r.path, r.xattr_prefix)); }, r.xattr_prefix);
  } else if (op == proto::kFileList) {
    auto r = req.get<proto::FileListRequest>();
    answer(
        r.path,
        [&] { ch.SendResponse(stream, List(r.path, std::clamp(r.depth, 1, 16), r.xattr_prefix)); },
        r.xattr_prefix);
  } else if (op == proto::kFileMkdir) {
    auto r = req.get<proto::FileMkdirRequest>();
    answer(r.path, [&] { ch.SendResponse(stream, Mkdir(r.path, r.parents)); });
  } else if (op == proto::kFileRemove) {
    auto r = req.get<proto::FileRemoveRequest>();
    answer(r.path, [&] { ch.SendResponse(stream, Remove(r.path, r.recursive)); });
  } else if (op == proto::kFileRename) {
    auto r = req.get<proto::FileRenameRequest>();
    std::string bad = CheckPath(r.from);
    answer(
        bad.empty() ? r.to : r.from,
        [&] { ch.SendResponse(stream, Rename(r.from, r.to, r.overwrite, r.xattr_prefix)); },
        r.xattr_prefix);
  } else {
    return false;
  }
  return true;
}

}  // namespace kiln::agent
