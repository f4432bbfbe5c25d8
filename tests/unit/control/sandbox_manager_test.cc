// The real SandboxManager over a FakeEngine, real stores (SQLite in memory,
// snapshots in a temp directory) and a real Capacity.
#include "control/sandbox_manager.h"
#include "engine/agent_client.h"

#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "common/time.h"
#include "fakes/fake_engine.h"
#include "store/db.h"
#include "unit/support/temp_dir.h"

namespace kiln::control {
namespace sandbox_manager_test {
namespace {

using fakes::FakeEngine;
using fakes::WaitUntil;
using std::chrono::milliseconds;
using testutil::TempDir;
namespace fs = std::filesystem;

Deadline Soon(int ms = 1000) { return std::chrono::steady_clock::now() + milliseconds(ms); }

int ThreadCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

SandboxSpec Spec(const std::string& owner = "key_a", int timeout_seconds = 600) {
  SandboxSpec spec;
  spec.owner = owner;
  spec.shape.vcpu = 1;
  spec.shape.memory_mib = 1024;
  spec.timeout_seconds = timeout_seconds;
  spec.labels = {{"team", "rl"}};
  return spec;
}

class SandboxManagerTest : public ::testing::Test {
 protected:
  SandboxManagerTest() {
    NewCapacity();
    base_threads_ = ThreadCount();
  }

  // A restarted daemon counts from zero.
  void NewCapacity() {
    CapacityLimits limits;
    limits.host_memory_mib = 4096;  // four sandboxes of Spec()
    limits.host_vcpus = 8;
    capacity_ = std::make_unique<Capacity>(limits);
  }
  ~SandboxManagerTest() override { StopManager(); }

  static ManagerOptions Fast() {
    ManagerOptions o;
    o.meter_interval_ms = 50;
    return o;
  }

  void StartManager(ManagerOptions options = Fast()) {
    // Helper threads of an earlier manager are gone (see WaitQuiet).
    EXPECT_TRUE(WaitUntil([&] { return ThreadCount() <= base_threads_; }));
    manager_ = std::make_unique<SandboxManager>(
        ManagerDeps{engine_, "/fake/rootfs", snapshots_, records_, usage_, *capacity_, nullptr},
        std::move(options));
    threads_ = ThreadCount();
  }

  // The manager stops a sandbox that died or whose lease ended on a
  // detached thread, which must be done before the manager goes away.
  void WaitQuiet() {
    EXPECT_TRUE(WaitUntil([&] { return ThreadCount() <= threads_; }))
        << ThreadCount() << " threads, " << threads_ << " expected";
  }

  void StopManager() {
    if (!manager_) return;
    WaitQuiet();
    manager_.reset();
  }

  std::shared_ptr<Sandbox> MustCreate(SandboxSpec spec = Spec()) {
    auto made = manager_->Create(std::move(spec), Soon());
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    return made.ok() ? *made : nullptr;
  }

  std::optional<SandboxRecord> Stored(const std::string& id) {
    for (const auto& j : records_.Live())
      if (j.value("id", "") == id) return j.get<SandboxRecord>();
    for (const auto& j : records_.RecentlyStopped(100))
      if (j.value("id", "") == id) return j.get<SandboxRecord>();
    return std::nullopt;
  }

  std::vector<std::shared_ptr<Sandbox>> Stopped() {
    ListFilter f;
    f.states = {SandboxState::kStopped};
    return manager_->List(f);
  }

