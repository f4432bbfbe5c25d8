// kiln-agent builds by digest (src/engine/agent_binaries.h): what a restore
// binds for a checkpoint taken before and after an upgrade, and for one
// from a host that never ran its build.
#include "engine/agent_binaries.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "common/digest.h"

namespace kiln::engine {
namespace {

namespace fs = std::filesystem;

class AgentBinariesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("agent_binaries_test." + std::to_string(::getpid()) + "." +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "build");
    fs::create_directories(root_ / "checkpoint");
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string Build(const std::string& bytes) {
    std::ofstream(root_ / "build" / "kiln-agent", std::ios::trunc) << bytes;
    return (root_ / "build" / "kiln-agent").string();
  }
  std::string Store() const { return (root_ / "agents").string(); }
  std::string Checkpoint() const { return (root_ / "checkpoint").string(); }
  fs::path root_;
};

TEST_F(AgentBinariesTest, ARestoreBindsTheBuildItsCheckpointWasTakenWith) {
  AgentBinaries old_kilnd(Store(), Build("agent v1"));
  ASSERT_TRUE(old_kilnd.current());
  EXPECT_EQ(old_kilnd.current()->hex(), Sha256Hex("agent v1"));
  AgentBinaries::Mark(Checkpoint(), old_kilnd.current());

  // The build is replaced in place, and kilnd restarts on the same state.
  AgentBinaries upgraded(Store(), Build("agent v2"));
  ASSERT_TRUE(upgraded.current());
  EXPECT_NE(upgraded.current(), old_kilnd.current());
  auto agent = upgraded.Of(Checkpoint());
  ASSERT_TRUE(agent.ok()) << agent.status().message();
  EXPECT_EQ(*agent, old_kilnd.current());
  std::string path = upgraded.PathOf(*agent);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "agent v1");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0555u);  // never written through
  // New sandboxes boot the new build, from its stored copy.
  EXPECT_EQ(upgraded.PathOf(upgraded.current()), Store() + "/" + Sha256Hex("agent v2"));
}

TEST_F(AgentBinariesTest, ACheckpointWithoutAMarkerRestoresWithTheCurrentBuild) {
  AgentBinaries agents(Store(), Build("agent v1"));
  auto agent = agents.Of(Checkpoint());
  ASSERT_TRUE(agent.ok());
  EXPECT_EQ(*agent, agents.current());
}

TEST_F(AgentBinariesTest, ABuildThisHostNeverRanIsRefusedByName) {
  AgentBinaries agents(Store(), Build("agent v1"));
  const std::string other = Sha256Hex("another host's agent");
  std::ofstream(Checkpoint() + "/" + kAgentMarker) << other << "\n";
  auto agent = agents.Of(Checkpoint());
  ASSERT_FALSE(agent.ok());
  EXPECT_NE(agent.status().message().find("sha256:" + other), std::string::npos)
      << agent.status().message();
}

TEST_F(AgentBinariesTest, AMarkerThatIsNotADigestNamesNoPath) {
  AgentBinaries agents(Store(), Build("agent v1"));
  for (const char* text : {"../../../../etc/passwd", "", "ABCDEF", "0123"}) {
    std::ofstream(Checkpoint() + "/" + kAgentMarker, std::ios::trunc) << text;
    EXPECT_FALSE(AgentBinaries::MarkOf(Checkpoint())) << text;
  }
  AgentBinaries::Mark(Checkpoint(), std::nullopt);
  EXPECT_FALSE(fs::exists(Checkpoint() + "/" + kAgentMarker));
}

TEST_F(AgentBinariesTest, AnUnreadableBuildBootsFromItsOwnPathUnrecorded) {
  AgentBinaries agents(Store(), (root_ / "build" / "missing").string());
  EXPECT_FALSE(agents.current());
  EXPECT_EQ(agents.PathOf(agents.current()), (root_ / "build" / "missing").string());
}

}  // namespace
}  // namespace kiln::engine
