// io (src/io): its words mapped to the agent's and back, the output
// collector both JSON execs share, and Service::Reach's rules, over the
// in-process fake agent (tests/fakes).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "common/time.h"
#include "fakes/fake_agent.h"
#include "io/output_collector.h"
#include "io/proto_map.h"
#include "io/service.h"

namespace kiln::io {
namespace io_test {
namespace {

using nlohmann::json;

TEST(IoProtoMapTest, CommandEnvGoesOverTheSandboxes) {
  Command c{.command = "echo $A", .env = {{"A", "mine"}}, .cwd = "/tmp", .as_root = true};
  ExecOptions o{.timeout_ms = 5000, .stdin_bytes = "x", .capture_cap = 10, .kill_past_cap = true};
  proto::ExecRequest r = ToProto(c, o, {{"A", "sandbox"}, {"B", "sandbox"}});
  EXPECT_EQ(r.command, "echo $A");
  EXPECT_FALSE(r.argv);
  EXPECT_EQ(r.env, (std::map<std::string, std::string>{{"A", "mine"}, {"B", "sandbox"}}));
  EXPECT_EQ(r.cwd, "/tmp");
  EXPECT_TRUE(r.as_root);
  EXPECT_EQ(r.timeout_ms, 5000);
  EXPECT_TRUE(r.stdin_data);
  EXPECT_EQ(r.capture_limit, 10u);
  EXPECT_TRUE(r.kill_past_limit);

  ProcessSpec p{.command = {.argv = std::vector<std::string>{"top"}},
                .stdin_pipe = true,
                .timeout_ms = 7,
                .pty = TerminalSize{.cols = 90, .rows = 33}};
  proto::ProcStartRequest start = ToProto(p, {{"B", "sandbox"}});
  EXPECT_EQ(start.argv, std::vector<std::string>{"top"});
  EXPECT_EQ(start.env.at("B"), "sandbox");
  EXPECT_TRUE(start.stdin_pipe);
  EXPECT_EQ(start.timeout_ms, 7);
  EXPECT_EQ(start.pty, (proto::TerminalSize{.cols = 90, .rows = 33}));
  EXPECT_FALSE(ToProto(ProcessSpec{}, {}).pty);
}

TEST(IoProtoMapTest, AnswersReadInIosWords) {
  proto::ProcessInfo p{.id = "p1", .state = "timed_out", .pty = proto::TerminalSize{}};
  ProcessInfo info = FromProto(p);
  EXPECT_EQ(info.id, "p1");
  EXPECT_EQ(info.state, ProcessState::kTimedOut);
  EXPECT_EQ(info.pty, TerminalSize{});
  const std::vector<std::pair<std::string, ProcessState>> states = {
      {"running", ProcessState::kRunning},
      {"exited", ProcessState::kExited},
      {"killed", ProcessState::kKilled},
      {"timed_out", ProcessState::kTimedOut}};
  for (const auto& [wire, state] : states) {
    p.state = wire;
    EXPECT_EQ(FromProto(p).state, state);
    EXPECT_EQ(StateName(state), wire);
  }
  p.state = "zombie";  // an agent that root inside replaced
  EXPECT_EQ(FromProto(p).state, ProcessState::kKilled);

  proto::OutputPage page{.chunks = {{.offset = 1, .stream = "stderr", .data = "e"},
                                    {.offset = 2, .stream = "stdout", .data = "o"}},
                         .next_cursor = 3,
                         .complete = true};
  OutputPage out = FromProto(page);
  ASSERT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(out.chunks[0].stream, OutputStream::kStderr);
  EXPECT_EQ(StreamName(out.chunks[1].stream), "stdout");
  EXPECT_EQ(out.next_cursor, 3u);
  EXPECT_TRUE(out.complete);

  proto::FileEntry e{.name = "l", .path = "/l", .type = "symlink", .symlink_target = "/t"};
  FileStat st = FromProto(proto::FileStat{.exists = true, .entry = e});
  EXPECT_TRUE(st.exists);
  EXPECT_EQ(st.entry.type, FileType::kSymlink);
  EXPECT_EQ(TypeName(st.entry.type), "symlink");
  EXPECT_EQ(st.entry.symlink_target, "/t");
  e.type = "fifo";
  EXPECT_EQ(FromProto(e).type, FileType::kOther);

  ExitStatus x = FromProto(proto::ExecExit{.signal = "SIGKILL", .stdin_bytes = 4});
  EXPECT_FALSE(x.exit_code);
  EXPECT_EQ(x.signal, "SIGKILL");
  EXPECT_EQ(x.stdin_bytes, 4u);
}

TEST(IoOutputCollectorTest, KeepsEachStreamUpToTheCap) {
  OutputCollector out(4);
  out.Add(OutputStream::kStdout, "ab");
  out.Add(OutputStream::kStdout, "cdef");
  out.Add(OutputStream::kStderr, "xy");
  EXPECT_EQ(out.text(OutputStream::kStdout), "abcd");
  EXPECT_TRUE(out.over(OutputStream::kStdout));
  EXPECT_EQ(out.text(OutputStream::kStderr), "xy");
  EXPECT_FALSE(out.over(OutputStream::kStderr));
  out.Add(OutputStream::kStderr, "zw");  // exactly full is not over
  EXPECT_FALSE(out.over(OutputStream::kStderr));

  OutputCollector all(0);
  all.Add(OutputStream::kStdout, std::string(1000, 'a'));
  EXPECT_EQ(all.text(OutputStream::kStdout).size(), 1000u);
  EXPECT_FALSE(all.over(OutputStream::kStdout));
}

class SandboxIoTest : public ::testing::Test {
 protected:
  // An exec that starts as pid 42, writes `out` and `err` and exits 3.
  void AnswerExec(std::string out, std::string err) {
    channel_->Handle("exec", [out, err](const std::shared_ptr<fakes::FakeAgentOp>& op) {
      op->Event(json(proto::ExecStarted{.pid = 42}));
      op->Data(1, out);
      op->Data(2, err);
      op->Respond(json(proto::ExecExit{.exit_code = 3, .stdout_truncated = false}));
    });
  }

