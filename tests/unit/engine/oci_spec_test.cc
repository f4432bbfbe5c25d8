// The OCI runtime spec of a sandbox (src/engine/oci_spec.h).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "engine/oci_spec.h"

namespace kiln::engine {
namespace oci_spec_test {
namespace {

using nlohmann::json;

CreateParams Params(int vcpu, int memory_mib, int disk_mib) {
  CreateParams p;
  p.id = "sb-1";
  p.shape.vcpu = vcpu;
  p.shape.memory_mib = memory_mib;
  p.shape.disk_mib = disk_mib;
  p.rootfs = "/var/lib/kiln/images/base/rootfs";
  return p;
}

const SpecPaths kPaths{"/run/kiln/sb-1/rootfs", "/usr/lib/kiln/kiln-agent", "/kiln/sb-1"};

const json* FindMount(const json& spec, const std::string& dest) {
  for (const auto& m : spec.at("mounts"))
    if (m.at("destination") == dest) return &m;
  return nullptr;
}

bool HasOption(const json& mount, const std::string& opt) {
  if (!mount.contains("options")) return false;
  for (const auto& o : mount["options"])
    if (o == opt) return true;
  return false;
}

TEST(OciSpecTest, HostMemoryLimitIsAboveTheSandboxMemory) {
  for (int mib : {128, 512, 2048, 4096, 65536}) {
    int64_t limit = HostMemoryLimitBytes(mib);
    EXPECT_GT(limit, static_cast<int64_t>(mib) << 20) << mib;
    // Whole MiB, with at least 256 MiB of headroom for gVisor itself.
    EXPECT_EQ(limit % (1 << 20), 0) << mib;
    EXPECT_GE(limit - (static_cast<int64_t>(mib) << 20), int64_t{256} << 20) << mib;
  }
  EXPECT_EQ(HostMemoryLimitBytes(2048), int64_t{2048 + 256 + 256} << 20);
  // Monotonic in the requested memory.
  EXPECT_LT(HostMemoryLimitBytes(1024), HostMemoryLimitBytes(1025));
  // No 32-bit overflow at the API's maximum.
  EXPECT_GT(HostMemoryLimitBytes(65536), int64_t{64} << 30);
}

// runsc takes the Sentry's total memory (what `free` shows) from the spec's
// limit, so the spec says memoryMiB; the engine raises it afterwards.
TEST(OciSpecTest, SpecMemoryLimitIsMemoryMiB) {
  for (int mib : {128, 2048, 8192}) {
    json spec = BuildOciSpec(Params(2, mib, 4096), kPaths);
    const json& limit = spec.at("linux").at("resources").at("memory").at("limit");
    ASSERT_TRUE(limit.is_number_integer());
    EXPECT_EQ(limit.get<int64_t>(), static_cast<int64_t>(mib) << 20);
  }
}

TEST(OciSpecTest, CpuQuotaIsVcpuTimesPeriod) {
  for (int vcpu : {1, 2, 4, 16}) {
    json spec = BuildOciSpec(Params(vcpu, 2048, 4096), kPaths);
    const json& cpu = spec.at("linux").at("resources").at("cpu");
    EXPECT_EQ(cpu.at("quota").get<int64_t>(), int64_t{vcpu} * 100000) << vcpu;
    EXPECT_EQ(cpu.at("period").get<int64_t>(), 100000);
    EXPECT_EQ(cpu.at("shares").get<int>(), kCpuWeight);
  }
}

TEST(OciSpecTest, CpuWeightComesFromTheParams) {
  CreateParams p = Params(1, 512, 4096);
  p.cpu_weight = kStartupCpuWeight;
  json spec = BuildOciSpec(p, kPaths);
  EXPECT_EQ(spec.at("linux").at("resources").at("cpu").at("shares").get<int>(), kStartupCpuWeight);
}

TEST(OciSpecTest, PidsLimitIsSet) {
  json spec = BuildOciSpec(Params(2, 2048, 4096), kPaths);
  const json& pids = spec.at("linux").at("resources").at("pids");
  ASSERT_TRUE(pids.contains("limit"));
  EXPECT_GT(pids["limit"].get<int64_t>(), 0);
  EXPECT_LE(pids["limit"].get<int64_t>(), 65536);
}

// /workspace and /tmp are part of the root overlay (on host disk, sized by
// diskMiB), not tmpfs mounts held in memory.
TEST(OciSpecTest, DiskIsTheRootOverlayNotTmpfs) {
  json spec = BuildOciSpec(Params(2, 2048, 777), kPaths);
  for (const char* dest : {"/workspace", "/tmp"}) EXPECT_EQ(FindMount(spec, dest), nullptr) << dest;
  EXPECT_EQ(spec.at("root").at("readonly"), false);
  EXPECT_EQ(RootOverlayFlag("/var/lib/kiln/sandboxes/s1", 777),
            "--overlay2=root:dir=/var/lib/kiln/sandboxes/s1,size=777m");
}

TEST(OciSpecTest, NetworkNamespaceIsPresent) {
  json spec = BuildOciSpec(Params(2, 2048, 4096), kPaths);
  std::set<std::string> types;
  for (const auto& ns : spec.at("linux").at("namespaces"))
    types.insert(ns.at("type").get<std::string>());
  EXPECT_TRUE(types.count("network"));
  EXPECT_TRUE(types.count("pid"));
  EXPECT_TRUE(types.count("mount"));
  // A namespace with a "path" would join an existing one (e.g. the host's).
  for (const auto& ns : spec["linux"]["namespaces"]) EXPECT_FALSE(ns.contains("path")) << ns.dump();
}

TEST(OciSpecTest, AgentIsBindMountedReadOnlyAndIsTheEntrypoint) {
  json spec = BuildOciSpec(Params(2, 2048, 4096), kPaths);
  const json* agent = FindMount(spec, "/opt/kiln/kiln-agent");
  ASSERT_NE(agent, nullptr);
  EXPECT_EQ(agent->at("type"), "bind");
  EXPECT_EQ(agent->at("source"), kPaths.agent_binary);
  EXPECT_TRUE(HasOption(*agent, "ro"));
  EXPECT_FALSE(HasOption(*agent, "rw"));
  const json* sudo = FindMount(spec, "/usr/bin/sudo");
  ASSERT_NE(sudo, nullptr);
  EXPECT_EQ(sudo->at("source"), kPaths.agent_binary);
  EXPECT_TRUE(HasOption(*sudo, "ro"));
  EXPECT_EQ(spec.at("process").at("args"), json::array({"/opt/kiln/kiln-agent"}));
}

TEST(OciSpecTest, RootIsWritableRootfsAndCgroupPathIsUsed) {
  json spec = BuildOciSpec(Params(2, 2048, 4096), kPaths);
  EXPECT_EQ(spec.at("root").at("path"), kPaths.rootfs);
  ASSERT_TRUE(spec["root"].at("readonly").is_boolean());
  EXPECT_FALSE(spec["root"]["readonly"].get<bool>());
  EXPECT_EQ(spec.at("linux").at("cgroupsPath"), kPaths.cgroup_path);
  EXPECT_EQ(spec.at("ociVersion"), "1.0.0");
}

// CAP_SYS_ADMIN is PID 1's for its first step only: kiln-agent drops it from
// every set before anything else runs (agent/home_alias.h; checked inside a
// sandbox by test_images_base.py::test_home_user_is_the_workspace_under_its_own_name).
TEST(OciSpecTest, NoRawNetworkingCapability) {
  json spec = BuildOciSpec(Params(2, 2048, 4096), kPaths);
  for (const char* set : {"bounding", "effective", "permitted"}) {
    const json& caps = spec.at("process").at("capabilities").at(set);
    ASSERT_TRUE(caps.is_array()) << set;
    for (const auto& c : caps) EXPECT_NE(c, "CAP_NET_RAW") << set;
  }
}

TEST(OciSpecTest, SysIsReadOnly) {
  json spec = BuildOciSpec(Params(2, 2048, 4096), kPaths);
  const json* sys = FindMount(spec, "/sys");
  ASSERT_NE(sys, nullptr);
  EXPECT_TRUE(HasOption(*sys, "ro"));
}

TEST(OciSpecTest, AnUpperTarIsAnnotatedOnlyWhenGiven) {
  json plain = BuildOciSpec(Params(2, 2048, 4096), kPaths);
  EXPECT_TRUE(plain.at("annotations").empty());
  SpecPaths paths = kPaths;
  paths.upper_tar = "rootfs-upper.tar";
  json spec = BuildOciSpec(Params(2, 2048, 4096), paths);
  EXPECT_EQ(spec.at("annotations").at("dev.gvisor.tar.rootfs.upper"), "rootfs-upper.tar");
}

}  // namespace
}  // namespace oci_spec_test
}  // namespace kiln::engine