  FakeEngine engine_;
  TempDir dir_;
  store::SnapshotStore snapshots_{dir_.path()};
  store::Db db_{":memory:"};
  store::SandboxStore records_{db_};
  store::UsageStore usage_{db_};
  std::unique_ptr<Capacity> capacity_;
  std::unique_ptr<SandboxManager> manager_;
  int base_threads_ = 0;  // without a manager
  int threads_ = 0;       // with one, idle
};

TEST_F(SandboxManagerTest, CreateRunsTakesCapacityAndRecordsRunning) {
  StartManager();
  auto s = MustCreate();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state(), SandboxState::kRunning);
  EXPECT_GT(s->ready_ms(), 0);
  EXPECT_EQ(manager_->Get(s->id()), s);
  // The engine started exactly this sandbox, and its agent answers.
  EXPECT_EQ(engine_.calls().created, std::vector<std::string>{s->id()});
  ASSERT_TRUE(s->channel());
  EXPECT_TRUE(engine::AgentClient(s->channel()).Ping(1000).ok());
  auto stats = capacity_->stats();
  EXPECT_EQ(stats.running, 1);
  EXPECT_EQ(stats.reserved_memory_mib, 1024);
  auto rec = Stored(s->id());
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->state, SandboxState::kRunning);
  EXPECT_EQ(rec->spec.owner, "key_a");
  EXPECT_EQ(manager_->CountByState()[SandboxState::kRunning], 1);
}

TEST_F(SandboxManagerTest, FailedCreateIsStartupFailedAndReleasesCapacity) {
  StartManager();
  engine_.FailNextCreates(1, Status(Code::kStartupFailed, "runsc exited with status 128"));
  auto made = manager_->Create(Spec(), Soon());
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), Code::kStartupFailed);
  EXPECT_NE(made.status().message().find("runsc exited with status 128"), std::string::npos);
  EXPECT_EQ(capacity_->stats().running, 0);
  EXPECT_EQ(capacity_->stats().reserved_memory_mib, 0);
  auto stopped = Stopped();
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(stopped[0]->Record().stop_reason, "startup_failed");
  auto rec = Stored(stopped[0]->id());
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->state, SandboxState::kStopped);
  EXPECT_EQ(rec->stop_reason, "startup_failed");
  EXPECT_TRUE(records_.Live().empty());
  // The failure was one create's: the next one runs.
  auto s = MustCreate();
  ASSERT_TRUE(s);
  EXPECT_EQ(capacity_->stats().running, 1);
}

TEST_F(SandboxManagerTest, CreateFromAMissingSnapshotIsSnapshotNotFound) {
  StartManager();
  SandboxSpec spec = Spec();
  spec.snapshot = "no-such-snapshot";
  auto made = manager_->Create(spec, Soon());
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), Code::kSnapshotNotFound);
  EXPECT_EQ(capacity_->stats().running, 0);
  EXPECT_TRUE(engine_.calls().restored.empty());
  EXPECT_TRUE(manager_->List(ListFilter{.include_stopped = true}).empty());
}

TEST_F(SandboxManagerTest, AFullHostIsNoCapacityAfterTheDeadline) {
  StartManager();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(MustCreate());
  auto t0 = std::chrono::steady_clock::now();
  auto made = manager_->Create(Spec(), Soon(50));
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), Code::kNoCapacity);
  EXPECT_GE(made.status().retry_after_s(), 1);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(50));
  EXPECT_EQ(engine_.calls().created.size(), 4u);
}

TEST_F(SandboxManagerTest, ACreateWaitsForRoomAStopFrees) {
  StartManager();
  std::vector<std::shared_ptr<Sandbox>> running;
  for (int i = 0; i < 4; ++i) running.push_back(MustCreate());
  Result<std::shared_ptr<Sandbox>> waited = Status(Code::kInternal, "not yet");
  std::thread t([&] { waited = manager_->Create(Spec(), Soon(5000)); });
  ASSERT_TRUE(WaitUntil([&] { return capacity_->stats().waiting == 1; }));
  manager_->Stop(running[0], "requested");
  t.join();
  ASSERT_TRUE(waited.ok()) << waited.status().ToString();
  EXPECT_EQ((*waited)->state(), SandboxState::kRunning);
  EXPECT_EQ(capacity_->stats().running, 4);
}

