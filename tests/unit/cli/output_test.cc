// kiln CLI: the pieces between the wire and the terminal — base64, NDJSON
// lines, exit statuses, error bodies, tables, and the exec stream printer.
#include <fcntl.h>
#include <unistd.h>

#include <csignal>

#include <gtest/gtest.h>

#include "cli/errors.h"
#include "cli/exec_stream.h"
#include "cli/exit_status.h"
#include "cli/ndjson.h"
#include "cli/output.h"

namespace kiln::cli {
namespace cli_output_test {
namespace {

using json = nlohmann::json;

TEST(CliLines, SplitsAcrossFeeds) {
  LineSplitter s;
  EXPECT_TRUE(s.Feed("{\"a\":").empty());
  EXPECT_EQ(s.Feed("1}\n{\"b\""), std::vector<std::string>{"{\"a\":1}"});
  EXPECT_EQ(s.Feed(":2}\r\n\n{\"c\":3}\n"),
            (std::vector<std::string>{"{\"b\":2}", "", "{\"c\":3}"}));
  EXPECT_FALSE(s.Finish());
  s.Feed("tail");
  EXPECT_EQ(s.Finish(), "tail");
  EXPECT_FALSE(s.Finish());
}

TEST(CliExitStatus, SignalNumbers) {
  EXPECT_EQ(SignalNumber("SIGKILL"), 9);
  EXPECT_EQ(SignalNumber("KILL"), 9);
  EXPECT_EQ(SignalNumber("SIGTERM"), 15);
  EXPECT_EQ(SignalNumber("SIGSEGV"), 11);
  EXPECT_EQ(SignalNumber("6"), 6);
  EXPECT_EQ(SignalNumber("SIGNOPE"), 0);
  EXPECT_EQ(SignalNumber(""), 0);
}

TEST(CliExitStatus, FromResults) {
  EXPECT_EQ(ExitCodeFor(json::parse(R"({"exitCode":0,"signal":null,"timedOut":false})")), 0);
  EXPECT_EQ(ExitCodeFor(json::parse(R"({"exitCode":42,"signal":null,"timedOut":false})")), 42);
  // Timed out wins over the SIGKILL that ended it.
  EXPECT_EQ(
      ExitCodeFor(json::parse(
          R"({"type":"exit","exitCode":null,"signal":"SIGKILL","state":"timed_out","timedOut":true})")),
      124);
  EXPECT_EQ(ExitCodeFor(json::parse(R"({"exitCode":null,"signal":"SIGSEGV","timedOut":false})")),
            139);
  EXPECT_EQ(ExitCodeFor(json::parse(R"({"exitCode":null,"signal":null,"state":"killed"})")), 137);
  EXPECT_EQ(ExitCodeFor(json::parse(R"({"exitCode":null,"signal":null})")), 1);
  EXPECT_EQ(ExitCodeFor(json()), 1);
}

TEST(CliErrors, DocumentedErrorBody) {
  ApiError e = MakeApiError(400, R"({"error":{"code":"invalid_request","status":400,
      "message":"body.memoryMiB: too small","requestId":"req_1",
      "details":{"issues":[{"path":"body.memoryMiB","message":"too small"}]}}})");
  EXPECT_EQ(e.status, 400u);
  EXPECT_EQ(e.code, "invalid_request");
  EXPECT_STREQ(e.what(), "body.memoryMiB: too small");
  EXPECT_EQ(e.body["error"]["requestId"], "req_1");
}

TEST(CliErrors, OtherBodies) {
  ApiError e = MakeApiError(502, "Bad Gateway\n");
  EXPECT_EQ(e.code, "http_502");
  EXPECT_STREQ(e.what(), "the daemon answered HTTP 502: Bad Gateway");
  EXPECT_EQ(e.body["error"]["code"], "http_502");
  ApiError empty = MakeApiError(500, "");
  EXPECT_STREQ(empty.what(), "the daemon answered HTTP 500");
  ApiError partial = MakeApiError(409, R"({"error":{"message":"busy"}})");
  EXPECT_EQ(partial.code, "http_409");
  EXPECT_STREQ(partial.what(), "busy");
}

TEST(CliOutput, Table) {
  EXPECT_EQ(FormatTable({"ID", "STATE"}, {{"sbx_1", "running"}, {"sbx_22", "stopped"}}),
            "ID      STATE\n"
            "sbx_1   running\n"
            "sbx_22  stopped\n");
  // Widths count characters, not bytes.
  EXPECT_EQ(FormatTable({"A", "B"}, {{"\xc3\xa9", "x"}}), "A  B\n\xc3\xa9  x\n");
  EXPECT_EQ(FormatTable({"ID", "STATE"}, {}), "ID  STATE\n");
}

TEST(CliOutput, KeyValues) {
  EXPECT_EQ(FormatKeyValues({{"id", "sbx_1"}, {"memoryMiB", "2048"}}),
            "id:        sbx_1\n"
            "memoryMiB: 2048\n");
}

TEST(CliOutput, DisplayValue) {
  EXPECT_EQ(DisplayValue(json()), "-");
  EXPECT_EQ(DisplayValue(""), "-");
  EXPECT_EQ(DisplayValue("running"), "running");
  EXPECT_EQ(DisplayValue(2048), "2048");
  EXPECT_EQ(DisplayValue(true), "true");
  EXPECT_EQ(DisplayValue(json::object()), "-");
  EXPECT_EQ(DisplayValue(json{{"a", "1"}, {"b", 2}}), "a=1, b=2");
  EXPECT_EQ(DisplayValue(json::array({"A", "B"})), "A, B");
}

// Reads what the printer wrote to a pipe.
class Pipe {
 public:
  Pipe() {
    EXPECT_EQ(::pipe(fds_), 0);
    ::fcntl(fds_[0], F_SETFL, O_NONBLOCK);
  }
  ~Pipe() {
    ::close(fds_[0]);
    if (fds_[1] >= 0) ::close(fds_[1]);
  }
  int write_fd() const { return fds_[1]; }
  std::string Drain() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds_[0], buf, sizeof buf)) > 0;) out.append(buf, n);
    return out;
  }

 private:
  int fds_[2];
};

