// The interpreter kernels' protocol as kilnd reads it: untrusted lines,
// line caps, and an execution folded together under its caps.
#include "interpreter/protocol.h"

#include <gtest/gtest.h>

namespace interpreter_protocol_test {
namespace {

using kiln::interpreter::Execution;
using kiln::interpreter::ExecutionBuilder;
using kiln::interpreter::KernelMessage;
using kiln::interpreter::LineSplitter;
using kiln::interpreter::ParseKernelLine;
using nlohmann::json;

TEST(InterpreterProtocolTest, ParsesEachKind) {
  auto start = ParseKernelLine(R"({"k":"start","id":"x1","n":3})");
  ASSERT_TRUE(start);
  EXPECT_EQ(start->kind, KernelMessage::kStart);
  EXPECT_EQ(start->id, "x1");
  EXPECT_EQ(start->n, 3);
  auto out = ParseKernelLine(R"({"k":"stderr","text":"é\n"})");
  ASSERT_TRUE(out);
  EXPECT_EQ(out->kind, KernelMessage::kStderr);
  EXPECT_EQ(out->text, "é\n");
  auto result = ParseKernelLine(R"({"k":"result","main":true,"data":{"text/plain":"2"}})");
  ASSERT_TRUE(result);
  EXPECT_TRUE(result->main);
  EXPECT_EQ(result->data, (json{{"text/plain", "2"}}));
  auto done = ParseKernelLine(
      R"({"k":"done","id":"x1","n":3,"status":"error","dropped":{"stdout":5,"stderr":2}})");
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, "error");
  EXPECT_EQ(done->dropped, 7u);
}

TEST(InterpreterProtocolTest, RefusesWhatIsNotAMessage) {
  for (const char* line : {"", "hello from a child process", "{", "[1]", R"({"k":"nope"})",
                           R"({"k":"start","id":5})", R"({"k":"stdout","text":["a"]})",
                           R"({"k":"result","data":"text"})", R"({"k":"start","n":"3"})"}) {
    EXPECT_FALSE(ParseKernelLine(line)) << line;
  }
  std::string deep(100, '[');
  EXPECT_FALSE(ParseKernelLine(R"({"k":"result","data":{"a":)" + deep + "}}"));
  // A status the API does not know becomes error, not a new status.
  auto done = ParseKernelLine(R"({"k":"done","id":"x","n":1,"status":"weird"})");
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, "error");
}

TEST(InterpreterProtocolTest, SplitsLinesAcrossChunksAndSkipsLongOnes) {
  LineSplitter split(8);
  std::vector<std::string> lines;
  split.Feed("ab", &lines);
  split.Feed("c\nde", &lines);
  EXPECT_EQ(lines, (std::vector<std::string>{"abc"}));
  split.Feed("0123456789", &lines);  // "de" + 10 bytes: past the cap
  split.Feed("xyz\nok\n", &lines);
  EXPECT_EQ(lines, (std::vector<std::string>{"abc", "ok"}));
  EXPECT_EQ(split.dropped(), 15u);
}

TEST(InterpreterProtocolTest, KeepsStreamsUnderTheCapAndCountsTheRest) {
  Execution e;
  ExecutionBuilder b(&e);
  KernelMessage m;
  m.kind = KernelMessage::kStdout;
  m.text = std::string(kiln::interpreter::kMaxStreamBytes - 1, 'x');
  json ev = b.Apply(m);
  EXPECT_EQ(ev["k"], "stdout");
  m.text = "abc";
  ev = b.Apply(m);
  EXPECT_EQ(ev["text"], "abc");  // streamed whole, kept only to the cap
  EXPECT_EQ(e.stdout_text.size(), kiln::interpreter::kMaxStreamBytes);
  EXPECT_EQ(e.overflow, (json::array({{{"what", "stdout"}, {"droppedBytes", 2}}})));
  b.Apply(m);
  EXPECT_EQ(e.overflow[0]["droppedBytes"], 5);
}

TEST(InterpreterProtocolTest, CutsTextOnlyBetweenCharacters) {
  Execution e;
  ExecutionBuilder b(&e);
  KernelMessage m;
  m.kind = KernelMessage::kStdout;
  m.text = std::string(kiln::interpreter::kMaxStreamBytes - 1, 'x');
  b.Apply(m);
  m.text = "\xc3\xa9!";  // a two-byte character where one byte is left
  b.Apply(m);
  EXPECT_EQ(e.stdout_text.size(), kiln::interpreter::kMaxStreamBytes - 1);
  EXPECT_EQ(e.overflow[0]["droppedBytes"], 3);
  std::string huge =
      R"({"k":"error","name":"E","value":")" + std::string(100000, 'v') + R"(","traceback":"t"})";
  auto err = ParseKernelLine(huge);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->value.size(), kiln::interpreter::kMaxTracebackBytes);
}

TEST(InterpreterProtocolTest, FoldsResultsErrorAndStatus) {
  Execution e;
  ExecutionBuilder b(&e);
  auto result = ParseKernelLine(R"({"k":"result","main":true,"data":{"text/plain":"42"}})");
  json ev = b.Apply(*result);
  EXPECT_EQ(ev, (json{{"k", "result"},
                      {"main", true},
                      {"data", {{"text/plain", "42"}}},
                      {"refs", json::array()}}));
  auto error = ParseKernelLine(R"({"k":"error","name":"E","value":"v","traceback":"t"})");
  b.Apply(*error);
  b.Apply(*ParseKernelLine(R"({"k":"done","id":"x","n":9,"status":"error"})"));
  EXPECT_EQ(e.status, "error");
  EXPECT_EQ(e.execution_count, 9);
  EXPECT_EQ(e.results.size(), 1u);
  EXPECT_EQ(e.error, (json{{"name", "E"}, {"value", "v"}, {"traceback", "t"}}));
}

TEST(InterpreterProtocolTest, ResultsPastTheirCapAreCountedNotKept) {
  Execution e;
  ExecutionBuilder b(&e);
  KernelMessage m;
  m.kind = KernelMessage::kResult;
  m.data = json{{"text/plain", "big"}};
  m.bytes = kiln::interpreter::kMaxResultsBytes - 10;
  EXPECT_FALSE(b.Apply(m).is_null());
  m.bytes = 20;
  EXPECT_TRUE(b.Apply(m).is_null());
  EXPECT_EQ(e.results.size(), 1u);
  EXPECT_EQ(e.overflow[0]["what"], "results");
}

TEST(InterpreterProtocolTest, LanguagesAndContextIds) {
  EXPECT_TRUE(kiln::interpreter::ParseLanguage("python"));
  EXPECT_TRUE(kiln::interpreter::ParseLanguage("javascript"));
  EXPECT_FALSE(kiln::interpreter::ParseLanguage("Python"));
  EXPECT_TRUE(kiln::interpreter::ValidContextId("work-1"));
  for (const char* bad : {"", "-a", "A", "a_b", "a/b", "a.b"})
    EXPECT_FALSE(kiln::interpreter::ValidContextId(bad)) << bad;
  EXPECT_FALSE(kiln::interpreter::ValidContextId(std::string(64, 'a')));
}

}  // namespace
}  // namespace interpreter_protocol_test