TEST_F(SandboxManagerTest, RecoveryReadoptsRunningMarksLostAndRemovesOrphans) {
  StartManager();
  auto kept = MustCreate(Spec("key_a"));
  auto lost = MustCreate(Spec("key_b"));
  ASSERT_TRUE(kept && lost);
  std::string kept_id = kept->id(), lost_id = lost->id();
  // What a kill -9 of kilnd leaves: the table as it was...
  std::vector<nlohmann::json> table = records_.Live();
  ASSERT_EQ(table.size(), 2u);
  SandboxRecord starting = kept->Record();
  starting.id = "caught-starting";
  starting.state = SandboxState::kStarting;
  table.push_back(starting);
  kept.reset();
  lost.reset();
  StopManager();  // (stops and destroys them: the table is put back below)
  NewCapacity();
  records_.Put(table);
  // ...and on the host: one sandbox still running, one gone, a half-made
  // one, and one no record names.
  engine_.AddRunning(kept_id);
  engine_.AddRunning("caught-starting");
  engine_.AddOrphan("orphan-1");
  size_t attached_before = engine_.calls().attached.size();

  StartManager();
  auto s = manager_->Get(kept_id);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state(), SandboxState::kRunning);
  ASSERT_TRUE(s->channel());
  EXPECT_TRUE(engine::AgentClient(s->channel()).Ping(1000).ok());
  // Records that were running are attached (one fails: it is gone); one
  // caught starting is not trusted.
  auto calls = engine_.calls().attached;
  std::vector<std::string> attached(calls.begin() + attached_before, calls.end());
  std::vector<std::string> running{kept_id, lost_id};
  std::sort(attached.begin(), attached.end());
  std::sort(running.begin(), running.end());
  EXPECT_EQ(attached, running);
  EXPECT_EQ(capacity_->stats().running, 1);  // the re-adopted one counts
  EXPECT_EQ(capacity_->stats().reserved_memory_mib, 1024);

  for (const std::string& id : {lost_id, std::string("caught-starting")}) {
    auto gone = manager_->Get(id);
    ASSERT_TRUE(gone) << id;
    EXPECT_EQ(gone->state(), SandboxState::kStopped) << id;
    EXPECT_EQ(gone->Record().stop_reason, "host_lost") << id;
    auto rec = Stored(id);
    ASSERT_TRUE(rec) << id;
    EXPECT_EQ(rec->state, SandboxState::kStopped) << id;
    EXPECT_EQ(rec->stop_reason, "host_lost") << id;
  }
  // Only the re-adopted sandbox is left on the host.
  EXPECT_EQ(engine_.List(), std::vector<std::string>{kept_id});
  auto destroyed = engine_.calls().destroyed;
  EXPECT_NE(std::find(destroyed.begin(), destroyed.end(), "orphan-1"), destroyed.end());
  EXPECT_NE(std::find(destroyed.begin(), destroyed.end(), "caught-starting"), destroyed.end());
  // The re-adopted sandbox is tracked like any other: its death is noticed.
  engine_.Kill(kept_id);
  ASSERT_TRUE(WaitUntil([&] { return s->state() == SandboxState::kStopped; }));
  EXPECT_EQ(s->Record().stop_reason, "sandbox_died");
  ASSERT_TRUE(WaitUntil([&] { return capacity_->stats().running == 0; }));
}

TEST_F(SandboxManagerTest, ShutdownStopsEverySandboxAndRefusesCreates) {
  StartManager();
  auto a = MustCreate();
  auto b = MustCreate();
  ASSERT_TRUE(a && b);
  manager_->Shutdown("host_stopped");
  for (const auto& s : {a, b}) {
    EXPECT_EQ(s->state(), SandboxState::kStopped);
    EXPECT_EQ(s->Record().stop_reason, "host_stopped");
    EXPECT_EQ(Stored(s->id())->state, SandboxState::kStopped);
  }
  EXPECT_TRUE(engine_.List().empty());
  auto destroyed = engine_.calls().destroyed;
  EXPECT_EQ(std::count(destroyed.begin(), destroyed.end(), a->id()), 1);
  EXPECT_EQ(std::count(destroyed.begin(), destroyed.end(), b->id()), 1);
  EXPECT_EQ(capacity_->stats().running, 0);
  auto made = manager_->Create(Spec(), Soon());
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), Code::kShuttingDown);
  EXPECT_EQ(made.status().retry_after_s(), 1);
  EXPECT_EQ(engine_.calls().created.size(), 2u);
}