  std::shared_ptr<fakes::FakeAgentChannel> channel_ = std::make_shared<fakes::FakeAgentChannel>();
  SandboxIo io_{channel_, {{"HOME", "/home/user"}, {"A", "sandbox"}}};
};

TEST_F(SandboxIoTest, ExecToEndCollectsUnderTheCap) {
  AnswerExec("hello world", "oops");
  Command c{.command = "x", .env = {{"A", "mine"}}};
  auto run = io_.ExecToEnd(c, ExecOptions{.capture_cap = 5}, nullptr);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->end, ExecResult::End::kExited);
  EXPECT_EQ(run->pid, 42);
  EXPECT_EQ(run->exit.exit_code, 3);
  EXPECT_EQ(run->stdout_data, "hello");
  EXPECT_TRUE(run->stdout_truncated);
  EXPECT_EQ(run->stderr_data, "oops");
  EXPECT_FALSE(run->stderr_truncated);
  // The request the agent saw: the sandbox's env under the command's.
  json sent = channel_->requests().back();
  EXPECT_EQ(sent["env"]["A"], "mine");
  EXPECT_EQ(sent["env"]["HOME"], "/home/user");
}

TEST_F(SandboxIoTest, ExecToEndPassesErrorsAndAGoneSandbox) {
  channel_->Handle("exec", [](const std::shared_ptr<fakes::FakeAgentOp>& op) {
    op->Respond(json{{"error", {{"code", "file_not_found"}, {"message", "no /nope"}}}});
  });
  auto failed = io_.ExecToEnd(Command{.argv = std::vector<std::string>{"/nope"}}, {}, nullptr);
  EXPECT_EQ(failed.status().code(), Code::kFileNotFound);

  channel_->Handle("exec", nullptr);
  std::thread die([this] {
    channel_->WaitOp("exec", 5000);
    channel_->Die();
  });
  auto gone = io_.ExecToEnd(Command{.command = "sleep 9"}, {}, nullptr);
  die.join();
  EXPECT_EQ(gone.status().code(), Code::kNotRunning);
  EXPECT_EQ(gone.status().message(), "the sandbox stopped while the command ran");
}

TEST_F(SandboxIoTest, CollectorStopsAtItsDeadlineAndForAnAbandonedCaller) {
  channel_->Handle("exec", nullptr);  // a command that never ends
  ExecStream slow = io_.Exec(Command{.command = "sleep 9"}, {});
  auto late = CollectExec(slow, 0, MonotonicNowMs() + 50, nullptr);
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->end, ExecResult::End::kDeadline);

