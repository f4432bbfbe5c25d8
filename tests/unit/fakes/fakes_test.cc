// The fakes other tests stand on (tests/fakes): the behaviour they promise.
#include <atomic>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "common/time.h"
#include "fakes/fake_agent.h"
#include "fakes/fake_engine.h"
#include "proto/frame.h"
#include "unit/support/temp_dir.h"

namespace kiln::fakes {
namespace fakes_test {
namespace {

using Message = engine::AgentStream::Message;
namespace fs = std::filesystem;

TEST(FakeAgentTest, AnswersPingWithItsClock) {
  auto ch = std::make_shared<FakeAgentChannel>();
  int64_t before = NowMs();
  auto pong = engine::RoundTrip(*ch, {{"op", "ping"}}, 1000);
  ASSERT_TRUE(pong.contains("time")) << pong;
  EXPECT_GE(pong["time"].get<int64_t>(), before);
  EXPECT_EQ(ch->Count("ping"), 1);
  ch->Handle("ping", nullptr);  // an agent that stopped answering
  EXPECT_EQ(engine::RoundTrip(*ch, {{"op", "ping"}}, 20)["error"]["code"], "agent_timeout");
  EXPECT_EQ(OpName({{"op", "egress.listen"}}), "egress.listen");
  EXPECT_EQ(OpName(nlohmann::json::array()), "");
}

TEST(FakeAgentTest, UnhandledOpsWaitForTheTestAndCarryBothWays) {
  auto ch = std::make_shared<FakeAgentChannel>();
  auto stream = ch->Start({{"op", "exec"}, {"cmd", "true"}});
  auto op = ch->WaitOp("exec", 1000);
  ASSERT_TRUE(op);
  EXPECT_EQ(op->request()["cmd"], "true");
  EXPECT_FALSE(ch->WaitOp("exec", 0));  // each op is handed out once
  Message m;
  EXPECT_FALSE(stream->Next(&m, 0));
  EXPECT_TRUE(op->Event({{"pid", 7}}));
  EXPECT_TRUE(op->Data(proto::kStdout, "hi"));
  EXPECT_TRUE(op->Respond({{"exitCode", 0}}));
  EXPECT_FALSE(op->Data(proto::kStdout, "late"));  // answered: over
  ASSERT_TRUE(stream->Next(&m, 0));
  EXPECT_EQ(m.kind, Message::kEvent);
  ASSERT_TRUE(stream->Next(&m, 0));
  EXPECT_EQ(m.kind, Message::kData);
  EXPECT_EQ(m.data, "hi");
  stream->Ack(2);
  EXPECT_EQ(op->acked(), 2u);
  ASSERT_TRUE(stream->Next(&m, 0));
  EXPECT_EQ(m.kind, Message::kResponse);
  EXPECT_EQ(m.body["exitCode"], 0);
}

TEST(FakeAgentTest, WindowedSendsWaitForTheAgentToRead) {
  auto ch = std::make_shared<FakeAgentChannel>();
  auto stream = ch->Start({{"op", "egress.attach"}});
  auto op = ch->WaitOp("egress.attach", 1000);
  ASSERT_TRUE(op);
  std::atomic<bool> sent{false};
  std::thread sender([&] {
    EXPECT_TRUE(
        stream->SendDataWindowed(proto::kStdin, std::string(proto::kStreamWindow + 10, 'x'), true));
    sent = true;
  });
  FakeAgentOp::Input in;
  ASSERT_TRUE(op->NextInput(&in, 1000));
  EXPECT_EQ(in.data.size(), proto::kStreamWindow);
  EXPECT_FALSE(in.end);
  ASSERT_TRUE(op->NextInput(&in, 1000));  // sent once the first was read
  EXPECT_EQ(in.data.size(), 10u);
  EXPECT_TRUE(in.end);
  sender.join();
  EXPECT_TRUE(sent);
  stream->Cancel();
  EXPECT_TRUE(op->cancelled());
  EXPECT_FALSE(stream->SendDataWindowed(proto::kStdin, "x", false));
}

TEST(FakeAgentTest, DeathEndsPendingAndLaterOpsAndCallsOnCloseOnce) {
  auto ch = std::make_shared<FakeAgentChannel>();
  std::atomic<int> closed{0};
  ch->OnClose([&] { ++closed; });
  auto pending = ch->Start({{"op", "exec"}});
  Message m;
  std::thread waiter([&] {
    ASSERT_TRUE(pending->Next(&m, 2000));
    EXPECT_EQ(m.kind, Message::kClosed);
  });
  ch->Die();
  waiter.join();
  ASSERT_TRUE(pending->Next(&m, 0));  // and again, without blocking
  EXPECT_EQ(m.kind, Message::kClosed);
  EXPECT_FALSE(ch->alive());
  auto later = ch->Start({{"op", "ping"}});
  ASSERT_TRUE(later->Next(&m, 0));
  EXPECT_EQ(m.kind, Message::kClosed);
  ch->Close();
  ch->Die();
  EXPECT_EQ(closed, 1);
  EXPECT_EQ(ch->on_close_calls(), 1);
  EXPECT_FALSE(ch->closed_by_kilnd());
  EXPECT_EQ(ch->Count("ping"), 0);  // never delivered
}

TEST(FakeEngineTest, KnobsAndRecords) {
  testutil::TempDir dir;
  FakeEngine e;
  engine::CreateParams p{"a", Shape{}, "/rootfs"};
  e.FailNextCreates(1);
  auto failed = e.Create(p);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), Code::kStartupFailed);
  EXPECT_FALSE(e.Has("a"));
  ASSERT_TRUE(e.Create(p).ok());
  EXPECT_EQ(e.calls().created, (std::vector<std::string>{"a", "a"}));