TEST_F(SandboxManagerTest, ShutdownWaitsForACreateAlreadyStartingThenStopsIt) {
  StartManager();
  auto source = MustCreate();
  auto snap = manager_->Snapshot(source, SnapshotOptions{});
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  engine_.SetRestoreDelay(milliseconds(200));
  SandboxSpec spec = Spec();
  spec.snapshot = snap->id;
  Result<std::shared_ptr<Sandbox>> copy = Status(Code::kInternal, "not yet");
  std::thread t([&] { copy = manager_->Create(spec, Soon()); });
  ASSERT_TRUE(WaitUntil([&] { return engine_.calls().restored.size() == 1; }));
  manager_->Shutdown("host_stopped");
  t.join();
  // Past the capacity line before the shutdown: it started, and was then
  // stopped with the rest, not left behind on the host.
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ((*copy)->state(), SandboxState::kStopped);
  EXPECT_EQ((*copy)->Record().stop_reason, "host_stopped");
  EXPECT_TRUE(engine_.List().empty());
  EXPECT_EQ(capacity_->stats().running, 0);
}

TEST_F(SandboxManagerTest, SnapshotThenCreateFromItRestoresTheCapture) {
  StartManager();
  auto source = MustCreate();
  SnapshotOptions opts;
  opts.name = "base";
  auto snap = manager_->Snapshot(source, opts);
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(source->state(), SandboxState::kRunning);  // it continues
  EXPECT_TRUE(fs::exists(snapshots_.CheckpointDir(snap->id) + "/checkpoint.img"));
  EXPECT_EQ(snap->source_sandbox_id, source->id());
  EXPECT_GT(snap->size_bytes, 0u);
  SandboxSpec spec = Spec();
  spec.labels.clear();
  spec.shape.memory_mib = 512;  // a copy has the shape of what it copies
  spec.snapshot = snap->id;
  auto copy = manager_->Create(spec, Soon());
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ((*copy)->spec().shape.memory_mib, 1024);
  EXPECT_EQ((*copy)->spec().labels, source->spec().labels);
  auto calls = engine_.calls();
  EXPECT_EQ(calls.restored, std::vector<std::string>{(*copy)->id()});
  EXPECT_EQ(calls.restore_dirs, std::vector<std::string>{snapshots_.CheckpointDir(snap->id)});
}

TEST_F(SandboxManagerTest, ADiskSnapshotsCopyBootsFreshAtTheShapeItNames) {
  StartManager();
  auto source = MustCreate();
  SnapshotOptions opts;
  opts.mode = store::SnapshotMode::kDisk;
  auto snap = manager_->Snapshot(source, opts);
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->mode, store::SnapshotMode::kDisk);
  std::string tar = snapshots_.CheckpointDir(snap->id) + "/" + store::kDiskUpperTar;
  EXPECT_TRUE(fs::exists(tar));
  EXPECT_TRUE(engine_.calls().checkpointed.empty());                      // nothing of its memory
  EXPECT_EQ(snapshots_.Get(snap->id)->mode, store::SnapshotMode::kDisk);  // as stored
  SandboxSpec spec = Spec();
  spec.snapshot = snap->id;
  spec.shape.memory_mib = 512;
  spec.shape_given.memory = true;
  spec.shape.vcpu = 7;  // not given: the snapshot's
  auto copy = manager_->Create(spec, Soon());
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ((*copy)->spec().shape.memory_mib, 512);
  EXPECT_EQ((*copy)->spec().shape.vcpu, source->spec().shape.vcpu);
  auto calls = engine_.calls();
  EXPECT_TRUE(calls.restored.empty());
  ASSERT_EQ(calls.created.back(), (*copy)->id());
  EXPECT_EQ(calls.upper_tars.back(), tar);
  EXPECT_EQ(calls.upper_tars.front(), "");  // the source's own create
  // Less disk than the files came from is refused by name.
  spec.shape.disk_mib = source->spec().shape.disk_mib - 1;
  spec.shape_given.disk = true;
  auto small = manager_->Create(spec, Soon());
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), Code::kInvalidRequest);
  EXPECT_NE(small.status().message().find("body.diskMiB"), std::string::npos);
}

