// The agent's vocabulary (src/proto/ops.h): names, and every struct to JSON
// and back.
#include "proto/ops.h"

#include <set>

#include <gtest/gtest.h>

namespace kiln::proto {
namespace ops_test {
namespace {

using nlohmann::json;

// Encodes, decodes, encodes again: the same JSON both times. Samples set
// every member away from its default, so a member one direction drops
// shows.
template <typename T>
json ExpectRoundTrip(const T& value) {
  json wire = value;
  T back = wire.get<T>();
  EXPECT_EQ(json(back), wire) << wire.dump();
  return wire;
}

template <typename R>
void ExpectRequest(const R& request) {
  json wire = ExpectRoundTrip(request);
  EXPECT_EQ(wire.at("op"), std::string(R::kOp));
}

FileEntry SampleEntry(const std::string& path) {
  return FileEntry{.name = "x",
                   .path = path,
                   .type = "symlink",
                   .size = 12,
                   .mode = "755",
                   .modified_ms = 1700000000123,
                   .uid = 1000,
                   .gid = 1001,
                   .symlink_target = "/t"};
}

ProcessInfo SampleProcess() {
  return ProcessInfo{.id = "p3",
                     .seq = 3,
                     .pid = 41,
                     .state = "killed",
                     .exit_code = std::nullopt,
                     .signal = "SIGKILL",
                     .command = "sleep 9",
                     .argv = {"/bin/bash", "-c", "sleep 9"},
                     .cwd = "/tmp",
                     .stdin_open = true,
                     .stdin_offset = 5,
                     .timeout_ms = 1000,
                     .started_ms = 17,
                     .ended_ms = 18,
                     .output_bytes = 99,
                     .first_offset = 7};
}

TEST(OpsTest, OpNamesAreUnique) {
  std::set<std::string_view> names(kAllOps.begin(), kAllOps.end());
  EXPECT_EQ(names.size(), kAllOps.size());
  for (auto name : kAllOps) EXPECT_FALSE(name.empty());
}

TEST(OpsTest, EveryRequestNamesAKnownOp) {
  std::set<std::string_view> names(kAllOps.begin(), kAllOps.end());
  for (auto op : {ExecRequest::kOp,       PingRequest::kOp,         OomRequest::kOp,
                  FileReadRequest::kOp,   FileWriteRequest::kOp,    FileListRequest::kOp,
                  FileStatRequest::kOp,   FileMkdirRequest::kOp,    FileRemoveRequest::kOp,
                  FileRenameRequest::kOp, ArchiveGetRequest::kOp,   ArchivePutRequest::kOp,
                  ProcStartRequest::kOp,  ProcListRequest::kOp,     ProcGetRequest::kOp,
                  ProcOutputRequest::kOp, ProcWriteRequest::kOp,    ProcSignalRequest::kOp,
                  ProcResizeRequest::kOp, EgressListenRequest::kOp, EgressAttachRequest::kOp,
                  ConfigureRequest::kOp,  PortDialRequest::kOp,     WatchStartRequest::kOp,
                  WatchReadRequest::kOp,  WatchStopRequest::kOp,    WatchListRequest::kOp,
                  WarmRequest::kOp})
    EXPECT_TRUE(names.erase(op)) << op;
  EXPECT_TRUE(names.empty()) << "an op without a request struct";
}

TEST(OpsTest, WatchStructsRoundTrip) {
  WatchStartRequest start{.id = "w1",
                          .path = "/workspace",
                          .recursive = true,
                          .events = {"create"},
                          .exclude = {"node_modules"},
                          .batch_ms = 50,
                          .timeout_ms = 0,
                          .max_watches = 10};
  json wire = ExpectRoundTrip(start);
  EXPECT_EQ(wire["op"], "watch.start");
  EXPECT_EQ(wire["maxWatches"], 10);
  auto back = wire.get<WatchStartRequest>();
  EXPECT_EQ(back.exclude, std::vector<std::string>{"node_modules"});
  EXPECT_EQ(back.timeout_ms, 0);
  WatchPage page;
  page.items.push_back(WatchItem{
      .seq = 3, .event = WatchEvent{.type = "rename", .path = "/b", .old_path = "/a", .count = 1}});
  page.items.push_back(
      WatchItem{.seq = 4, .notice = WatchNotice{.kind = "end", .reason = "timeout"}});
  page.next_cursor = 5;
  page.ended = true;
  page.watch.id = "w1";
  page.watch.state = "ended";
  json j = page;
  EXPECT_EQ(j["items"][0]["event"],
            (json{{"type", "rename"}, {"path", "/b"}, {"isDir", false}, {"oldPath", "/a"}}));
  EXPECT_EQ(j["items"][1]["notice"], (json{{"k", "end"}, {"reason", "timeout"}}));
  auto decoded = j.get<WatchPage>();
  EXPECT_EQ(decoded.items[0].event->old_path, "/a");
  EXPECT_EQ(decoded.items[1].notice->reason, "timeout");
  EXPECT_TRUE(decoded.ended);
  // A float where an integer belongs is refused, as everywhere on the channel.
  j["nextCursor"] = 1e30;
  EXPECT_THROW(j.get<WatchPage>(), json::exception);
}

TEST(OpsTest, ConfigureAndRootCommandsRoundTrip) {
  ConfigureRequest off;
  off.sudo = false;
  EXPECT_EQ(ExpectRoundTrip(off), (json{{"op", "agent.configure"}, {"sudo", false}}));
  ExecRequest exec;
  exec.argv = std::vector<std::string>{"id"};
  exec.as_root = true;
  EXPECT_EQ(ExpectRoundTrip(exec).value("asRoot", false), true);
  exec.as_root = false;
  EXPECT_FALSE(ExpectRoundTrip(exec).contains("asRoot"));  // the wire stays as it was
}

TEST(OpsTest, CommandRequestsRoundTrip) {
  ExecRequest exec;
  exec.argv = std::vector<std::string>{"ls", "-l"};
  exec.command = "ls -l";
  exec.env = {{"A", "1"}, {"B", "two"}};
  exec.cwd = "/tmp";
  exec.timeout_ms = 5;
  exec.stdin_data = true;
  exec.capture_limit = 65536;
  exec.kill_past_limit = true;
  json wire = ExpectRoundTrip(exec);
  EXPECT_EQ(wire, (json{{"op", "exec"},
                        {"argv", {"ls", "-l"}},
                        {"command", "ls -l"},
                        {"env", {{"A", "1"}, {"B", "two"}}},
                        {"cwd", "/tmp"},
                        {"timeoutMs", 5},
                        {"stdin", true},
                        {"captureLimit", 65536},
                        {"killPastLimit", true}}));

  ProcStartRequest start;
  start.command = "server";
  start.env = {{"PORT", "80"}};
  start.stdin_pipe = true;
  start.timeout_ms = 9;
  wire = ExpectRoundTrip(start);
  EXPECT_EQ(wire.at("stdin"), "pipe");
  EXPECT_FALSE(wire.contains("argv"));
  EXPECT_FALSE(wire.contains("cwd"));
  start.stdin_pipe = false;
  EXPECT_EQ(json(start).at("stdin"), "none");
}

TEST(OpsTest, CommandRequestDefaults) {
  auto exec = json{{"op", "exec"}, {"command", "true"}}.get<ExecRequest>();
  EXPECT_EQ(exec.timeout_ms, 60000);
  EXPECT_FALSE(exec.stdin_data);
  EXPECT_EQ(exec.capture_limit, 0u);
  EXPECT_FALSE(exec.argv.has_value());
  EXPECT_FALSE(exec.cwd.has_value());
  auto start = json{{"op", "proc.start"}, {"argv", {"x"}}}.get<ProcStartRequest>();
  EXPECT_FALSE(start.stdin_pipe);
  EXPECT_EQ(start.timeout_ms, 0);
}

TEST(OpsTest, ExecAnswersRoundTrip) {
  EXPECT_EQ(ExpectRoundTrip(ExecStarted{.pid = 7}), (json{{"type", "start"}, {"pid", 7}}));
  ExecExit exit{.exit_code = 3,
                .signal = std::nullopt,
                .timed_out = true,
                .duration_ms = 12,
                .stdout_bytes = 1,
                .stderr_bytes = 2,
                .stdin_bytes = 3,
                .stdout_truncated = true,
                .stderr_truncated = true,
                .start_error = "kiln: x: command not found\n"};
  ExpectRoundTrip(exit);
  exit.exit_code.reset();
  exit.signal = "SIGKILL";
  exit.start_error.reset();
  json wire = ExpectRoundTrip(exit);
  EXPECT_TRUE(wire.at("exitCode").is_null());
  EXPECT_FALSE(wire.contains("startError"));
}

TEST(OpsTest, LivenessRoundTrips) {
  ExpectRequest(PingRequest{});
  EXPECT_EQ(ExpectRoundTrip(Pong{.ok = true, .time_ms = 1234}),
            (json{{"ok", true}, {"time", 1234}}));
  ExpectRequest(OomRequest{});
  EXPECT_EQ(ExpectRoundTrip(OomKilled{.killed = 42}), (json{{"killed", 42}}));
}

TEST(OpsTest, FileOpsRoundTrip) {
  ExpectRoundTrip(SampleEntry("/a/x"));
  ExpectRequest(FileReadRequest{.path = "/a"});
  ExpectRoundTrip(FileReadStart{.size = 5, .mode = "600"});
  ExpectRoundTrip(FileReadDone{.size = 5});
  ExpectRequest(FileWriteRequest{.path = "/a", .mode = 0755});
  ExpectRoundTrip(FileWritten{.path = "/a", .size = 5});
  ExpectRequest(FileListRequest{.path = "/a", .depth = 3});
  ExpectRoundTrip(FileList{.data = {SampleEntry("/a/x"), SampleEntry("/a/y")}});
  ExpectRequest(FileStatRequest{.path = "/a"});
  json wire = ExpectRoundTrip(FileStat{.exists = true, .entry = SampleEntry("/a")});
  EXPECT_EQ(wire.at("exists"), true);
  EXPECT_EQ(wire.at("symlinkTarget"), "/t");
  EXPECT_EQ(ExpectRoundTrip(FileStat{.exists = false, .entry = {.path = "/gone"}}),
            (json{{"exists", false}, {"path", "/gone"}}));
  ExpectRequest(FileMkdirRequest{.path = "/a", .parents = false});
  ExpectRequest(FileRemoveRequest{.path = "/a", .recursive = true});
  ExpectRoundTrip(FileRemoved{.removed = true});
  ExpectRequest(FileRenameRequest{.from = "/a", .to = "/b", .overwrite = true});
  ExpectRequest(ArchiveGetRequest{.path = "/a", .gzip = true});
  ExpectRequest(ArchivePutRequest{.path = "/a", .gzip = true});
}

TEST(OpsTest, FileRequestDefaults) {
  const json path_only = {{"path", "/a"}};
  EXPECT_EQ(path_only.get<FileListRequest>().depth, 1);
  EXPECT_TRUE(path_only.get<FileMkdirRequest>().parents);
  EXPECT_FALSE(path_only.get<FileRemoveRequest>().recursive);
  EXPECT_EQ(path_only.get<FileWriteRequest>().mode, 0644);
  EXPECT_FALSE(path_only.get<ArchiveGetRequest>().gzip);
  auto entry = json(SampleEntry("/a"));
  entry.erase("symlinkTarget");
  EXPECT_FALSE(entry.get<FileEntry>().symlink_target.has_value());
}

TEST(OpsTest, ProcessOpsRoundTrip) {
  ExpectRoundTrip(SampleProcess());
  ProcessInfo running = SampleProcess();
  running.state = "running";
  running.exit_code.reset();
  running.signal.reset();
  running.ended_ms.reset();
  json wire = ExpectRoundTrip(running);
  EXPECT_TRUE(wire.at("endedMs").is_null());
  EXPECT_TRUE(wire.at("signal").is_null());
  ExpectRequest(ProcListRequest{});
  ExpectRoundTrip(ProcessList{.data = {SampleProcess(), running}});
  ExpectRequest(ProcGetRequest{.id = "p1"});
  ExpectRequest(ProcOutputRequest{.id = "p1", .cursor = 10, .wait_ms = 20, .max_bytes = 30});
  EXPECT_FALSE(json(ProcOutputRequest{.id = "p1"}).contains("maxBytes"));
  // Bytes travel as base64; any byte value survives.
  std::string bytes("a\0\xff\n", 4);
  wire = ExpectRoundTrip(OutputChunk{.offset = 4, .stream = "stderr", .data = bytes});
  EXPECT_EQ(wire.at("base64"), "YQD/Cg==");
  EXPECT_EQ(wire.get<OutputChunk>().data, bytes);
  ExpectRoundTrip(OutputPage{.chunks = {{.offset = 0, .stream = "stdout", .data = "hi"}},
                             .next_cursor = 2,
                             .first_offset = 1,
                             .dropped_bytes = 3,
                             .complete = true,
                             .process = SampleProcess()});
  ExpectRequest(ProcWriteRequest{.id = "p1", .base64 = "aGk=", .eof = true});
  ExpectRoundTrip(ProcWritten{.offset = 8});
  ExpectRequest(ProcSignalRequest{.id = "p1", .signal = "SIGINT"});
}

TEST(OpsTest, EgressOpsRoundTrip) {
  ExpectRequest(EgressListenRequest{});
  EXPECT_EQ(ExpectRoundTrip(EgressConn{.conn = 12}), (json{{"conn", 12}}));
  ExpectRequest(EgressAttachRequest{.conn = 12});
  ExpectRoundTrip(EgressClosed{.closed = "closed"});
}

TEST(OpsTest, MissingOrMistypedRequiredFieldsFail) {
  EXPECT_THROW(json({{"op", "file.stat"}}).get<FileStatRequest>(), json::exception);
  EXPECT_THROW(json({{"path", 5}}).get<FileReadRequest>(), json::exception);
  EXPECT_THROW(json({{"from", "/a"}}).get<FileRenameRequest>(), json::exception);
  EXPECT_THROW(json({{"op", "proc.get"}}).get<ProcGetRequest>(), json::exception);
  EXPECT_THROW(json({{"id", "p1"}}).get<ProcSignalRequest>(), json::exception);
  EXPECT_THROW(json({{"op", "egress.attach"}}).get<EgressAttachRequest>(), json::exception);
  EXPECT_THROW(json({{"argv", "ls"}}).get<ExecRequest>(), json::exception);
  EXPECT_THROW(json::array().get<PingRequest>(), json::exception);
  EXPECT_THROW(json({{"ok", true}}).get<Pong>(), json::exception);
  json process = SampleProcess();
  process.erase("state");
  EXPECT_THROW(process.get<ProcessInfo>(), json::exception);
  EXPECT_THROW(json({{"exists", true}, {"path", "/a"}}).get<FileStat>(), json::exception);
}

TEST(OpsTest, ErrorAnswer) {
  AgentError e{.code = "file_not_found", .message = "/a: No such file", .path = "/a"};
  json wire = ExpectRoundTrip(e);
  EXPECT_EQ(
      wire,
      (json{{"error",
             {{"code", "file_not_found"}, {"message", "/a: No such file"}, {"path", "/a"}}}}));
  EXPECT_TRUE(IsError(wire));
  EXPECT_FALSE(IsError(json{{"size", 1}}));
  EXPECT_FALSE(IsError(json("error")));
  e.path.reset();
  EXPECT_FALSE(json(e)["error"].contains("path"));
}

TEST(OpsTest, AnyErrorShapeDecodes) {
  // The bare inner object, as well as the answer.
  auto bare = json{{"code", "busy"}, {"message", "m"}}.get<AgentError>();
  EXPECT_EQ(bare.code, "busy");
  EXPECT_EQ(bare.message, "m");
  for (const json& odd : {json{{"error", "boom"}}, json("text"), json{{"error", json::object()}},
                          json{{"error", {{"code", 5}, {"path", 7}}}}}) {
    auto e = odd.get<AgentError>();
    EXPECT_EQ(e.code, "internal_error") << odd.dump();
    EXPECT_EQ(e.message, "the sandbox failed the request");
    EXPECT_FALSE(e.path.has_value());
  }
}

}  // namespace
}  // namespace ops_test
}  // namespace kiln::proto
