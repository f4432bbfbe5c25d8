// The snapshot catalogue's visibility rule (every use against every kind of
// snapshot and scope), its lookups over a real SnapshotStore, and the
// metering marks of stored snapshots.
#include "control/snapshot_catalogue.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "fakes/fake_engine.h"
#include "unit/support/temp_dir.h"

namespace kiln::control {
namespace snapshot_catalogue_test {
namespace {

using fakes::FakeEngine;
using testutil::TempDir;

// The kinds of snapshot visibility tells apart.
enum class Kind { kPlain, kTemporary, kImageWarm, kPauseCheckpoint };

store::SnapshotRecord Record(const std::string& id, const std::string& owner,
                             Kind kind = Kind::kPlain, int64_t created_ms = 1000) {
  store::SnapshotRecord r;
  r.id = id;
  r.owner = owner;
  r.source_sandbox_id = "sb-" + id;
  r.created_ms = created_ms;
  r.expires_ms = created_ms + 86400000;
  r.size_bytes = 1'000'000'000;
  r.temporary = kind == Kind::kTemporary;
  r.image_warm = kind == Kind::kImageWarm;
  if (kind == Kind::kPauseCheckpoint) r.paused_sandbox = "sb-paused";
  return r;
}

constexpr SnapshotUse kUses[] = {SnapshotUse::kRead, SnapshotUse::kTaken, SnapshotUse::kOrigin};

const std::optional<std::string> kAdmin = std::nullopt;
const std::optional<std::string> kOwner = std::string("key_a");
const std::optional<std::string> kOtherKey = std::string("key_b");

TEST(SnapshotVisibilityTest, AHiddenSnapshotIsSeenByNoUseAndNoScope) {
  for (Kind kind : {Kind::kImageWarm, Kind::kPauseCheckpoint}) {
    store::SnapshotRecord r = Record("s", "key_a", kind);
    for (SnapshotUse use : kUses) {
      for (const auto& scope : {kAdmin, kOwner, kOtherKey}) {
        EXPECT_FALSE(SnapshotCatalogue::Visible(r, scope, use))
            << static_cast<int>(kind) << " " << static_cast<int>(use) << " "
            << scope.value_or("admin");
      }
    }
  }
}

TEST(SnapshotVisibilityTest, APlainSnapshotIsItsOwnersAndTheAdminsForEveryUse) {
  store::SnapshotRecord r = Record("s", "key_a");
  for (SnapshotUse use : kUses) {
    EXPECT_TRUE(SnapshotCatalogue::Visible(r, kAdmin, use)) << static_cast<int>(use);
    EXPECT_TRUE(SnapshotCatalogue::Visible(r, kOwner, use)) << static_cast<int>(use);
  }
  // Another key reads or takes nothing of it; a sandbox's origin shows
  // whoever's it is.
  EXPECT_FALSE(SnapshotCatalogue::Visible(r, kOtherKey, SnapshotUse::kRead));
  EXPECT_FALSE(SnapshotCatalogue::Visible(r, kOtherKey, SnapshotUse::kTaken));
  EXPECT_TRUE(SnapshotCatalogue::Visible(r, kOtherKey, SnapshotUse::kOrigin));
}

TEST(SnapshotVisibilityTest, AForksOwnCaptureIsReadableOnlyNeverTakenOrAnOrigin) {
  store::SnapshotRecord r = Record("s", "key_a", Kind::kTemporary);
  EXPECT_TRUE(SnapshotCatalogue::Visible(r, kAdmin, SnapshotUse::kRead));
  EXPECT_TRUE(SnapshotCatalogue::Visible(r, kOwner, SnapshotUse::kRead));
  EXPECT_FALSE(SnapshotCatalogue::Visible(r, kOtherKey, SnapshotUse::kRead));
  for (SnapshotUse use : {SnapshotUse::kTaken, SnapshotUse::kOrigin}) {
    for (const auto& scope : {kAdmin, kOwner, kOtherKey})
      EXPECT_FALSE(SnapshotCatalogue::Visible(r, scope, use))
          << static_cast<int>(use) << " " << scope.value_or("admin");
  }
}

class SnapshotCatalogueTest : public ::testing::Test {
 protected:
  SnapshotCatalogueTest() : capacity_(Limits()) {}

  static CapacityLimits Limits() {
    CapacityLimits limits;
    limits.host_memory_mib = 4096;
    limits.host_vcpus = 8;
    return limits;
  }

  // Seals `r` into the store, with a checkpoint file of its own.
  void Seal(const store::SnapshotRecord& r) {
    std::filesystem::create_directories(store_.CheckpointDir(r.id));
    std::ofstream(store_.CheckpointDir(r.id) + "/pages.img", std::ios::binary) << "pages-" + r.id;
    Status sealed = store_.Seal(r);
    ASSERT_TRUE(sealed.ok()) << sealed.ToString();
  }

  static std::vector<std::string> Ids(const std::vector<store::SnapshotRecord>& records) {
    std::vector<std::string> ids;
    for (const auto& r : records) ids.push_back(r.id);
    return ids;
  }