TEST_F(SandboxManagerTest, ADiskSnapshotNeedsNoPausableSource) {
  StartManager();
  SandboxSpec spec = Spec();
  spec.pausable = false;
  auto source = manager_->Create(spec, Soon());
  ASSERT_TRUE(source.ok());
  auto memory = manager_->Snapshot(*source, SnapshotOptions{});
  EXPECT_EQ(memory.status().code(), Code::kNotPausable);
  SnapshotOptions disk;
  disk.mode = store::SnapshotMode::kDisk;
  EXPECT_TRUE(manager_->Snapshot(*source, disk).ok());
}

TEST_F(SandboxManagerTest, AFailedCaptureLeavesNoSnapshot) {
  StartManager();
  auto source = MustCreate();
  engine_.FailNextCheckpoints(1);
  auto snap = manager_->Snapshot(source, SnapshotOptions{});
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().code(), Code::kSnapshotFailed);
  EXPECT_TRUE(manager_->snapshots().List().empty());
  EXPECT_EQ(source->state(), SandboxState::kRunning);
  manager_->Stop(source, "requested");
  snap = manager_->Snapshot(source, SnapshotOptions{});
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().code(), Code::kNotRunning);
}

TEST_F(SandboxManagerTest, ARestoredCopysStartupWeightEndsAfterSomeCpu) {
  StartManager();
  auto source = MustCreate();
  auto snap = manager_->Snapshot(source, SnapshotOptions{});
  ASSERT_TRUE(snap.ok());
  SandboxSpec spec = Spec();
  spec.snapshot = snap->id;
  auto a = manager_->Create(spec, Soon());
  auto b = manager_->Create(spec, Soon());
  ASSERT_TRUE(a.ok() && b.ok());
  std::string ida = (*a)->id(), idb = (*b)->id();
  EXPECT_EQ(engine_.CpuWeight(ida), engine::kStartupCpuWeight);
  EXPECT_EQ(engine_.CpuWeight(source->id()), engine::kCpuWeight);  // fresh: never boosted
  // a: ends once it used 150 ms of CPU (the lease loop checks every 100 ms).
  engine_.AddCpu(ida, 150'000'000);
  ASSERT_TRUE(WaitUntil([&] { return engine_.CpuWeight(ida) == engine::kCpuWeight; }));
  // b: ends at its first command, once.
  manager_->CommandFinished(*b);
  manager_->CommandFinished(*b);
  EXPECT_EQ(engine_.CpuWeight(idb), engine::kCpuWeight);
  auto weights = engine_.calls().cpu_weights;
  EXPECT_EQ(std::count(weights.begin(), weights.end(), std::pair(idb, engine::kCpuWeight)), 1);
  EXPECT_EQ(std::count(weights.begin(), weights.end(), std::pair(ida, engine::kCpuWeight)), 1);
}

TEST_F(SandboxManagerTest, CreateFromASnapshotTakesAPooledCopy) {
  ManagerOptions options = Fast();
  options.default_pool_size = 1;
  StartManager(options);
  auto source = MustCreate();
  auto snap = manager_->Snapshot(source, SnapshotOptions{});
  ASSERT_TRUE(snap.ok());
  ASSERT_TRUE(WaitUntil([&] { return manager_->snapshots().PoolOf(snap->id).ready == 1; }));
  std::string pooled = engine_.calls().restored.at(0);
  SandboxSpec spec = Spec();
  spec.snapshot = snap->id;
  auto copy = manager_->Create(spec, Soon());
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ((*copy)->id(), pooled);                      // no restore of its own
  EXPECT_EQ(engine_.channel(pooled)->Count("ping"), 0);  // checked from the host
  EXPECT_EQ(capacity_->stats().running, 2);
  // The pool refills; deleting the snapshot destroys the pooled copy only.
  ASSERT_TRUE(WaitUntil([&] { return manager_->snapshots().PoolOf(snap->id).ready == 1; }));
  std::string refill = engine_.calls().restored.at(1);
  EXPECT_TRUE(manager_->snapshots().Delete(snap->id));
  EXPECT_FALSE(engine_.Has(refill));
  EXPECT_TRUE(engine_.Has(pooled));
  EXPECT_EQ((*copy)->state(), SandboxState::kRunning);
}