TEST(CliExecStream, RoutesOutputAndReportsExit) {
  Pipe out, err;
  ExecStreamPrinter p(out.write_fd(), err.write_fd());
  p.OnEvent(json::parse(R"({"type":"start","processId":"p7"})"));
  p.OnEvent(json::parse(R"({"type":"stdout","data":"aGkK","offset":0,"base64":true})"));
  p.OnEvent(json::parse(R"({"type":"stderr","data":"oops\n","offset":3})"));  // utf8 form
  p.OnEvent(json::parse(R"({"type":"stdout","data":"AP8=","offset":8,"base64":true})"));
  p.OnEvent(json::parse(R"({"type":"future-event","x":1})"));  // ignored
  p.OnEvent(json::parse(
      R"({"type":"exit","exitCode":3,"signal":null,"state":"exited","timedOut":false,"durationMs":5})"));
  EXPECT_EQ(p.process_id(), "p7");
  EXPECT_EQ(out.Drain(), std::string("hi\n\x00\xff", 5));
  EXPECT_EQ(err.Drain(), "oops\n");
  EXPECT_EQ(p.Finish(), 3);
}

TEST(CliExecStream, ErrorEventBecomesApiError) {
  Pipe out, err;
  ExecStreamPrinter p(out.write_fd(), err.write_fd());
  p.OnEvent(json::parse(R"({"type":"error","error":{"code":"not_running","message":"gone"}})"));
  try {
    p.Finish();
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code, "not_running");
    EXPECT_STREQ(e.what(), "gone");
  }
}

TEST(CliExecStream, EndWithoutExitIsAnError) {
  Pipe out, err;
  ExecStreamPrinter p(out.write_fd(), err.write_fd());
  p.OnEvent(json::parse(R"({"type":"start","processId":"p1"})"));
  EXPECT_THROW(p.Finish(), ClientError);
}

TEST(CliExecStream, GoneReaderEndsTheExecLikeSigpipe) {
  std::signal(SIGPIPE, SIG_IGN);  // as InstallInterruptHandlers() does
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);  // `kiln … | head` after head exited
  ExecStreamPrinter p(fds[1], fds[1]);
  try {
    p.OnEvent(json::parse(R"({"type":"stdout","data":"more\n"})"));
    FAIL();
  } catch (const Interrupted& e) {
    EXPECT_EQ(e.signal, SIGPIPE);
  }
  ::close(fds[1]);
}

TEST(CliExecStream, BadBase64IsRefused) {
  Pipe out, err;
  ExecStreamPrinter p(out.write_fd(), err.write_fd());
  EXPECT_THROW(p.OnEvent(json::parse(R"({"type":"stdout","data":"***","base64":true})")),
               ClientError);
}

}  // namespace
}  // namespace cli_output_test
}  // namespace kiln::cli
