#include "engine/oci_spec.h"

namespace kiln::engine {

using nlohmann::json;

int64_t HostMemoryLimitBytes(int memory_mib) {
  int64_t headroom_mib = 256 + memory_mib / 8;
  return (static_cast<int64_t>(memory_mib) + headroom_mib) << 20;
}

std::string RootOverlayFlag(const std::string& sandbox_dir, int disk_mib) {
  return "--overlay2=root:dir=" + sandbox_dir + ",size=" + std::to_string(disk_mib) + "m";
}

json BuildOciSpec(const CreateParams& p, const SpecPaths& paths) {
  // Docker's default capability set, without NET_RAW: enough for sudo and
  // package managers inside, nothing that reaches past the Sentry. Plus
  // SYS_PTRACE, which gVisor keeps inside the sandbox: the agent (root)
  // reads /proc/<pid>/environ of the user's processes to find what a
  // command left behind, and current gVisor checks ptrace access there.
  // And SYS_ADMIN for PID 1's first step only: it binds /workspace onto
  // /home/user, then drops it from its bounding set before anything else
  // runs (agent/home_alias.h).
  json caps = json::array({"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
                           "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
                           "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
                           "CAP_SYS_PTRACE", "CAP_SYS_ADMIN"});
  json mounts = json::array({
      {{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
      {{"destination", "/dev"},
       {"type", "tmpfs"},
       {"source", "tmpfs"},
       {"options", {"nosuid", "mode=755"}}},
      {{"destination", "/dev/pts"},
       {"type", "devpts"},
       {"source", "devpts"},
       {"options", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}}},
      {{"destination", "/dev/shm"},
       {"type", "tmpfs"},
       {"source", "shm"},
       {"options", {"nosuid", "nodev", "mode=1777", "size=256m"}}},
      {{"destination", "/sys"},
       {"type", "sysfs"},
       {"source", "sysfs"},
       {"options", {"nosuid", "noexec", "nodev", "ro"}}},
      {{"destination", "/opt/kiln/kiln-agent"},
       {"type", "bind"},
       {"source", paths.agent_binary},
       {"options", {"rbind", "ro"}}},
      // sudo is the agent in its client role (see agent/sudo.h).
      {{"destination", "/usr/bin/sudo"},
       {"type", "bind"},
       {"source", paths.agent_binary},
       {"options", {"rbind", "ro"}}},
  });
  int64_t quota = static_cast<int64_t>(p.shape.vcpu) * 100000;
  json annotations = json::object();
  // runsc unpacks it into the root overlay's upper layer before PID 1 runs.
  if (!paths.upper_tar.empty()) annotations["dev.gvisor.tar.rootfs.upper"] = paths.upper_tar;
  return json{
      {"ociVersion", "1.0.0"},
      {"process",
       {{"user", {{"uid", 0}, {"gid", 0}}},
        {"args", {"/opt/kiln/kiln-agent"}},
        {"env",
         {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
          "KILN_RUN_AS=" + json(p.run_as).dump()}},
        {"cwd", "/"},
        {"capabilities", {{"bounding", caps}, {"effective", caps}, {"permitted", caps}}},
        {"rlimits", {{{"type", "RLIMIT_NOFILE"}, {"hard", 65536}, {"soft", 65536}}}},
        {"noNewPrivileges", false}}},
      {"root", {{"path", paths.rootfs}, {"readonly", false}}},
      {"hostname", "kiln"},
      {"annotations", annotations},
      {"mounts", mounts},
      {"linux",
       {{"namespaces",
         {{{"type", "pid"}},
          {{"type", "network"}},
          {{"type", "ipc"}},
          {{"type", "uts"}},
          {{"type", "mount"}}}},
        {"cgroupsPath", paths.cgroup_path},
        {"resources",
         // memoryMiB while runsc starts it: runsc tells the Sentry its total
         // memory from this limit, so `free` inside shows memoryMiB. The
         // engine raises it to HostMemoryLimitBytes as soon as runsc returns.
         {{"memory", {{"limit", static_cast<int64_t>(p.shape.memory_mib) << 20}}},
          {"cpu", {{"quota", quota}, {"period", 100000}, {"shares", p.cpu_weight}}},
          // gVisor maps every address space to a host process: this bounds
          // what a fork bomb can make on the host.
          {"pids", {{"limit", 8192}}}}}}},
  };
}

}  // namespace kiln::engine
