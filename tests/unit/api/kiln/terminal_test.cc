// Terminals apart from sockets: the `pty` and :resize fields
// (src/api/kiln/terminal.h), the WebSocket's text frames both ways, the CLI's
// target and events (src/cli/terminal_client.h), and the pty members of the
// agent ops (src/proto/ops.h).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "api/errors.h"
#include "api/kiln/terminal.h"
#include "api/validate.h"
#include "cli/terminal_client.h"
#include "cli/url.h"
#include "io/types.h"
#include "proto/ops.h"

namespace kiln {
namespace terminal_test {
namespace {

using nlohmann::json;

std::set<std::string> IssuePaths(api::FieldReader& f) {
  std::set<std::string> out;
  try {
    f.Finish();
  } catch (const api::ApiError& e) {
    for (const auto& i : e.status().details()["issues"])
      out.insert(i.at("path").get<std::string>());
  }
  return out;
}

TEST(TerminalFieldsTest, PtyTrueIs80x24AndFalseOrAbsentIsNone) {
  json body = {{"pty", true}};
  api::FieldReader f(body);
  auto size = api::v1::ReadPtyField(f);
  ASSERT_TRUE(size);
  EXPECT_EQ(*size, (io::TerminalSize{.cols = 80, .rows = 24}));
  EXPECT_TRUE(IssuePaths(f).empty());

  for (json off : {json{{"pty", false}}, json{{"pty", nullptr}}, json::object()}) {
    api::FieldReader g(off);
    EXPECT_FALSE(api::v1::ReadPtyField(g)) << off;
    EXPECT_TRUE(IssuePaths(g).empty()) << off;
  }
}

TEST(TerminalFieldsTest, PtyObjectTakesColsAndRowsInRange) {
  json body = {{"pty", {{"cols", 132}, {"rows", 43}}}};
  api::FieldReader f(body);
  EXPECT_EQ(*api::v1::ReadPtyField(f), (io::TerminalSize{.cols = 132, .rows = 43}));
  EXPECT_TRUE(IssuePaths(f).empty());

  json half = {{"pty", {{"rows", 10}}}};  // a missing member keeps its default
  api::FieldReader h(half);
  EXPECT_EQ(*api::v1::ReadPtyField(h), (io::TerminalSize{.cols = 80, .rows = 10}));
}

TEST(TerminalFieldsTest, BadPtyValuesNameTheField) {
  struct Case {
    json pty;
    std::string path;
  };
  for (const auto& c : {Case{{{"cols", 0}, {"rows", 24}}, "body.pty.cols"},
                        Case{{{"cols", 80}, {"rows", 1001}}, "body.pty.rows"},
                        Case{{{"cols", "80"}}, "body.pty.cols"},
                        Case{{{"cols", 80}, {"width", 3}}, "body.pty.width"},
                        Case{"big", "body.pty"}, Case{json::array({80, 24}), "body.pty"}}) {
    json body = {{"pty", c.pty}};
    api::FieldReader f(body);
    (void)api::v1::ReadPtyField(f);
    EXPECT_EQ(IssuePaths(f), std::set<std::string>{c.path}) << c.pty;
  }
}

TEST(TerminalFieldsTest, ResizeNeedsBothSizesInRange) {
  json ok = {{"cols", 1000}, {"rows", 1}};
  api::FieldReader f(ok);
  EXPECT_EQ(api::v1::ReadTerminalSize(f), (io::TerminalSize{.cols = 1000, .rows = 1}));
  EXPECT_TRUE(IssuePaths(f).empty());

  json missing = json::object();
  api::FieldReader g(missing);
  (void)api::v1::ReadTerminalSize(g);
  EXPECT_EQ(IssuePaths(g), (std::set<std::string>{"body.cols", "body.rows"}));

  json bad = {{"cols", 1001}, {"rows", -1}, {"depth", 2}};
  api::FieldReader h(bad);
  (void)api::v1::ReadTerminalSize(h);
  EXPECT_EQ(IssuePaths(h), (std::set<std::string>{"body.cols", "body.rows", "body.depth"}));
}

TEST(TerminalFramesTest, ResizeFrameIsTheOnlyKnownControl) {
  auto c = api::v1::ParseTerminalControl(R"({"type":"resize","cols":100,"rows":30})");
  ASSERT_TRUE(c.resize) << c.error;
  EXPECT_EQ(*c.resize, (io::TerminalSize{.cols = 100, .rows = 30}));

  for (std::string bad : {"not json", "[1]", R"({"cols":1})", R"({"type":"ping"})",
                          R"({"type":"resize","cols":0,"rows":5})", R"({"type":"resize","cols":5})",
                          R"({"type":"resize","cols":5,"rows":1.5})"}) {
    auto d = api::v1::ParseTerminalControl(bad);
    EXPECT_FALSE(d.resize) << bad;
    EXPECT_FALSE(d.error.empty()) << bad;
  }
}

TEST(TerminalFramesTest, ServerFramesAreWhatClientsRead) {
  EXPECT_EQ(json::parse(api::v1::TerminalReadyFrame("p3")),
            (json{{"type", "ready"}, {"processId", "p3"}}));
  io::ProcessInfo exited{.id = "p3", .state = io::ProcessState::kExited, .exit_code = 3};
  EXPECT_EQ(json::parse(api::v1::TerminalExitFrame(exited)),
            (json{{"type", "exit"}, {"exitCode", 3}, {"signal", nullptr}, {"state", "exited"}}));
  json err = json::parse(api::v1::TerminalErrorFrame(Status(Code::kNotFound, "no process 'p9'")));
  EXPECT_EQ(err, (json{{"type", "error"},
                       {"error", {{"code", "not_found"}, {"message", "no process 'p9'"}}}}));

  // The CLI reads them back.
  auto ready = cli::ParseTerminalEvent(api::v1::TerminalReadyFrame("p3"));
  EXPECT_EQ(ready.kind, cli::TerminalEvent::kReady);
  EXPECT_EQ(ready.process_id, "p3");
  EXPECT_EQ(cli::ParseTerminalEvent(api::v1::TerminalExitFrame(exited)).exit_status, 3);
  io::ProcessInfo hung{.id = "p4", .state = io::ProcessState::kKilled, .signal = "SIGHUP"};
  auto killed = cli::ParseTerminalEvent(api::v1::TerminalExitFrame(hung));
  EXPECT_EQ(killed.kind, cli::TerminalEvent::kExit);
  EXPECT_EQ(killed.exit_status, 129);
  auto e =
      cli::ParseTerminalEvent(api::v1::TerminalErrorFrame(Status(Code::kNotRunning, "stopped")));
  EXPECT_EQ(e.kind, cli::TerminalEvent::kError);
  EXPECT_EQ(e.error_code, "not_running");
  EXPECT_EQ(cli::ParseTerminalEvent("garbage").kind, cli::TerminalEvent::kOther);
}

TEST(TerminalFramesTest, WebSocketUpgradeHeaders) {
  EXPECT_TRUE(api::v1::IsWebSocketUpgrade("websocket", "Upgrade"));
  EXPECT_TRUE(api::v1::IsWebSocketUpgrade("WebSocket", "keep-alive, Upgrade"));
  EXPECT_FALSE(api::v1::IsWebSocketUpgrade("", "Upgrade"));
  EXPECT_FALSE(api::v1::IsWebSocketUpgrade("websocket", "keep-alive"));
  EXPECT_FALSE(api::v1::IsWebSocketUpgrade("h2c", "Upgrade"));
}

TEST(TerminalClientTest, CommandIsQuotedForTheShell) {
  EXPECT_EQ(cli::ShellQuote("ls"), "ls");
  EXPECT_EQ(cli::ShellQuote(""), "''");
  EXPECT_EQ(cli::ShellQuote("a b"), "'a b'");
  EXPECT_EQ(cli::ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(cli::ShellCommandLine({"echo", "$HOME", "x;y"}), "echo '$HOME' 'x;y'");
}

TEST(TerminalClientTest, TargetCarriesSizeCommandAndCwd) {
  cli::ApiUrl url = cli::ParseApiUrl("http://127.0.0.1:7070/base");
  EXPECT_EQ(cli::TerminalTarget(url, "sbx_1", 100, 30, {}, std::nullopt),
            "/base/v1/sandboxes/sbx_1/terminal?cols=100&rows=30");
  EXPECT_EQ(cli::TerminalTarget(url, "sbx_1", 80, 24, {"top", "-d", "1"}, "/tmp"),
            "/base/v1/sandboxes/sbx_1/terminal?cols=80&rows=24&command=top%20-d%201&cwd=%2Ftmp");
  EXPECT_EQ(json::parse(cli::ResizeFrame(120, 40)),
            (json{{"type", "resize"}, {"cols", 120}, {"rows", 40}}));
}

TEST(TerminalOpsTest, PtyMembersRoundTrip) {
  proto::ProcStartRequest start;
  start.command = "bash";
  start.pty = proto::TerminalSize{.cols = 90, .rows = 33};
  json wire = start;
  EXPECT_EQ(wire["pty"], (json{{"cols", 90}, {"rows", 33}}));
  EXPECT_EQ(wire.get<proto::ProcStartRequest>().pty, start.pty);
  proto::ProcStartRequest plain;
  plain.command = "true";
  EXPECT_FALSE(json(plain).contains("pty"));
  EXPECT_FALSE(json(plain).get<proto::ProcStartRequest>().pty);

  proto::ProcResizeRequest resize{.id = "p2", .size = {.cols = 10, .rows = 5}};
  json r = resize;
  EXPECT_EQ(r, (json{{"op", "proc.resize"}, {"id", "p2"}, {"cols", 10}, {"rows", 5}}));
  auto back = r.get<proto::ProcResizeRequest>();
  EXPECT_EQ(back.id, "p2");
  EXPECT_EQ(back.size, resize.size);

  proto::ProcessInfo info{.id = "p2", .state = "running", .pty = proto::TerminalSize{}};
  EXPECT_EQ(json(info)["pty"], (json{{"cols", 80}, {"rows", 24}}));
  EXPECT_EQ(json(info).get<proto::ProcessInfo>().pty, info.pty);
  info.pty.reset();
  EXPECT_TRUE(json(info)["pty"].is_null());
}

}  // namespace
}  // namespace terminal_test
}  // namespace kiln