  ExecStream left = io_.Exec(Command{.command = "sleep 9"}, {});
  auto op = channel_->WaitOp("exec", 5000);
  ASSERT_TRUE(op);
  op = channel_->WaitOp("exec", 5000);
  ASSERT_TRUE(op);
  auto gone = CollectExec(left, 0, MonotonicNowMs() + 60000, [] { return true; });
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->end, ExecResult::End::kAbandoned);
  EXPECT_TRUE(op->WaitOver(5000));
  EXPECT_TRUE(op->cancelled());
}

TEST_F(SandboxIoTest, FileAndProcessCallsAnswerIosTypes) {
  channel_->Handle("file.stat", [](const std::shared_ptr<fakes::FakeAgentOp>& op) {
    op->Respond(
        json(proto::FileStat{.exists = true, .entry = {.path = "/d", .type = "directory"}}));
  });
  auto st = io_.Stat("/d");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->entry.type, FileType::kDirectory);

  channel_->Handle("proc.start", [](const std::shared_ptr<fakes::FakeAgentOp>& op) {
    EXPECT_EQ(op->request()["env"]["A"], "sandbox");
    op->Respond(json(proto::ProcessInfo{.id = "p1", .state = "running"}));
  });
  auto p = io_.ProcessStart(ProcessSpec{.command = {.command = "sleep 1"}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state, ProcessState::kRunning);
}

TEST_F(SandboxIoTest, AWatchPageIsMappedAndCheckedAgainstTheAgentsBounds) {
  proto::WatchPage page;
  page.items.push_back(proto::WatchItem{
      .seq = 7, .event = proto::WatchEvent{.type = "write", .path = "/w/a", .count = 3}});
  page.items.push_back(proto::WatchItem{
      .seq = 8,
      .notice = proto::WatchNotice{.kind = "overflow", .dropped = 2, .reason = "kernel"}});
  page.next_cursor = 9;
  page.watch = proto::WatchInfo{.id = "w1", .path = "/w", .state = "running"};
  channel_->Handle("watch.read", [&page](const std::shared_ptr<fakes::FakeAgentOp>& op) {
    EXPECT_EQ(op->request()["id"], "w1");
    op->Respond(json(page));
  });
  auto read = io_.WatchRead("w1", 7, 0, 5000);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->items.size(), 2u);
  EXPECT_EQ(read->items[0].event->count, 3u);
  EXPECT_EQ(read->items[1].notice->kind, "overflow");
  EXPECT_TRUE(read->watch.running);
  EXPECT_EQ(read->next_cursor, 9u);

  // What a root inside could send instead: refused, not passed on.
  page.items[0].seq = 1;  // before the cursor asked for
  EXPECT_EQ(io_.WatchRead("w1", 7, 0, 5000).status().code(), Code::kInternal);
  page.items[0].seq = 7;
  page.items[0].event->path = std::string(kWatchPathMax + 1, 'x');
  EXPECT_EQ(io_.WatchRead("w1", 7, 0, 5000).status().code(), Code::kInternal);
  page.items.assign(kWatchPageItems + 1, proto::WatchItem{.seq = 7, .event = proto::WatchEvent{}});
  EXPECT_EQ(io_.WatchRead("w1", 7, 0, 5000).status().code(), Code::kInternal);
}

