// The snapshot transfer service: the checks of an imported record (worded as
// a create's body reader words them), and an export imported again through
// a real SandboxManager over the FakeEngine.
#include "control/snapshot_transfer_service.h"

#include <gtest/gtest.h>

#include "common/contract.h"
#include "fakes/fake_engine.h"
#include "network/policy.h"
#include "store/db.h"
#include "unit/support/temp_dir.h"

namespace kiln::control {
namespace snapshot_transfer_service_test {
namespace {

using fakes::FakeEngine;
using nlohmann::json;
using testutil::TempDir;

store::SnapshotRecord WithLabels(std::map<std::string, std::string> labels) {
  store::SnapshotRecord r;
  r.labels = std::move(labels);
  return r;
}

// The one issue of a refused record: its message and its path.
void ExpectRefused(const Status& s, const std::string& path, const std::string& message) {
  EXPECT_EQ(s.code(), Code::kInvalidArchive);
  EXPECT_EQ(s.message(), "kiln-snapshot.json: record: " + path + ": " + message);
  EXPECT_EQ(s.details(), (json{{"issues", json::array({{{"path", path}, {"message", message}}})}}));
}

TEST(CheckImportedRecordTest, ARecordACreateWouldTakeIsOk) {
  store::SnapshotRecord r =
      WithLabels({{"team", "rl"}, {std::string(63, 'k'), std::string(256, 'v')}});
  r.network = json{{"internet", false}, {"allow", json::array({"example.com"})}};
  EXPECT_TRUE(CheckImportedRecord(r).ok());
  EXPECT_TRUE(CheckImportedRecord(store::SnapshotRecord{}).ok());  // no labels, no rules
}

TEST(CheckImportedRecordTest, LabelsUnderACreatesLimits) {
  std::map<std::string, std::string> many;
  for (int i = 0; i <= contract::kLabelsMax; ++i) many["k" + std::to_string(i)] = "v";
  ExpectRefused(CheckImportedRecord(WithLabels(many)), "body.labels",
                "must have at most 32 entries");
  ExpectRefused(CheckImportedRecord(WithLabels({{"", "v"}})), "body.labels.",
                "key must be 1 to 63 bytes");
  std::string long_key(64, 'k');
  ExpectRefused(CheckImportedRecord(WithLabels({{long_key, "v"}})), "body.labels." + long_key,
                "key must be 1 to 63 bytes");
  ExpectRefused(CheckImportedRecord(WithLabels({{"a", "ok"}, {"b", std::string(257, 'v')}})),
                "body.labels.b", "value must be at most 256 bytes");
  // The first bad entry, in key order, is the one named.
  ExpectRefused(CheckImportedRecord(WithLabels({{"b", std::string(257, 'v')}, {long_key, "v"}})),
                "body.labels.b", "value must be at most 256 bytes");
}

TEST(CheckImportedRecordTest, NetworkRulesUnderACreatesRules) {
  store::SnapshotRecord r;
  r.network = json{{"internet", false}, {"allow", json::array({"not a host!"})}};
  network::PolicyError error;
  ASSERT_FALSE(network::ParsePolicy(r.network, "network", &error));
  ExpectRefused(CheckImportedRecord(r), "body." + error.path, error.message);
  r.network = json("everything");
  ASSERT_FALSE(network::ParsePolicy(r.network, "network", &error));
  ExpectRefused(CheckImportedRecord(r),
                "body." + (error.path.empty() ? std::string("network") : error.path),
                error.message);
}

TEST(CheckImportedRecordTest, EveryIssueIsNamedLabelsFirst) {
  store::SnapshotRecord r = WithLabels({{"", "v"}});
  r.network = json{{"internet", "yes"}};
  network::PolicyError error;
  ASSERT_FALSE(network::ParsePolicy(r.network, "network", &error));
  Status s = CheckImportedRecord(r);
  EXPECT_EQ(s.message(),
            "kiln-snapshot.json: record: body.labels.: key must be 1 to 63 bytes; "
            "body." +
                error.path + ": " + error.message);
  EXPECT_EQ(s.details()["issues"].size(), 2u);
}

class SnapshotTransferServiceTest : public ::testing::Test {
 protected:
  SnapshotTransferServiceTest() {
    CapacityLimits limits;
    limits.host_memory_mib = 4096;
    limits.host_vcpus = 8;
    capacity_ = std::make_unique<Capacity>(limits);
    ManagerOptions options;
    options.meter_interval_ms = 50;
    manager_ = std::make_unique<SandboxManager>(
        ManagerDeps{engine_, "/fake/rootfs", snapshots_, records_, usage_, *capacity_, nullptr},
        std::move(options));
    transfer_ = std::make_unique<SnapshotTransferService>(*manager_, nullptr);
  }