class ForkTest : public SandboxManagerTest, public ::testing::WithParamInterface<bool> {};

TEST_P(ForkTest, PartialFailureReturnsTheCopiesThatStarted) {
  bool keep = GetParam();
  StartManager();
  auto source = MustCreate();
  engine_.FailNextRestores(1);
  ForkOptions opts;
  opts.count = 3;
  opts.keep_snapshot = keep;
  ForkResult r = manager_->Fork(source, opts, Soon());
  EXPECT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.code(), Code::kStartupFailed);
  ASSERT_EQ(r.copies.size(), 2u);
  for (const auto& c : r.copies) {
    EXPECT_EQ(c->state(), SandboxState::kRunning);
    EXPECT_EQ(c->spec().labels, source->spec().labels);
    EXPECT_TRUE(engine_.Has(c->id()));
  }
  EXPECT_EQ(engine_.calls().restored.size(), 3u);
  EXPECT_EQ(capacity_->stats().running, 3);  // the source and two copies
  auto stopped = Stopped();
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(stopped[0]->Record().stop_reason, "startup_failed");
  EXPECT_EQ(manager_->snapshots().List().size(), keep ? 1u : 0u);
  auto dir = fs::path(snapshots_.CheckpointDir("x")).parent_path().parent_path();
  size_t left = std::distance(fs::directory_iterator(dir), fs::directory_iterator());
  EXPECT_EQ(left, keep ? 1u : 0u);  // the fork's snapshot is gone from disk too
}

INSTANTIATE_TEST_SUITE_P(KeepSnapshot, ForkTest, ::testing::Bool());

TEST_F(SandboxManagerTest, LeaseExpiresAndExtendMovesIt) {
  StartManager();
  auto a = MustCreate(Spec("key_a", 1));
  auto b = MustCreate(Spec("key_a", 1));
  ASSERT_TRUE(a && b);
  int64_t b_end = b->expires_ms();
  auto moved = manager_->Extend(b, 1);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(*moved, b_end + 1000);
  EXPECT_EQ(Stored(b->id())->expires_ms, b_end + 1000);
  // Stopped once its second is up (the lease loop looks every 100 ms).
  ASSERT_TRUE(WaitUntil([&] { return a->state() == SandboxState::kStopped; }, milliseconds(2500)));
  EXPECT_EQ(a->Record().stop_reason, "lease_expired");
  EXPECT_GE(a->Record().ended_ms, a->expires_ms());
  EXPECT_FALSE(engine_.Has(a->id()));
  // b's lease ends a second later than a's did.
  EXPECT_EQ(b->state(), SandboxState::kRunning);
  EXPECT_LT(StableNowMs(), b->expires_ms());
  ASSERT_TRUE(WaitUntil([&] { return capacity_->stats().running == 1; }));
}