class ServiceTest : public ::testing::Test {
 protected:
  ServiceTest() {
    control::SandboxSpec spec;
    spec.env = {{"A", "sandbox"}};
    sandbox_ = std::make_shared<control::Sandbox>("sb_1", spec, 0);
    sandbox_->MarkRunning(channel_, 0);
  }

  void Pause(bool auto_wake) {
    control::SandboxSpec spec = sandbox_->spec();
    spec.auto_wake = auto_wake;
    ASSERT_TRUE(sandbox_->UpdateSpec(spec));
    ASSERT_TRUE(sandbox_->MarkPausing());
    sandbox_->MarkCheckpointed("ckpt", "requested", 0, 60000);
    sandbox_->MarkPaused();
  }

  Status spending_ = Status::Ok();
  std::vector<std::string> checked_;
  Service service_{[this](const std::string& key, std::optional<int64_t>) {
    checked_.push_back(key);
    return spending_;
  }};
  std::shared_ptr<fakes::FakeAgentChannel> channel_ = std::make_shared<fakes::FakeAgentChannel>();
  std::shared_ptr<control::Sandbox> sandbox_;
};

TEST_F(ServiceTest, ARunningSandboxIsReachedWithoutAWake) {
  auto io = service_.Reach(*sandbox_, {"key_1", 100});
  ASSERT_TRUE(io.ok());
  EXPECT_TRUE(checked_.empty());
}

TEST_F(ServiceTest, APausedSandboxWithoutAutoWakeIsRefused) {
  Pause(false);
  auto io = service_.Reach(*sandbox_, {"key_1", 100});
  EXPECT_EQ(io.status().code(), Code::kSandboxPaused);
  EXPECT_TRUE(checked_.empty());
}

TEST_F(ServiceTest, ReachAwakeNeverWakes) {
  EXPECT_TRUE(service_.ReachAwake(*sandbox_).ok());
  Pause(true);
  int wakes = 0;
  sandbox_->SetWaker([&] {
    ++wakes;
    return Status::Ok();
  });
  EXPECT_EQ(service_.ReachAwake(*sandbox_).status().code(), Code::kSandboxPaused);
  EXPECT_EQ(wakes, 0);
  EXPECT_TRUE(checked_.empty());
}

TEST_F(ServiceTest, AnAutoWakeIsChargedToTheCaller) {
  Pause(true);
  std::atomic<int> wakes{0};
  auto fresh = std::make_shared<fakes::FakeAgentChannel>();
  sandbox_->SetWaker([&] {
    ++wakes;
    sandbox_->MarkResuming();
    sandbox_->MarkResumed(fresh, 0, 60000);
    return Status::Ok();
  });
  spending_ = Status(Code::kSpendingLimitReached, "spent");
  EXPECT_EQ(service_.Reach(*sandbox_, {"key_1", 100}).status().code(), Code::kSpendingLimitReached);
  EXPECT_EQ(wakes, 0);
  spending_ = Status::Ok();
  auto io = service_.Reach(*sandbox_, {"key_1", 100});
  ASSERT_TRUE(io.ok()) << io.status().ToString();
  EXPECT_EQ(wakes, 1);
  EXPECT_EQ(checked_, (std::vector<std::string>{"key_1", "key_1"}));
}

TEST_F(ServiceTest, AStoppedSandboxIsNotRunning) {
  sandbox_->MarkStopped(0);
  EXPECT_EQ(service_.Reach(*sandbox_, {"key_1", std::nullopt}).status().code(), Code::kNotRunning);
}

}  // namespace
}  // namespace io_test
}  // namespace kiln::io
