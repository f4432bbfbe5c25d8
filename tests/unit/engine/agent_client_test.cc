// engine::AgentClient against an in-process channel that records what it
// is sent and replays canned agent messages.
#include "engine/agent_client.h"

#include <deque>

#include <gtest/gtest.h>

#include "proto/frame.h"

namespace kiln::engine {
namespace agent_client_test {
namespace {

using Message = AgentStream::Message;
using nlohmann::json;

// What the client did to its streams.
struct Record {
  std::vector<json> requests;
  std::vector<uint32_t> acks;
  std::string input;  // data sent, all channels
  bool input_ended = false;
  bool cancelled = false;
};

class ScriptedStream : public AgentStream {
 public:
  ScriptedStream(Record& record, std::deque<Message> script)
      : record_(record), script_(std::move(script)) {}

  // An empty script stands for an agent that does not answer in time.
  bool Next(Message* m, int) override {
    if (script_.empty()) return false;
    *m = std::move(script_.front());
    script_.pop_front();
    return true;
  }
  bool SendData(uint8_t, std::string_view data, bool end) override {
    record_.input += data;
    record_.input_ended |= end;
    return true;
  }
  bool SendDataWindowed(uint8_t channel, std::string_view data, bool end) override {
    return SendData(channel, data, end);
  }
  void Ack(uint32_t bytes) override { record_.acks.push_back(bytes); }
  void Cancel() override {
    record_.cancelled = true;
    script_ = {Message{Message::kClosed}};
  }

 private:
  Record& record_;
  std::deque<Message> script_;
};

// Every stream it starts replays `script`.
class ScriptedChannel : public AgentChannel {
 public:
  std::unique_ptr<AgentStream> Start(const json& request) override {
    record.requests.push_back(request);
    return std::make_unique<ScriptedStream>(record, script);
  }
  bool alive() const override { return true; }
  void OnClose(std::function<void()>) override {}
  void Close() override {}

