#include "store/snapshot_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/digest.h"
#include "unit/support/temp_dir.h"

namespace kiln::store {
namespace snapshot_store_test {
namespace {

namespace fs = std::filesystem;

class SnapshotStoreTest : public ::testing::Test {
 protected:
  // A capture as runsc leaves it: files under the checkpoint directory.
  SnapshotRecord Capture(SnapshotStore& store, const std::string& id) {
    fs::create_directories(store.CheckpointDir(id));
    Write(store.CheckpointDir(id) + "/pages.img", std::string(3 << 20, 'p'));
    Write(store.CheckpointDir(id) + "/checkpoint.img", "state");
    SnapshotRecord r;
    r.id = id;
    r.owner = "key_a";
    r.source_sandbox_id = "sb1";
    r.created_ms = 1000;
    r.expires_ms = 2000;
    return r;
  }
  static void Write(const std::string& path, const std::string& data) {
    std::ofstream(path, std::ios::binary) << data;
  }

  testutil::TempDir tmp_{"kiln-snapstore"};
  const std::string dir_ = tmp_.path();
};

TEST(Xxh3Test, KnownDigests) {
  char tmpl[] = "/tmp/kiln-xxh3-XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  // XXH3-128 of no bytes, canonical (big-endian) form.
  EXPECT_EQ(FileXxh3Hex(tmpl), "99aa06d3014798d86001c324468d497f");
  std::ofstream(tmpl) << std::string(5 << 20, 'x');  // spans several 1 MiB reads
  std::string big = FileXxh3Hex(tmpl);
  EXPECT_EQ(big.size(), 32u);
  EXPECT_NE(big, "99aa06d3014798d86001c324468d497f");
  fs::remove(tmpl);
  EXPECT_EQ(FileXxh3Hex(tmpl), "");
}

TEST_F(SnapshotStoreTest, SealedSnapshotVerifiesAndSurvivesReload) {
  {
    SnapshotStore store(dir_);
    Status error;
    ASSERT_TRUE((error = store.Seal(Capture(store, "s1"))).ok()) << error.ToString();
    EXPECT_TRUE((error = store.Verify("s1")).ok()) << error.ToString();
  }
  SnapshotStore reloaded(dir_);
  ASSERT_TRUE(reloaded.Get("s1").has_value());
  Status error;
  EXPECT_TRUE((error = reloaded.Verify("s1")).ok()) << error.ToString();
}

TEST_F(SnapshotStoreTest, CorruptionNamesTheFile) {
  SnapshotStore store(dir_);
  Status error;
  ASSERT_TRUE((error = store.Seal(Capture(store, "s1"))).ok()) << error.ToString();
  {
    std::fstream f(store.CheckpointDir("s1") + "/pages.img",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2 << 20);
    f.put('X');  // same size, one byte changed
  }
  EXPECT_FALSE((error = store.Verify("s1")).ok());
  EXPECT_NE(error.message().find("checkpoint/pages.img"), std::string::npos) << error.ToString();
  EXPECT_FALSE((error = store.Verify("nope")).ok());
  EXPECT_NE(error.message().find("not found"), std::string::npos) << error.ToString();
}

// Verified files are not hashed again, but a file altered in place is still
// refused, even when its size and mtime are put back as they were.
TEST_F(SnapshotStoreTest, VerifiedOnceThenAlteredInPlaceIsRefused) {
  SnapshotStore store(dir_);
  Status error;
  ASSERT_TRUE((error = store.Seal(Capture(store, "s1"))).ok()) << error.ToString();
  std::string pages = store.CheckpointDir("s1") + "/pages.img";
  ASSERT_TRUE((error = store.Verify("s1")).ok()) << error.ToString();
  ASSERT_TRUE((error = store.Verify("s1")).ok()) << error.ToString();
  struct stat before {};
  ASSERT_EQ(stat(pages.c_str(), &before), 0);
  {
    std::fstream f(pages, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1 << 20);
    f.put('Y');
  }
  timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, pages.c_str(), times, 0), 0);  // mtime as it was
  EXPECT_FALSE((error = store.Verify("s1")).ok());
  EXPECT_NE(error.message().find("checkpoint/pages.img does not match its checksum"),
            std::string::npos)
      << error.ToString();
  // Still refused on every later try: the failure is not cached as success.
  EXPECT_FALSE((error = store.Verify("s1")).ok());
}

// A snapshot is restorable as soon as it is sealed; its checksums are
// written in the background, and a file altered before that never gets one.
TEST_F(SnapshotStoreTest, ChecksumsFollowTheSealAndNeverCoverALaterChange) {
  Status error;
  {
    SnapshotStore store(dir_);
    ASSERT_TRUE((error = store.Seal(Capture(store, "s1"))).ok()) << error.ToString();
    ASSERT_TRUE((error = store.Verify("s1")).ok()) << error.ToString();  // at once
    ASSERT_TRUE((error = store.Seal(Capture(store, "s2"))).ok()) << error.ToString();
    Write(store.CheckpointDir("s2") + "/checkpoint.img", "stat!");  // changed right after the seal
    EXPECT_FALSE((error = store.Verify("s2")).ok());
    for (int i = 0; i < 200; ++i) {  // the hasher writes s1's sums
      nlohmann::json m = nlohmann::json::parse(std::ifstream(dir_ + "/s1/manifest.json"));
      if (m["files"]["checkpoint/pages.img"].contains("xxh3_128")) break;
      usleep(10000);
    }
  }
  nlohmann::json m = nlohmann::json::parse(std::ifstream(dir_ + "/s1/manifest.json"));
  EXPECT_EQ(m["files"]["checkpoint/pages.img"]["xxh3_128"],
            FileXxh3Hex(dir_ + "/s1/checkpoint/pages.img"));
  // A new store (a restarted daemon) verifies s1 by its sums and still refuses s2.
  SnapshotStore reloaded(dir_);
  EXPECT_TRUE((error = reloaded.Verify("s1")).ok()) << error.ToString();
  EXPECT_FALSE((error = reloaded.Verify("s2")).ok());
  EXPECT_NE(error.message().find("checkpoint/checkpoint.img"), std::string::npos)
      << error.ToString();
}

TEST_F(SnapshotStoreTest, ManifestsWithSha256StillVerify) {
  {
    SnapshotStore store(dir_);
    Status error;
    ASSERT_TRUE((error = store.Seal(Capture(store, "old"))).ok()) << error.ToString();
  }
  // Rewrite the manifest as kiln wrote it before XXH3: SHA-256 per file.
  std::string manifest_path = dir_ + "/old/manifest.json";
  nlohmann::json m = nlohmann::json::parse(std::ifstream(manifest_path));
  for (auto& [rel, want] : m["files"].items()) {
    want.erase("xxh3_128");
    want["sha256"] = FileSha256Hex(dir_ + "/old/" + rel);
  }
  std::ofstream(manifest_path) << m.dump();
  SnapshotStore store(dir_);
  Status error;
  EXPECT_TRUE((error = store.Verify("old")).ok()) << error.ToString();
  Write(store.CheckpointDir("old") + "/checkpoint.img", "stat3");
  EXPECT_FALSE((error = store.Verify("old")).ok());
  EXPECT_NE(error.message().find("checkpoint/checkpoint.img"), std::string::npos)
      << error.ToString();
}

TEST(SnapshotRecordTest, ModeRoundTripsAndAnOldManifestIsMemory) {
  SnapshotRecord r;
  r.id = "s";
  r.mode = SnapshotMode::kDisk;
  r.run_as.uid = 1234;
  nlohmann::json j = r;
  EXPECT_EQ(j.at("mode"), "disk");
  SnapshotRecord back = j.get<SnapshotRecord>();
  EXPECT_EQ(back.mode, SnapshotMode::kDisk);
  EXPECT_EQ(back.run_as.uid, 1234u);
  j.erase("mode");
  EXPECT_EQ(j.get<SnapshotRecord>().mode, SnapshotMode::kMemory);
  j["mode"] = "swap";
  EXPECT_THROW(j.get<SnapshotRecord>(), nlohmann::json::exception);
  EXPECT_EQ(ParseSnapshotMode("Disk"), std::nullopt);
  EXPECT_STREQ(SnapshotModeName(SnapshotMode::kMemory), "memory");
}

}  // namespace
}  // namespace snapshot_store_test
}  // namespace kiln::store
