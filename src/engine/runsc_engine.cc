#include "engine/runsc_engine.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string_view>
#include <system_error>
#include <thread>

#include "common/log.h"
#include "common/subprocess.h"
#include "common/time.h"
#include "engine/agent_client.h"
#include "engine/oci_spec.h"

namespace kiln::engine {
namespace fs = std::filesystem;

namespace {

constexpr const char* kCgroupParent = "/kiln";
constexpr const char* kControllers[] = {"memory",  "cpu",     "cpuacct", "pids",    "cpuset",
                                        "devices", "freezer", "blkio",   "systemd", "unified"};

std::string CgroupDir(const std::string& controller, const std::string& id) {
  return "/sys/fs/cgroup/" + controller + kCgroupParent + "/" + id;
}

// One value into a cgroup control file; false if the kernel refused it.
bool WriteCgroupFile(const std::string& path, const std::string& value) {
  std::ofstream f(path);
  return static_cast<bool>(f << value << std::flush);
}

uint64_t ReadU64(const std::string& path) {
  std::ifstream f(path);
  uint64_t v = 0;
  f >> v;
  return v;
}

// One line of a cgroup v1 stat file ("cache 1234").
uint64_t ReadStat(const std::string& path, std::string_view key) {
  std::ifstream f(path);
  std::string name;
  uint64_t v = 0;
  while (f >> name >> v) {
    if (name == key) return v;
  }
  return 0;
}

// The blocks of the root overlay's file store: runsc's --overlay2
// root:dir=<sandbox dir> keeps the upper layer in a sparse file it makes
// there and unlinks at once ("<dir>/runsc-filestore-N (deleted)"), so it is
// found through the descriptors of the sandbox's processes (`procs`, its
// cgroup's): what the sandbox's writes take on the host's disk. Matched by
// name and by the folder's device, not by the whole path: the sentry sees
// its descriptors from its own mount namespace, where a bind-mounted
// state folder may read differently.
uint64_t FilestoreBytes(const std::string& dir, const std::string& procs) {
  struct stat folder;
  if (::stat(dir.c_str(), &folder) != 0) return 0;
  std::ifstream in(procs);
  uint64_t total = 0;
  std::set<std::pair<dev_t, ino_t>> seen;  // one file, however many descriptors
  for (pid_t pid; in >> pid;) {
    std::error_code ec;
    std::string fds = "/proc/" + std::to_string(pid) + "/fd";
    for (const auto& e : fs::directory_iterator(fds, ec)) {
      char target[PATH_MAX];
      ssize_t n = ::readlink(e.path().c_str(), target, sizeof target - 1);
      if (n <= 0 || std::string_view(target, static_cast<size_t>(n)).find("/runsc-filestore-") ==
                        std::string_view::npos)
        continue;
      struct stat st;
      if (::stat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == folder.st_dev &&
          seen.emplace(st.st_dev, st.st_ino).second)
        total += static_cast<uint64_t>(st.st_blocks) * 512;
    }
    if (total > 0) break;  // one process holds it (the sentry)
  }
  return total;
}

}  // namespace

Result<std::string> ProbeRunsc(const std::string& runsc) {
  auto fail = [&runsc](const std::string& what) {
    return Status(Code::kStartupFailed, "runsc " + runsc + " " + what, {{"runsc", runsc}});
  };
  // A bare name is looked up in PATH by the spawn; a path is checked first,
  // so that "not found" and "not executable" are told apart.
  if (runsc.find('/') != std::string::npos) {
    struct stat st;
    if (::stat(runsc.c_str(), &st) != 0) return fail("not found: " + std::string(strerror(errno)));
    if (!S_ISREG(st.st_mode)) return fail("is not a regular file");
    if (::access(runsc.c_str(), X_OK) != 0) return fail("is not executable");
  }
  ProcessOutput r = RunProcess({runsc, "--version"}, 10000);
  if (r.status < 0) return fail("could not be started, or `--version` took over 10 s");
  auto first_line = [](const std::string& text) {
    std::string line = text.substr(0, text.find_first_of("\r\n"));
    return line.size() > 200 ? line.substr(0, 200) + "..." : line;
  };
  if (WIFSIGNALED(r.status))
    return fail("`--version` was killed by signal " + std::to_string(WTERMSIG(r.status)));
  if (WEXITSTATUS(r.status) != 0) {
    std::string said = first_line(r.err.empty() ? r.out : r.err);
    return fail("`--version` exited with status " + std::to_string(WEXITSTATUS(r.status)) +
                (said.empty() ? "" : ": " + said));
  }
  static const std::string kPrefix = "runsc version ";
  size_t at = r.out.find(kPrefix);
  if (at == std::string::npos)
    return fail("`--version` printed no `runsc version` line (is it runsc?): \"" +
                first_line(r.out) + "\"");
  size_t from = at + kPrefix.size();
  return r.out.substr(from, r.out.find_first_of("\r\n", from) - from);
}

std::string RunscVersion(const std::string& runsc) {
  Result<std::string> v = ProbeRunsc(runsc);
  return v.ok() ? *v : "";
}

RunscEngine::RunscEngine(RunscOptions options)
    : opts_(std::move(options)), agents_(opts_.state_dir + "/agents", opts_.agent_binary) {
  fs::create_directories(opts_.state_dir + "/sandboxes");
  fs::create_directories(opts_.state_dir + "/runsc");
  info_ = {"gvisor", opts_.runsc, RunscVersion(opts_.runsc), opts_.pinned_version};
  if (opts_.max_starts <= 0)
    opts_.max_starts = 2 * std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

RunscEngine::~RunscEngine() { ReleaseSharedState(); }

void RunscEngine::ReleaseSharedState() {
  // Concurrent cold starts may stack several mounts on the same path.
  std::string pin = opts_.state_dir + "/runsc/null-netns";
  while (::umount2(pin.c_str(), MNT_DETACH) == 0) {
  }
}

std::string RunscEngine::SandboxDir(const std::string& id) const {
  return opts_.state_dir + "/sandboxes/" + id;
}

std::vector<std::string> RunscEngine::RunscArgs() const {
  return {opts_.runsc, "--root", opts_.state_dir + "/runsc", "--platform", opts_.platform};
}

// Upper tars. A disk snapshot's copy boots with runsc's rootfs-upper
// annotation, and runsc then refuses to restore any checkpoint of that
// sandbox (a pause, a snapshot, a fork) unless the restore's spec names the
// same annotation with the same value and the file is there to open (it is
// not read: a restore's root comes from the checkpoint). So the value is
// one relative name, the file sits in each sandbox's own directory (runsc
// runs there), and a checkpoint of an annotated sandbox carries a marker
// file that makes its restores annotated too, with an empty tar.
namespace {
constexpr char kUpperTarFile[] = "rootfs-upper.tar";
constexpr char kUpperMarker[] = "kiln-upper-annotated";

// Puts `source` (or, if empty, an empty tar) at `dest`.
Status PlaceUpperTar(const std::string& source, const std::string& dest) {
  std::error_code ec;
  if (source.empty()) {
    std::ofstream f(dest, std::ios::binary);
    f << std::string(1024, '\0');  // a tar's end: two zero blocks
    return f.good() ? Status::Ok() : Status(Code::kStartupFailed, "cannot write " + dest);
  }
  fs::create_hard_link(source, dest, ec);
  if (ec) fs::copy_file(source, dest, ec);  // another filesystem
  if (ec) return Status(Code::kStartupFailed, "cannot place " + source + ": " + ec.message());
  return Status::Ok();
}
}  // namespace

Result<std::shared_ptr<AgentChannel>> RunscEngine::Create(const CreateParams& p) {
  UpperTar upper{!p.rootfs_upper_tar.empty(), p.rootfs_upper_tar};
  return Launch(p, {"run", "--detach"}, upper, agents_.current());
}

Result<std::shared_ptr<AgentChannel>> RunscEngine::Restore(const CreateParams& p,
                                                           const std::string& checkpoint) {
  // Uncompressed pages, read straight from the page cache.
  CreateParams boosted = p;
  boosted.cpu_weight = p.background ? kPoolCpuWeight : kStartupCpuWeight;
  boosted.rootfs_upper_tar.clear();
  std::error_code ec;
  UpperTar upper{fs::exists(checkpoint + "/" + kUpperMarker, ec), ""};
  Result<std::optional<Sha256Digest>> agent = agents_.Of(checkpoint);
  if (!agent.ok()) return agent.status();
  return Launch(boosted, {"restore", "--detach", "--image-path", checkpoint}, upper, *agent);
}

Result<CheckpointStats> RunscEngine::Checkpoint(const std::string& id, const std::string& dir) {
  auto fail = [](std::string message) { return Status(Code::kSnapshotFailed, std::move(message)); };
  std::error_code ec;
  if (fs::exists(dir)) return fail(dir + " exists");
  CheckpointStats stats;
  // Capture into a temporary name and rename when complete, so a failed or
  // interrupted capture never leaves something that looks restorable.
  std::string tmp = dir + ".partial";
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  auto args = RunscArgs();
  args.insert(args.end(),
              {"checkpoint", "--leave-running", "--compression=none", "--image-path", tmp, id});
  int64_t t0 = MonotonicNowMs();
  ProcessOutput r = RunProcess(args, 120000);
  stats.duration_ms = MonotonicNowMs() - t0;
  if (!r.ok()) {
    fs::remove_all(tmp, ec);
    // runsc passes the host's ENOSPC/EDQUOT on in its words: a full state
    // disk is the operator's to fix (507), not a broken sandbox.
    std::string said = r.Describe();
    if (said.find("no space left on device") != std::string::npos ||
        said.find("disk quota exceeded") != std::string::npos)
      return Status(Code::kNoSpace, "no space left on the state disk for the snapshot: " + said);
    return fail("runsc checkpoint failed: " + said);
  }
  // Its restores must name the upper tar this sandbox booted with.
  if (fs::exists(SandboxDir(id) + "/" + kUpperTarFile, ec))
    std::ofstream(tmp + "/" + kUpperMarker) << "the sandbox booted with a rootfs upper tar\n";
  // And the agent build it runs.
  AgentBinaries::Mark(tmp, AgentBinaries::MarkOf(SandboxDir(id)));
  for (const auto& e : fs::recursive_directory_iterator(tmp, ec)) {
    if (e.is_regular_file()) stats.bytes += e.file_size();
  }
  fs::rename(tmp, dir, ec);
  if (ec) {
    std::string why = ec.message();
    fs::remove_all(tmp, ec);
    return fail("cannot move the checkpoint into place: " + why);
  }
  return stats;
}

Status RunscEngine::ExportUpper(const std::string& id, const std::string& tar_path) {
  // Measured (runsc 2026-09-05, a Debian root with a few changes): 70 ms,
  // against a `tar` run by the agent over the whole root, which cannot see
  // deletions at all. The sandbox keeps running.
  auto args = RunscArgs();
  args.insert(args.end(), {"tar", "rootfs-upper", "--file", tar_path, id});
  ProcessOutput r = RunProcess(args, 600000);
  if (!r.ok()) return Status(Code::kIoError, "runsc tar rootfs-upper failed: " + r.Describe());
  return Status::Ok();
}

Result<std::shared_ptr<AgentChannel>> RunscEngine::Launch(
    const CreateParams& p, const std::vector<std::string>& verb, const UpperTar& upper,
    const std::optional<Sha256Digest>& agent) {
  auto fail = [](std::string message) { return Status(Code::kStartupFailed, std::move(message)); };
  int64_t t0 = MonotonicNowMs();
  std::string dir = SandboxDir(p.id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail("cannot create " + dir + ": " + ec.message());
  SpecPaths paths{p.rootfs, agents_.PathOf(agent), std::string(kCgroupParent) + "/" + p.id,
                  upper.annotate ? kUpperTarFile : ""};
  AgentBinaries::Mark(dir, agent);
  if (upper.annotate) {
    if (Status placed = PlaceUpperTar(upper.source, dir + "/" + kUpperTarFile); !placed.ok()) {
      Destroy(p.id);
      return placed;
    }
  }
  {
    std::ofstream spec(dir + "/config.json");
    spec << BuildOciSpec(p, paths).dump(2);
  }
  std::string in = dir + "/agent.in", out = dir + "/agent.out", err = dir + "/agent.err";
  if (mkfifo(in.c_str(), 0600) < 0 || mkfifo(out.c_str(), 0600) < 0 ||
      mkfifo(err.c_str(), 0600) < 0) {
    std::string why = strerror(errno);
    Destroy(p.id);
    return fail("mkfifo: " + why);
  }
  // O_RDWR opens of a FIFO never block; the sandbox inherits these as its
  // stdin, stdout and stderr and keeps them after runsc exits. Its stderr
  // reaches sandbox.log through the capped drain (stderr_drain.h).
  UniqueFd in_fd(::open(in.c_str(), O_RDWR | O_CLOEXEC));
  UniqueFd out_fd(::open(out.c_str(), O_RDWR | O_CLOEXEC));
  UniqueFd log_fd(::open(err.c_str(), O_RDWR | O_CLOEXEC));
  drain_.Add(p.id, UniqueFd(::open(err.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)),
             dir + "/sandbox.log");
  auto args = RunscArgs();
  for (const char* a : {"--network=none", "--cpu-num-from-quota"}) args.push_back(a);
  // runsc reads the spec's upper-tar annotation only when told to (kiln
  // writes the spec; nothing inside a sandbox can set it).
  if (upper.annotate) args.push_back("--allow-rootfs-tar-annotation");
  args.push_back(RootOverlayFlag(dir, p.shape.disk_mib));
  args.insert(args.end(), verb.begin(), verb.end());
  args.push_back("--bundle");
  args.push_back(dir);
  args.push_back(p.id);
  // A pool's refill at a low priority from its first instruction: runsc and
  // the sandbox and gofer it starts inherit it (the cgroup's shares are
  // kPoolCpuWeight as well). Within its own cgroup a sandbox's nice value
  // weighs nothing against other sandboxes, so once handed out (and its
  // shares raised) the copy runs as any other.
  if (p.background) args.insert(args.begin(), {"nice", "-n", "10"});
  int64_t t1 = MonotonicNowMs();
  int status = -1;
  bool timed_out = false;
  {
    std::unique_lock slot(starts_mu_);
    starts_cv_.wait(slot, [&] { return starts_ < opts_.max_starts; });
    ++starts_;
    slot.unlock();
    t1 = MonotonicNowMs();
    // In the sandbox's directory: the spec names its upper tar relative to it.
    pid_t pid = SpawnProcess(args, in_fd.get(), out_fd.get(), log_fd.get(), {}, dir);
    if (pid >= 0) {
      status = WaitProcess(pid, opts_.start_timeout_ms);
      timed_out = status == -1 && MonotonicNowMs() - t1 >= opts_.start_timeout_ms;
    }
    slot.lock();
    --starts_;
    starts_cv_.notify_one();
  }
  int64_t t2 = MonotonicNowMs();
  log_fd.reset();
  if (status != 0) {
    drain_.Flush(p.id);  // runsc's last words, into the log
    std::ifstream log(dir + "/sandbox.log");
    std::string text((std::istreambuf_iterator<char>(log)), {});
    if (text.size() > 600) text = text.substr(text.size() - 600);
    Destroy(p.id);
    if (timed_out)
      return Status(Code::kNoCapacity, "runsc " + verb[0] + " did not finish within " +
                                           std::to_string(opts_.start_timeout_ms / 1000) +
                                           " s (the host is too busy): it was stopped; retry" +
                                           (text.empty() ? "" : ". runsc said: " + text))
          .WithRetryAfter(2);
    return fail("runsc " + verb[0] + " failed: " + (text.empty() ? "it said nothing" : text));
  }
  auto conn = AgentConnection::Connect(in, out, opts_.start_timeout_ms, p.id);
  in_fd.reset();
  out_fd.reset();
  if (!conn.ok()) {
    Destroy(p.id);
    return conn.status();
  }
  RaiseMemoryLimit(p.id, p.shape);
  GuardMemory(p.id, p.shape, *conn);
  ContinueOnSilence(p.id, **conn);
  LogInfo("sandbox launched", {{"event", "engine.launch"},
                               {"sandboxId", p.id},
                               {"verb", verb[0]},
                               {"prepareMs", t1 - t0},
                               {"runscMs", t2 - t1},
                               {"connectMs", MonotonicNowMs() - t2}});
  return std::shared_ptr<AgentChannel>(std::move(*conn));
}

void RunscEngine::RaiseMemoryLimit(const std::string& id, const Shape& shape) {
  std::string path = CgroupDir("memory", id) + "/memory.limit_in_bytes";
  if (!WriteCgroupFile(path, std::to_string(HostMemoryLimitBytes(shape.memory_mib))))
    LogWarn("cannot give the sandbox its memory headroom: it runs at memoryMiB",
            {{"sandboxId", id}, {"path", path}});
}

void RunscEngine::GuardMemory(const std::string& id, const Shape& shape,
                              const std::shared_ptr<AgentChannel>& conn) {
  std::weak_ptr<AgentChannel> weak = conn;
  int64_t threshold = static_cast<int64_t>(shape.memory_mib) << 20;
  bool guarded = guard_.Watch(id, CgroupDir("memory", id), threshold, [weak, id] {
    auto c = weak.lock();
    if (!c) return;
    auto r = AgentClient(std::move(c)).Oom(5000);
    LogWarn("sandbox over its memory: killed its largest process",
            {{"sandboxId", id},
             {"agent", r.ok() ? nlohmann::json(*r) : nlohmann::json(r.status().ToString())}});
  });
  if (!guarded)
    LogWarn("no memory guard (cgroup v1 memory controller missing)", {{"sandboxId", id}});
}

Result<std::shared_ptr<AgentChannel>> RunscEngine::Attach(const std::string& id,
                                                          const Shape& shape) {
  auto args = RunscArgs();
  args.insert(args.end(), {"state", id});
  ProcessOutput r = RunProcess(args, 10000);
  nlohmann::json state = nlohmann::json::parse(r.out, nullptr, false);
  if (!r.ok() || !state.is_object() || state.value("status", "") != "running") {
    return Status(Code::kNotRunning,
                  "not running: " + (r.ok() ? state.value("status", "unknown") : r.Describe()));
  }
  // The sandbox holds both FIFOs open itself, so they outlive the daemon
  // that made them; a new session skips whatever the old one left behind.
  std::string dir = SandboxDir(id);
  auto conn = AgentConnection::Connect(dir + "/agent.in", dir + "/agent.out", 5000, id);
  if (!conn.ok()) return conn.status();
  // A sandbox started by an older kilnd has a plain file for stderr.
  if (UniqueFd err(::open((dir + "/agent.err").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)); err)
    drain_.Add(id, std::move(err), dir + "/sandbox.log");
  GuardMemory(id, shape, *conn);
  ContinueOnSilence(id, **conn);
  return std::shared_ptr<AgentChannel>(std::move(*conn));
}

void RunscEngine::ContinueOnSilence(const std::string& id, AgentConnection& conn) {
  auto args = RunscArgs();
  args.insert(args.end(), {"kill", id, "CONT"});
  conn.OnSilence([args, id] {
    // Off the waiting thread: the caller is answering a timeout already.
    try {
      std::thread([args, id] {
        ProcessOutput r = RunProcess(args, 10000);
        if (!r.ok())
          LogWarn("runsc kill CONT failed", {{"sandboxId", id}, {"detail", r.Describe()}});
      }).detach();
    } catch (const std::system_error&) {
      // No thread to spare: the next silence tries again.
    }
  });
}

void RunscEngine::Destroy(const std::string& id) {
  guard_.Unwatch(id);
  drain_.Remove(id);
  // A frozen task cannot act on SIGKILL until it is thawed (a sandbox
  // without a freezer cgroup fails the write at once).
  Thaw(id);
  auto args = RunscArgs();
  args.insert(args.end(), {"delete", "--force", id});
  for (int attempt = 0; attempt < 3; ++attempt) {
    ProcessOutput r = RunProcess(args, 20000);
    if (r.ok() || r.err.find("does not exist") != std::string::npos) break;
    LogWarn("runsc delete failed",
            {{"sandboxId", id}, {"attempt", attempt}, {"detail", r.Describe()}});
    // Take the sandbox down from the host side: every task in its cgroup.
    std::ifstream procs(CgroupDir("pids", id) + "/cgroup.procs");
    for (pid_t pid; procs >> pid;) ::kill(pid, SIGKILL);
  }
  // runsc removes its cgroups; make sure, so that nothing of it remains.
  bool left = false;
  for (const char* c : kControllers) {
    std::string d = CgroupDir(c, id);
    if (::access(d.c_str(), F_OK) == 0 && ::rmdir(d.c_str()) < 0) {
      left = true;
      LogWarn("cannot remove cgroup", {{"sandboxId", id}, {"path", d}, {"error", strerror(errno)}});
    }
  }
  // Keep the directory of a sandbox that could not be removed: it is how the
  // next start of kilnd finds it and tries again.
  if (left) return;
  std::error_code ec;
  fs::remove_all(SandboxDir(id), ec);
}

bool RunscEngine::Thaw(const std::string& id) {
  std::string path = CgroupDir("freezer", id) + "/freezer.state";
  if (!WriteCgroupFile(path, "THAWED")) return false;
  // THAWED is reached at once, FREEZING in about a millisecond here.
  for (int i = 0; i < 1000; ++i) {
    std::ifstream f(path);
    std::string now;
    if (!(f >> now)) return false;
    if (now == "THAWED") return true;
    ::usleep(1000);
  }
  LogWarn("cgroup freezer did not thaw", {{"sandboxId", id}});
  return false;
}

void RunscEngine::SetCpuWeight(const std::string& id, int weight) {
  WriteCgroupFile(CgroupDir("cpu", id) + "/cpu.shares", std::to_string(weight));
}

Usage RunscEngine::GetUsage(const std::string& id) {
  Usage u;
  u.cpu_ns = ReadU64(CgroupDir("cpuacct", id) + "/cpuacct.usage");
  u.memory_bytes = ReadU64(CgroupDir("memory", id) + "/memory.usage_in_bytes");
  return u;
}

StorageUsage RunscEngine::GetStorageUsage(const std::string& id) {
  StorageUsage u;
  u.memory_cache_bytes = ReadStat(CgroupDir("memory", id) + "/memory.stat", "cache");
  u.disk_bytes = FilestoreBytes(SandboxDir(id), CgroupDir("pids", id) + "/cgroup.procs");
  return u;
}

std::vector<std::string> RunscEngine::List() {
  std::vector<std::string> ids;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(opts_.state_dir + "/sandboxes", ec)) {
    if (e.is_directory()) ids.push_back(e.path().filename());
  }
  return ids;
}

}  // namespace kiln::engine