  Record record;
  std::deque<Message> script;
};

Message Event(json body) { return Message{.kind = Message::kEvent, .body = std::move(body)}; }
Message Data(uint8_t channel, std::string data, bool end = false) {
  return Message{.kind = Message::kData, .channel = channel, .end = end, .data = std::move(data)};
}
Message Answer(json body) { return Message{.kind = Message::kResponse, .body = std::move(body)}; }

class AgentClientTest : public ::testing::Test {
 protected:
  std::shared_ptr<ScriptedChannel> channel_ = std::make_shared<ScriptedChannel>();
  AgentClient client_{channel_};
  Record& record_ = channel_->record;
};

TEST_F(AgentClientTest, ExecDecodesEventsAndAcksOutputOnceTaken) {
  channel_->script = {Event(proto::ExecStarted{.pid = 5}), Data(proto::kStdout, "out"),
                      Data(proto::kStderr, "errors"),
                      Answer(proto::ExecExit{.exit_code = 3, .duration_ms = 8})};
  proto::ExecRequest req;
  req.argv = std::vector<std::string>{"cat"};
  ExecRun run = client_.Exec(req, std::string("in"));
  ASSERT_EQ(record_.requests.size(), 1u);
  EXPECT_EQ(record_.requests[0]["op"], "exec");
  EXPECT_EQ(record_.requests[0]["stdin"], true);  // set by the client, from the bytes
  EXPECT_EQ(record_.requests[0]["argv"], json({"cat"}));
  EXPECT_EQ(record_.input, "in");
  EXPECT_TRUE(record_.input_ended);

  ExecEvent ev;
  ASSERT_TRUE(run.Next(&ev, 100));
  EXPECT_EQ(ev.kind, ExecEvent::kStarted);
  EXPECT_EQ(ev.pid, 5);
  ASSERT_TRUE(run.Next(&ev, 100));
  EXPECT_EQ(ev.kind, ExecEvent::kOutput);
  EXPECT_EQ(ev.stream, 1);
  EXPECT_EQ(ev.data, "out");
  EXPECT_TRUE(record_.acks.empty()) << "acknowledged before the caller dealt with it";
  ASSERT_TRUE(run.Next(&ev, 100));
  EXPECT_EQ(ev.stream, 2);
  EXPECT_EQ(ev.data, "errors");
  EXPECT_EQ(record_.acks, std::vector<uint32_t>{3});
  ASSERT_TRUE(run.Next(&ev, 100));
  EXPECT_EQ(ev.kind, ExecEvent::kExit);
  EXPECT_EQ(ev.exit.exit_code, 3);
  EXPECT_EQ(ev.exit.duration_ms, 8);
  EXPECT_EQ(record_.acks, (std::vector<uint32_t>{3, 6}));
  ASSERT_TRUE(run.Next(&ev, 100));
  EXPECT_EQ(ev.kind, ExecEvent::kClosed);
}

TEST_F(AgentClientTest, ExecErrorAnswerIsAStatus) {
  channel_->script = {
      Answer(proto::AgentError{.code = "invalid_request", .message = "argv is empty"})};
  ExecRun run = client_.Exec(proto::ExecRequest{});
  EXPECT_EQ(record_.requests[0]["stdin"], false);
  EXPECT_TRUE(record_.input.empty());
  ExecEvent ev;
  ASSERT_TRUE(run.Next(&ev, 100));
  EXPECT_EQ(ev.kind, ExecEvent::kError);
  EXPECT_EQ(ev.error.code(), Code::kInvalidRequest);
  EXPECT_EQ(ev.error.message(), "argv is empty");
}

TEST_F(AgentClientTest, ExecSilenceIsATimeoutAndCancelCloses) {
  ExecRun run = client_.Exec(proto::ExecRequest{});
  ExecEvent ev;
  EXPECT_FALSE(run.Next(&ev, 10));
  run.Cancel();
  EXPECT_TRUE(record_.cancelled);
  ASSERT_TRUE(run.Next(&ev, 10));
  EXPECT_EQ(ev.kind, ExecEvent::kClosed);
}

TEST_F(AgentClientTest, ReadFileHandsOutChunks) {
  channel_->script = {Event(proto::FileReadStart{.size = 5, .mode = "644"}),
                      Data(proto::kStdout, "hel"), Data(proto::kStdout, "lo"),
                      Data(proto::kStdout, "", /*end=*/true),
                      Answer(proto::FileReadDone{.size = 5})};
  auto reader = client_.ReadFile("/a");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(record_.requests[0], (json{{"op", "file.read"}, {"path", "/a"}}));
  EXPECT_EQ(reader->size(), 5u);
  std::string content, chunk;
  while (reader->Next(&chunk, 100)) content += chunk;
  EXPECT_EQ(content, "hello");
  EXPECT_TRUE(reader->status().ok()) << reader->status().ToString();
  // The last piece completes the file's 5 bytes: the reader stops there
  // (nothing past a file's size is taken) instead of acknowledging it.
  EXPECT_EQ(record_.acks, (std::vector<uint32_t>{3}));
}

TEST_F(AgentClientTest, ReadFileErrorAnswerIsAStatus) {
  channel_->script = {Answer(
      proto::AgentError{.code = "is_a_directory", .message = "/a: Is a directory", .path = "/a"})};
  auto reader = client_.ReadFile("/a");
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), Code::kIsADirectory);
  EXPECT_EQ(reader.status().details(), (json{{"path", "/a"}}));
}

TEST_F(AgentClientTest, ArchiveGetFailsWhenTarFails) {
  channel_->script = {Event(proto::ExecStarted{.pid = 9}), Data(proto::kStdout, "tar"),
                      Data(proto::kStderr, "tar: oops"), Answer(proto::ExecExit{.exit_code = 2})};
  auto tar = client_.ArchiveGet("/d", true);
  ASSERT_TRUE(tar.ok());
  EXPECT_EQ(record_.requests[0], (json{{"op", "archive.get"}, {"path", "/d"}, {"gzip", true}}));
  std::string chunk, content;
  while (tar->Next(&chunk, 100)) content += chunk;
  EXPECT_EQ(content, "tar");  // not tar's stderr
  EXPECT_EQ(tar->status().code(), Code::kIoError);
}

TEST_F(AgentClientTest, WriteFileSendsContentThenWaitsForTheAnswer) {
  channel_->script = {Answer(proto::FileWritten{.path = "/a", .size = 4})};
  FileWriter file = client_.WriteFile(proto::FileWriteRequest{.path = "/a", .mode = 0600});
  EXPECT_EQ(record_.requests[0], (json{{"op", "file.write"}, {"path", "/a"}, {"mode", 0600}}));
  EXPECT_TRUE(file.Write("ab").ok());
  EXPECT_TRUE(file.Write("cd").ok());
  EXPECT_FALSE(record_.input_ended);
  auto written = file.Finish();
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(written->size, 4u);
  EXPECT_EQ(record_.input, "abcd");
  EXPECT_TRUE(record_.input_ended);
}

TEST_F(AgentClientTest, CallsDecodeAnswersAndErrors) {
  channel_->script = {Answer(proto::FileRemoved{.removed = true})};
  auto removed = client_.Remove("/a", true);
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(removed->removed);
  EXPECT_EQ(record_.requests[0],
            (json{{"op", "file.remove"}, {"path", "/a"}, {"recursive", true}}));

  channel_->script = {Answer(proto::AgentError{.code = "not_found", .message = "no process 'p9'"})};
  auto process = client_.ProcessGet("p9");
  ASSERT_FALSE(process.ok());
  EXPECT_EQ(process.status().code(), Code::kNotFound);
  EXPECT_EQ(process.status().message(), "no process 'p9'");

  channel_->script = {Answer(proto::AgentError{.code = "made_up", .message = "m"})};
  EXPECT_EQ(client_.Ping().status().code(), Code::kInternal);

  channel_->script = {Answer(json{{"ok", true}})};  // no "time"
  EXPECT_EQ(client_.Ping().status().code(), Code::kInternal);

  channel_->script = {Message{Message::kClosed}};
  EXPECT_EQ(client_.Stat("/a").status().code(), Code::kNotRunning);

  channel_->script = {};
  EXPECT_EQ(client_.Stat("/a").status().code(), Code::kAgentTimeout);
}

TEST_F(AgentClientTest, ProcessWriteEncodesBytes) {
  channel_->script = {Answer(proto::ProcWritten{.offset = 7})};
  auto offset = client_.ProcessWrite("p1", std::string("a\0b", 3), true);
  ASSERT_TRUE(offset.ok());
  EXPECT_EQ(*offset, 7u);
  EXPECT_EQ(record_.requests[0],
            (json{{"op", "proc.write"}, {"id", "p1"}, {"base64", "YQBi"}, {"eof", true}}));
}

TEST(AgentErrorTest, StatusRoundTrip) {
  Status s(Code::kFileNotFound, "/x: No such file", json{{"path", "/x"}});
  json answer = AgentErrorFromStatus(s);
  EXPECT_EQ(
      answer,
      (json{{"error",
             {{"code", "file_not_found"}, {"message", "/x: No such file"}, {"path", "/x"}}}}));
  Status back = StatusFromAgentError(answer);
  EXPECT_EQ(back.code(), s.code());
  EXPECT_EQ(back.message(), s.message());
  EXPECT_EQ(back.details(), s.details());
  EXPECT_FALSE(AgentErrorFromStatus(Status(Code::kBusy, "b")).path.has_value());
}

}  // namespace
}  // namespace agent_client_test
}  // namespace kiln::engine