TEST_F(SandboxManagerTest, MeteringChargesTheCpuTheEngineMeasured) {
  StartManager();
  auto s = MustCreate();
  ASSERT_TRUE(s);
  engine_.AddCpu(s->id(), 2'000'000'000);  // 2 CPU-seconds
  ASSERT_TRUE(WaitUntil([&] { return s->meter().cpu_seconds >= 2.0; }));
  Meter m = s->meter();
  EXPECT_DOUBLE_EQ(m.cpu_seconds, 2.0);
  EXPECT_EQ(m.cpu_ns, 2'000'000'000u);
  double cpu_micros = 2.0 / 3600 * PriceTable{}.vcpu_hour_micros;
  EXPECT_GE(m.micros, cpu_micros);
  EXPECT_GT(m.gib_hours, 0);
  // The ledger holds exactly what the sandbox's meter says it was billed
  // (retried: the meter loop may tick between the flush and the reading).
  std::vector<store::UsageStore::Total> totals;
  EXPECT_TRUE(WaitUntil([&] {
    manager_->MeterAll(true);
    totals = manager_->usage().Totals(0, StableNowMs() + 60000, "", std::nullopt);
    return totals.size() == 1 && std::abs(totals[0].micros - s->meter().micros) < 1e-6;
  }));
  ASSERT_EQ(totals.size(), 1u);
  EXPECT_DOUBLE_EQ(totals[0].cpu_seconds, 2.0);
  EXPECT_EQ(totals[0].sandboxes, 1);
  EXPECT_GE(totals[0].micros, cpu_micros);
  EXPECT_GE(manager_->usage().SpentMicrosSince("key_a", 0), totals[0].micros - 1e-6);
  EXPECT_EQ(manager_->usage().SpentMicrosSince("key_b", 0), 0);
  EXPECT_NEAR(Stored(s->id())->meter.cpu_seconds, 2.0, 1e-9);
}

TEST_F(SandboxManagerTest, ASandboxThatDiesIsStoppedAndReleasesCapacity) {
  StartManager();
  auto s = MustCreate();
  auto other = MustCreate();
  ASSERT_TRUE(s && other);
  ASSERT_TRUE(engine_.Kill(s->id()));
  ASSERT_TRUE(WaitUntil([&] { return s->state() == SandboxState::kStopped; }));
  EXPECT_EQ(s->Record().stop_reason, "sandbox_died");
  ASSERT_TRUE(WaitUntil([&] { return capacity_->stats().running == 1; }));
  EXPECT_FALSE(engine_.Has(s->id()));  // destroyed, not left dead on the host
  ASSERT_TRUE(WaitUntil([&] {
    auto rec = Stored(s->id());
    return rec && rec->state == SandboxState::kStopped;
  }));
  EXPECT_EQ(Stored(s->id())->stop_reason, "sandbox_died");
  EXPECT_EQ(other->state(), SandboxState::kRunning);
}

TEST_F(SandboxManagerTest, DeleteReturnsTheLastRecordAndARepeatTheSame) {
  StartManager();
  auto s = MustCreate();
  ASSERT_TRUE(s);
  std::string id = s->id();
  auto first = manager_->Delete(id, std::string("key_b"));
  EXPECT_FALSE(first);  // not that key's
  EXPECT_EQ(s->state(), SandboxState::kRunning);
  first = manager_->Delete(id);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->record.state, SandboxState::kStopped);
  EXPECT_EQ(first->record.stop_reason, "requested");
  EXPECT_FALSE(manager_->Get(id));
  EXPECT_FALSE(Stored(id));  // gone from the durable table
  EXPECT_FALSE(engine_.Has(id));
  EXPECT_EQ(capacity_->stats().running, 0);
  auto again = manager_->Delete(id);
  ASSERT_TRUE(again);
  EXPECT_EQ(nlohmann::json(again->record), nlohmann::json(first->record));
  EXPECT_EQ(again->deleted_ms, first->deleted_ms);
  EXPECT_FALSE(manager_->Delete(id, std::string("key_b")));
  EXPECT_FALSE(manager_->Delete("never-known"));
}

TEST_F(SandboxManagerTest, SetNetworkAndExtendNeedARunningSandbox) {
  StartManager();
  auto s = MustCreate();
  ASSERT_TRUE(s);
  network::Policy open;
  open.internet = true;
  auto version = manager_->SetNetwork(s, open);
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, 2);
  EXPECT_TRUE(Stored(s->id())->network.internet);
  manager_->Stop(s, "requested");
  EXPECT_EQ(s->state(), SandboxState::kStopped);
  auto set = manager_->SetNetwork(s, network::Policy{});
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), Code::kNotRunning);
  auto extended = manager_->Extend(s, 60);
  ASSERT_FALSE(extended.ok());
  EXPECT_EQ(extended.status().code(), Code::kNotRunning);
  EXPECT_TRUE(Stored(s->id())->network.internet);  // unchanged
}

TEST_F(SandboxManagerTest, AFirstLeaseOverBudgetIsRefusedBeforeStarting) {
  StartManager();
  SandboxSpec spec = Spec();
  spec.max_cost_micros = 1;
  auto made = manager_->Create(spec, Soon());
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), Code::kBudgetExceeded);
  EXPECT_TRUE(engine_.calls().created.empty());
  EXPECT_EQ(capacity_->stats().running, 0);
}

}  // namespace
}  // namespace sandbox_manager_test
}  // namespace kiln::control
