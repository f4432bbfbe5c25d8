// kiln sandbox cat | cp: files between this machine and a sandbox. Folders
// travel as tar through the files/archive routes; the local side is packed
// and unpacked by the system's tar (mtimes and modes kept).
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "cli/calls.h"
#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/json_util.h"
#include "cli/output.h"
#include "cli/url.h"

extern char** environ;

namespace kiln::cli {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr std::uint64_t kMaxFile = 256ull << 20;   // PUT files/content
constexpr std::uint64_t kMaxArchive = 1ull << 30;  // PUT files/archive

// One side of `cp`: "ID:/path" names a sandbox's file, anything else a local one.
struct Location {
  std::optional<std::string> sandbox;
  std::string path;
};

Location ParseLocation(const std::string& text) {
  const std::size_t colon = text.find(':');
  if (colon != std::string::npos && colon > 0 && colon + 1 < text.size() &&
      text[colon + 1] == '/' && text.substr(0, colon).find('/') == std::string::npos) {
    return {text.substr(0, colon), text.substr(colon + 1)};
  }
  return {std::nullopt, text};
}

std::string FilesTarget(const std::string& id, std::string_view what, const std::string& path,
                        std::vector<std::pair<std::string, std::string>> extra = {}) {
  Query q;
  q.Add("path", path);
  for (auto& [k, v] : extra) q.Add(k, v);
  return SandboxTarget(id, std::string("/files/") + std::string(what)) + q.Str();
}

std::string BaseName(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

json RemoteStat(Context& ctx, const std::string& id, const std::string& path) {
  return ctx.http().Call(Method::kGet, FilesTarget(id, "stat", path), nullptr, kQueryOptions);
}

// Runs `tar` with `args`; its stdin is fed by `feed` (when given), its
// stdout handed to `sink` (when given). Throws ClientError unless it exits 0.
class Tar {
 public:
  explicit Tar(const std::vector<std::string>& args, bool write_stdin) {
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    if ((write_stdin && ::pipe2(in, O_CLOEXEC) != 0) ||
        (!write_stdin && ::pipe2(out, O_CLOEXEC) != 0)) {
      throw ClientError("local_error", std::string("pipe: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (write_stdin) {
      posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    } else {
      posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    }
    std::vector<std::string> argv = {"tar"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> raw;
    for (auto& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    int rc = ::posix_spawnp(&pid_, "tar", &actions, nullptr, raw.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (write_stdin) {
      ::close(in[0]);
      fd_ = in[1];
    } else {
      ::close(out[1]);
      fd_ = out[0];
    }
    if (rc != 0) {
      ::close(fd_);
      throw ClientError("local_error", std::string("cannot run tar: ") + std::strerror(rc));
    }
  }
  ~Tar() {
    if (fd_ >= 0) ::close(fd_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  Tar(const Tar&) = delete;
  Tar& operator=(const Tar&) = delete;

  bool Write(std::string_view bytes) { return WriteAll(fd_, bytes); }

  std::string ReadAll() {
    std::string data;
    char buf[64 * 1024];
    for (;;) {
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      data.append(buf, static_cast<std::size_t>(n));
      if (data.size() > kMaxArchive)
        throw ClientError("payload_too_large", "the folder packs to more than 1 GiB");
    }
    return data;
  }

  // Closes our end and waits; throws unless tar succeeded.
  void Finish(const std::string& what) {
    ::close(fd_);
    fd_ = -1;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      throw ClientError("local_error", "tar failed " + what);
    }
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
};

std::string ReadLocalFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UsageError("cannot open " + path + ": " + std::strerror(errno));
  std::string data;
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      throw UsageError("cannot read " + path + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
    if (data.size() > kMaxFile) {
      ::close(fd);
      throw UsageError(path + " is larger than 256 MiB, the most one file upload takes");
    }
  }
  ::close(fd);
  return data;
}

json Upload(Context& ctx, const std::string& local, const std::string& id, std::string remote) {
  struct stat st {};
  if (::stat(local.c_str(), &st) != 0)
    throw UsageError("cannot read " + local + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) {
    // The folder's contents land in `remote` (created).
    Tar tar({"-C", local, "-cf", "-", "."}, /*write_stdin=*/false);
    std::string bytes = tar.ReadAll();
    tar.Finish("packing " + local);
    return ctx.http().Upload(Method::kPut, FilesTarget(id, "archive", remote), std::move(bytes),
                             kTransferOptions);
  }
  json dest = RemoteStat(ctx, id, remote);
  if (BoolField(dest, "exists") && StringField(dest, "type") == "directory") {
    remote += (remote.back() == '/' ? "" : "/") + BaseName(local);
  }
  char mode[8];
  std::snprintf(mode, sizeof mode, "%o", st.st_mode & 0777);
  return ctx.http().Upload(Method::kPut, FilesTarget(id, "content", remote, {{"mode", mode}}),
                           ReadLocalFile(local), kTransferOptions);
}

json Download(Context& ctx, const std::string& id, const std::string& remote, std::string local) {
  json info = RemoteStat(ctx, id, remote);
  if (!BoolField(info, "exists")) {
    throw ApiError(404, "file_not_found", remote + ": no such file or folder in sandbox " + id,
                   json());
  }
  std::error_code ec;
  if (StringField(info, "type") == "directory") {
    fs::create_directories(local, ec);
    if (ec) throw UsageError("cannot create " + local + ": " + ec.message());
    // What a sandbox packs is the policy's choice: files become the local
    // user's, with the local umask and never setuid or setgid (as root,
    // tar would otherwise restore both).
    Tar tar({"-C", local, "-xf", "-", "--no-same-owner", "--no-same-permissions"},
            /*write_stdin=*/true);
    std::uint64_t bytes = 0;
    ctx.http().Download(FilesTarget(id, "archive", remote, {{"gzip", "false"}}), kTransferOptions,
                        [&](std::string_view chunk) {
                          bytes += chunk.size();
                          if (!tar.Write(chunk))
                            throw ClientError("local_error", "tar stopped reading");
                        });
    tar.Finish("unpacking into " + local);
    return json{{"path", local}, {"bytes", bytes}};
  }
  if (fs::is_directory(local, ec)) local = (fs::path(local) / BaseName(remote)).string();
  std::uint64_t bytes = DownloadToFile(
      ctx, FilesTarget(id, "content", remote), local,
      [&](const std::string& partial, std::uint64_t got) {
        if (auto size = IntField(info, "size"); size && static_cast<std::uint64_t>(*size) != got)
          throw ClientError("download_incomplete", remote + ": got " + std::to_string(got) +
                                                       " of " + std::to_string(*size) + " bytes");
        std::string mode = StringField(info, "mode");
        if (!mode.empty() && mode.find_first_not_of("01234567") == std::string::npos)
          ::chmod(partial.c_str(), static_cast<mode_t>(std::stoul(mode, nullptr, 8) & 0777));
      });
  return json{{"path", local}, {"bytes", bytes}};
}

}  // namespace

int CmdSandboxCat(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const std::string& path = args.positionals.at(1);
  ctx.http().Download(FilesTarget(id, "content", path), kTransferOptions,
                      [](std::string_view chunk) {
                        if (!WriteAll(STDOUT_FILENO, chunk)) throw Interrupted(SIGPIPE);
                      });
  return 0;
}

int CmdSandboxCp(Context& ctx, const ParsedArgs& args) {
  const Location from = ParseLocation(args.positionals.at(0));
  const Location to = ParseLocation(args.positionals.at(1));
  if (from.sandbox && to.sandbox) {
    throw UsageError("copy between two sandboxes is not supported; copy through this machine");
  }
  if (!from.sandbox && !to.sandbox) throw UsageError("one side must be a sandbox path, ID:/path");
  std::signal(SIGPIPE, SIG_IGN);  // a tar that stops reading fails the write, not the CLI
  json answer = from.sandbox ? Download(ctx, *from.sandbox, from.path, to.path)
                             : Upload(ctx, from.path, *to.sandbox, to.path);
  return PrintAnswer(ctx, answer, "");
}

}  // namespace kiln::cli