  // Checkpoint writes a file into a directory that must not exist.
  std::string ck = dir.path() + "/ck";
  auto stats = e.Checkpoint("a", ck);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->bytes, fs::file_size(ck + "/checkpoint.img"));
  EXPECT_EQ(e.Checkpoint("a", ck).status().code(), Code::kSnapshotFailed);
  // Restore needs one; it starts boosted.
  engine::CreateParams q{"b", Shape{}, "/rootfs"};
  EXPECT_EQ(e.Restore(q, dir.path() + "/none").status().code(), Code::kStartupFailed);
  ASSERT_TRUE(e.Restore(q, ck).ok());
  EXPECT_EQ(e.CpuWeight("b"), engine::kStartupCpuWeight);

  // Leftovers of an earlier daemon: listed; only a running one attaches.
  e.AddRunning("r");
  e.AddOrphan("o");
  EXPECT_EQ(e.List(), (std::vector<std::string>{"a", "b", "o", "r"}));
  EXPECT_TRUE(e.Attach("r", Shape{}).ok());
  EXPECT_EQ(e.Attach("o", Shape{}).status().code(), Code::kNotRunning);

  // A sandbox that dies: its channel ends and says so.
  std::atomic<int> closed{0};
  e.channel("a")->OnClose([&] { ++closed; });
  ASSERT_TRUE(e.Kill("a"));
  EXPECT_EQ(closed, 1);
  EXPECT_FALSE(e.channel("a")->alive());
  EXPECT_EQ(e.Attach("a", Shape{}).status().code(), Code::kNotRunning);
  e.Destroy("a");
  e.Destroy("a");
  EXPECT_FALSE(e.Has("a"));
  EXPECT_EQ(e.calls().destroyed, (std::vector<std::string>{"a", "a"}));

  e.AddCpu("b", 5);
  e.AddCpu("b", 5);
  EXPECT_EQ(e.GetUsage("b").cpu_ns, 10u);
  EXPECT_EQ(e.GetUsage("gone").cpu_ns, 0u);
}

}  // namespace
}  // namespace fakes_test
}  // namespace kiln::fakes