  FakeEngine engine_;
  TempDir dir_;
  store::SnapshotStore store_{dir_.path()};
  Capacity capacity_;
  SnapshotCatalogue catalogue_{engine_, "/fake/rootfs", store_, capacity_, {}, 0};
};

TEST_F(SnapshotCatalogueTest, FindAndListApplyTheRuleOfTheUse) {
  // Taken in this order (List is oldest first).
  Seal(Record("e-other", "key_b", Kind::kPlain, 5000));
  Seal(Record("a-plain", "key_a", Kind::kPlain, 1000));
  Seal(Record("b-temporary", "key_a", Kind::kTemporary, 2000));
  Seal(Record("c-warm", "key_a", Kind::kImageWarm, 3000));
  Seal(Record("d-checkpoint", "key_a", Kind::kPauseCheckpoint, 4000));

  EXPECT_EQ(catalogue_.FindVisible("a-plain", kOwner, SnapshotUse::kRead)->id, "a-plain");
  EXPECT_FALSE(catalogue_.FindVisible("a-plain", kOtherKey, SnapshotUse::kRead));
  EXPECT_EQ(catalogue_.FindVisible("b-temporary", kOwner, SnapshotUse::kRead)->id, "b-temporary");
  EXPECT_FALSE(catalogue_.FindVisible("b-temporary", kOwner, SnapshotUse::kTaken));
  EXPECT_FALSE(catalogue_.FindVisible("c-warm", kAdmin, SnapshotUse::kRead));
  EXPECT_FALSE(catalogue_.FindVisible("missing", kAdmin, SnapshotUse::kRead));
  EXPECT_EQ(catalogue_.FindVisible("e-other", kOwner, SnapshotUse::kOrigin)->id, "e-other");
  // Find sees everything: kiln's own bookkeeping.
  EXPECT_TRUE(catalogue_.Find("c-warm"));
  EXPECT_TRUE(catalogue_.Find("d-checkpoint"));

  using Names = std::vector<std::string>;
  EXPECT_EQ(Ids(catalogue_.ListVisible(kOwner, SnapshotUse::kRead)),
            (Names{"a-plain", "b-temporary"}));
  EXPECT_EQ(Ids(catalogue_.ListVisible(kOwner, SnapshotUse::kTaken)), (Names{"a-plain"}));
  EXPECT_EQ(Ids(catalogue_.ListVisible(kAdmin, SnapshotUse::kTaken)),
            (Names{"a-plain", "e-other"}));
  EXPECT_EQ(Ids(catalogue_.ListVisible(kAdmin, SnapshotUse::kRead)),
            (Names{"a-plain", "b-temporary", "e-other"}));
  EXPECT_EQ(Ids(catalogue_.List()), (Names{"a-plain", "b-temporary", "e-other"}));

  EXPECT_TRUE(catalogue_.Delete("a-plain"));
  EXPECT_FALSE(catalogue_.Delete("a-plain"));
  EXPECT_FALSE(catalogue_.Find("a-plain"));
}

TEST_F(SnapshotCatalogueTest, StorageIsMeteredFromTheCaptureAndNeverTwice) {
  store::SnapshotRecord kept = Record("kept", "key_a");
  Seal(kept);
  Seal(Record("temporary", "key_a", Kind::kTemporary));
  Seal(Record("warm", "key_a", Kind::kImageWarm));
  catalogue_.Captured(kept, /*pooled=*/false);  // metered from created_ms
  PriceTable prices;

  std::vector<store::UsageRow> rows = catalogue_.MeterStorage(1000 + 3600000, prices);
  ASSERT_EQ(rows.size(), 1u);  // a fork's capture and an image's copy are not billed so
  EXPECT_EQ(rows[0].sandbox_id, "kept");
  EXPECT_EQ(rows[0].key_id, "key_a");
  EXPECT_EQ(rows[0].kind, "snapshot");
  EXPECT_EQ(rows[0].start_ms, 1000);
  EXPECT_EQ(rows[0].end_ms, 1000 + 3600000);
  EXPECT_DOUBLE_EQ(rows[0].micros, SnapshotStorageMicrosExact(prices, 1'000'000'000, 3600000));
  // The next reading starts where this one ended.
  rows = catalogue_.MeterStorage(1000 + 7200000, prices);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].start_ms, 1000 + 3600000);
}

TEST_F(SnapshotCatalogueTest, APauseCheckpointIsMeteredAsItsSandbox) {
  store::SnapshotRecord checkpoint = Record("checkpoint", "key_a", Kind::kPauseCheckpoint);
  Seal(checkpoint);
  EXPECT_EQ(catalogue_.TakeMeteredSince("checkpoint", 5000), 5000);  // not metered: nothing
  catalogue_.MarkMetered("checkpoint", 2000);
  EXPECT_TRUE(catalogue_.MeterStorage(4000, PriceTable{}).empty());  // its mark is kept
  EXPECT_EQ(catalogue_.TakeMeteredSince("checkpoint", 5000), 2000);
  EXPECT_EQ(catalogue_.TakeMeteredSince("checkpoint", 6000), 5000);
  catalogue_.ForgetMetered("checkpoint");
  EXPECT_EQ(catalogue_.TakeMeteredSince("checkpoint", 7000), 7000);
}

}  // namespace
}  // namespace snapshot_catalogue_test
}  // namespace kiln::control