  // A snapshot of a fresh sandbox (which is gone again), with these labels.
  store::SnapshotRecord Captured(std::map<std::string, std::string> labels = {}) {
    SandboxSpec spec;
    spec.owner = "key_a";
    spec.shape.vcpu = 1;
    spec.shape.memory_mib = 1024;
    auto s = manager_->Create(spec, std::chrono::steady_clock::now() + std::chrono::seconds(1));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    SnapshotOptions opts;
    opts.labels = std::move(labels);
    auto snap = manager_->Snapshot(*s, opts);
    EXPECT_TRUE(snap.ok()) << snap.status().ToString();
    manager_->Delete((*s)->id());
    return *snap;
  }

  // The whole tar of an export.
  std::string Exported(const store::SnapshotRecord& snap) {
    auto tar = transfer_->Export(snap, {});
    EXPECT_TRUE(tar.ok()) << tar.status().ToString();
    std::string out;
    EXPECT_TRUE(tar->Stream([&](std::string_view d) {
      out.append(d);
      return true;
    }));
    return out;
  }

  static store::TarSource Body(const std::string& tar) {
    return [&tar, done = false](std::string* chunk) mutable {
      if (done) return false;
      *chunk = tar;
      done = true;
      return true;
    };
  }

  FakeEngine engine_;
  TempDir dir_;
  store::SnapshotStore snapshots_{dir_.path()};
  store::Db db_{":memory:"};
  store::SandboxStore records_{db_};
  store::UsageStore usage_{db_};
  std::unique_ptr<Capacity> capacity_;
  std::unique_ptr<SandboxManager> manager_;
  std::unique_ptr<SnapshotTransferService> transfer_;  // over manager_, without images
};

TEST_F(SnapshotTransferServiceTest, AnExportImportsAgainAsTheImportersSnapshot) {
  store::SnapshotRecord snap = Captured({{"team", "rl"}});
  std::string tar = Exported(snap);
  ASSERT_TRUE(manager_->snapshots().Delete(snap.id));
  auto done = transfer_->Import("key_b", tar.size(), Body(tar));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_TRUE(done->created);
  EXPECT_EQ(done->record.id, snap.id);
  EXPECT_EQ(done->record.owner, "key_b");
  auto found = manager_->snapshots().FindVisible(snap.id, std::string("key_b"), SnapshotUse::kRead);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->labels, snap.labels);
  // Again: the same snapshot, nothing new.
  done = transfer_->Import("key_b", std::nullopt, Body(tar));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_FALSE(done->created);
  EXPECT_EQ(transfer_->TransferableLayers(), json::array());  // no images here
}

TEST_F(SnapshotTransferServiceTest, ARecordACreateWouldRefuseIsNotImported) {
  std::map<std::string, std::string> many;
  for (int i = 0; i <= contract::kLabelsMax; ++i) many["k" + std::to_string(i)] = "v";
  store::SnapshotRecord snap = Captured(many);
  std::string tar = Exported(snap);
  ASSERT_TRUE(manager_->snapshots().Delete(snap.id));
  auto done = transfer_->Import("key_b", tar.size(), Body(tar));
  ASSERT_FALSE(done.ok());
  EXPECT_EQ(done.status().code(), Code::kInvalidArchive);
  EXPECT_EQ(done.status().message(),
            "kiln-snapshot.json: record: body.labels: must have at most 32 entries");
  EXPECT_FALSE(manager_->snapshots().Find(snap.id));
}

TEST_F(SnapshotTransferServiceTest, AnImportOverTheCapIsRefusedUnread) {
  bool read = false;
  auto done = transfer_->Import("key_b", kMaxImportBytes + 1, [&](std::string*) {
    read = true;
    return false;
  });
  ASSERT_FALSE(done.ok());
  EXPECT_EQ(done.status().code(), Code::kPayloadTooLarge);
  EXPECT_EQ(done.status().message(), "an imported snapshot's tar is at most 64 GiB");
  EXPECT_FALSE(read);
}

}  // namespace
}  // namespace snapshot_transfer_service_test
}  // namespace kiln::control
