// kiln CLI: snapshot, fork, extend, usage, network and create against a
// canned daemon -- requests sent, retries, output.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>

#include <gtest/gtest.h>

#include "cli/cli.h"
#include "cli/errors.h"
#include "cli/requests.h"
#include "cli/url.h"
#include "fakes/fake_daemon.h"
#include "unit/cli/cli_test_util.h"

namespace kiln::cli {
namespace cli_commands_daemon_test {
namespace {

using json = nlohmann::json;
using Args = std::vector<std::string>;
using namespace std::chrono_literals;

using testutil::CliRun;
using testutil::CommandLineError;
using testutil::RunCaptured;
using testutil::VerbArgs;

// --- the commands against a canned daemon -------------------------------------

using testutil::CannedServer;

// Points kiln at a server for one test; restores the environment afterwards.
class DaemonEnv {
 public:
  explicit DaemonEnv(const std::string& url) {
    for (const char* name : {"KILN_API_URL", "KILN_API_KEY"}) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    }
    ::setenv("KILN_API_URL", url.c_str(), 1);
    ::setenv("KILN_API_KEY", "kiln_test", 1);
  }
  ~DaemonEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// The value of a request header ("" when absent).
std::string Header(const std::string& request, const std::string& name) {
  auto at = request.find("\r\n" + name + ": ");
  if (at == std::string::npos) return "";
  at += name.size() + 4;
  return request.substr(at, request.find("\r\n", at) - at);
}
std::string BodyOf(const std::string& request) {
  return request.substr(request.find("\r\n\r\n") + 4);
}

const std::string kSandbox =
    R"({"id": "sbx_new", "kind": "sandbox", "state": "running", "vcpu": 2, "memoryMiB": 2048,
        "createdAt": "2026-11-29T10:00:00.000Z", "expiresAt": "2026-11-29T10:30:00.000Z"})";
const std::string kSnapshot =
    R"({"id": "snp_1", "kind": "snapshot", "name": "base", "state": "ready",
        "sourceSandboxId": "sbx_1", "shape": {"vcpu": 2, "memoryMiB": 2048, "diskMiB": 4096},
        "retentionDays": 7, "sizeBytes": 1610612736, "captureMs": 812,
        "createdAt": "2026-11-29T10:00:00.000Z", "expiresAt": "2026-12-06T10:00:00.000Z",
        "pool": {"size": 0, "ready": 0, "memoryBytes": 0}})";

TEST(CliCommands, CreateWaitsForCapacityAndIsReplayedNotRepeated) {
  const std::string in_progress =
      R"({"error": {"code": "request_in_progress", "status": 409, "message": "busy"}})";
  CannedServer server({{0, ""}, {409, in_progress}, {200, kSandbox}});
  DaemonEnv env(server.url());
  CliRun r = RunCaptured({"sandbox", "create", "--wait", "30", "--vcpu", "2"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "sbx_new\n");
  EXPECT_EQ(r.err, "");  // not a terminal: no progress line

  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  const std::string key = Header(reqs[0], "Idempotency-Key");
  EXPECT_EQ(key.size(), 36u) << reqs[0];
  for (const auto& req : reqs) {
    EXPECT_TRUE(req.starts_with("POST /v1/sandboxes HTTP/1.1\r\n")) << req;
    EXPECT_EQ(Header(req, "Prefer"), "wait=30");
    EXPECT_EQ(Header(req, "Idempotency-Key"), key);  // the same key each time
    EXPECT_EQ(BodyOf(req), R"({"vcpu":2})");
  }

  // A second create is a new request: a new key, and the default wait.
  CannedServer second({{200, kSandbox}});
  DaemonEnv env2(second.url());
  r = RunCaptured({"sandbox", "create", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["id"], "sbx_new");
  ASSERT_EQ(second.requests().size(), 1u);
  EXPECT_EQ(Header(second.requests()[0], "Prefer"), "wait=120");
  EXPECT_NE(Header(second.requests()[0], "Idempotency-Key"), key);
}

TEST(CliCommands, SnapshotLsGetRm) {
  const std::string deleted =
      R"({"id": "snp_1", "state": "deleted", "deletedAt": "2026-11-29T11:00:00.000Z"})";
  CannedServer server({{200, kSnapshot},
                       {200, R"({"data": [)" + kSnapshot + R"(], "nextCursor": null})"},
                       {200, kSnapshot},
                       {200, deleted},
                       {200, kSnapshot},
                       {404, R"({"error": {"code": "snapshot_not_found", "status": 404,
                                           "message": "snapshot snp_x not found"}})"}});
  DaemonEnv env(server.url());

  CliRun r =
      RunCaptured({"sandbox", "snapshot", "sbx_1", "--name", "base", "--retention-days", "7"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "snp_1\n");
  EXPECT_EQ(r.err, "");

  r = RunCaptured({"snapshot", "ls"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "ID     NAME  SANDBOX  SIZE    CREATED                   EXPIRES\n"
            "snp_1  base  sbx_1    1.5GiB  2026-11-29T10:00:00.000Z  2026-12-06T10:00:00.000Z\n");

  r = RunCaptured({"snapshot", "get", "snp_1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("id:              snp_1\nname:            base\n")) << r.out;
  EXPECT_NE(r.out.find("shape:           diskMiB=4096, memoryMiB=2048, vcpu=2\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("kind"), std::string::npos);

  r = RunCaptured({"snapshot", "rm", "snp_1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "snp_1\n");

  r = RunCaptured({"snapshot", "get", "snp_1", "--json"});
  EXPECT_EQ(json::parse(r.out), json::parse(kSnapshot));

  r = RunCaptured({"snapshot", "get", "snp_x"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "kiln: snapshot_not_found: snapshot snp_x not found\n");

  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 6u);
  EXPECT_TRUE(reqs[0].starts_with("POST /v1/sandboxes/sbx_1:snapshot HTTP/1.1\r\n")) << reqs[0];
  EXPECT_EQ(BodyOf(reqs[0]), R"({"name":"base","retentionDays":7})");
  EXPECT_EQ(Header(reqs[0], "Idempotency-Key").size(), 36u);
  EXPECT_TRUE(reqs[1].starts_with("GET /v1/snapshots HTTP/1.1\r\n")) << reqs[1];
  EXPECT_TRUE(reqs[2].starts_with("GET /v1/snapshots/snp_1 HTTP/1.1\r\n")) << reqs[2];
  EXPECT_TRUE(reqs[3].starts_with("POST /v1/snapshots/snp_1:delete HTTP/1.1\r\n")) << reqs[3];
  EXPECT_EQ(BodyOf(reqs[3]), "{}");
}

TEST(CliCommands, Fork) {
  std::string copy2 = kSandbox;
  copy2.replace(copy2.find("sbx_new"), 7, "sbx_two");
  const std::string answer = R"({"sandboxes": [)" + kSandbox + "," + copy2 + "]}";
  CannedServer server({{200, answer}, {200, answer}});
  DaemonEnv env(server.url());

  CliRun r = RunCaptured({"sandbox", "fork", "sbx_1", "--count", "2", "--keep-snapshot"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "ID       STATE    VCPU  MEMORY   CREATED\n"
            "sbx_new  running  2     2048MiB  2026-11-29T10:00:00.000Z\n"
            "sbx_two  running  2     2048MiB  2026-11-29T10:00:00.000Z\n");
  EXPECT_EQ(r.err, "");

  r = RunCaptured({"sandbox", "fork", "sbx_1", "--count", "2", "--json", "--wait", "10"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), json::parse(answer));

  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_TRUE(reqs[0].starts_with("POST /v1/sandboxes/sbx_1:fork HTTP/1.1\r\n")) << reqs[0];
  EXPECT_EQ(BodyOf(reqs[0]), R"({"count":2,"keepSnapshot":true})");
  EXPECT_EQ(Header(reqs[0], "Prefer"), "wait=120");
  EXPECT_EQ(Header(reqs[1], "Prefer"), "wait=10");
  EXPECT_EQ(Header(reqs[0], "Idempotency-Key").size(), 36u);
  EXPECT_NE(Header(reqs[0], "Idempotency-Key"), Header(reqs[1], "Idempotency-Key"));
}

TEST(CliCommands, ForkThatPartlyFailedNamesTheCopiesThatStarted) {
  // The message holds ")", hence the raw string's delimiter.
  const std::string error = R"j({"error": {"code": "no_capacity", "status": 409,
      "message": "host full (1 of 2 copies started)",
      "details": {"started": [)j" +
                            kSandbox + R"j(], "requested": 2}}})j";
  CannedServer server({{409, error}, {409, error}});
  DaemonEnv env(server.url());
  CliRun r = RunCaptured({"sandbox", "fork", "sbx_1", "--count", "2"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("kiln: warning: these copies did start and keep running: sbx_new\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("kiln: no_capacity: host full"), std::string::npos) << r.err;

  r = RunCaptured({"sandbox", "fork", "sbx_1", "--count", "2", "--json"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(json::parse(r.err)["error"]["details"]["started"][0]["id"], "sbx_new");
}

TEST(CliCommands, Extend) {
  CannedServer server({{200, kSandbox}, {200, kSandbox}});
  DaemonEnv env(server.url());
  CliRun r = RunCaptured({"sandbox", "extend", "sbx_new", "--seconds", "600"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "id:        sbx_new\nexpiresAt: 2026-11-29T10:30:00.000Z\n");
  r = RunCaptured({"sandbox", "extend", "sbx_new", "--seconds", "600", "--json"});
  EXPECT_EQ(json::parse(r.out)["expiresAt"], "2026-11-29T10:30:00.000Z");

  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_TRUE(reqs[0].starts_with("POST /v1/sandboxes/sbx_new:extend HTTP/1.1\r\n")) << reqs[0];
  EXPECT_EQ(BodyOf(reqs[0]), R"({"seconds":600})");
}

TEST(CliCommands, Usage) {
  const std::string grouped = R"({
      "from": "2026-11-22T10:00:00.000Z", "to": "2026-11-29T10:00:00.000Z",
      "groupBy": "label:team", "unit": "micros", "prices": {},
      "data": [
        {"group": "", "cpuSeconds": 12.26, "gibHours": 0.5, "gbMonths": 0.000123,
         "costMicros": 40, "sandboxes": 1},
        {"group": "ml", "cpuSeconds": 100, "gibHours": 2.0, "gbMonths": 0.001,
         "costMicros": 900, "sandboxes": 3}],
      "total": {"cpuSeconds": 112.26, "gibHours": 2.5, "gbMonths": 0.001123,
                "costMicros": 940}})";
  const std::string ungrouped = R"({"groupBy": null, "unit": "micros",
      "data": [{"group": "total", "cpuSeconds": 1, "gibHours": 0, "gbMonths": 0,
                "costMicros": 7, "sandboxes": 2}],
      "total": {"cpuSeconds": 1, "gibHours": 0, "gbMonths": 0, "costMicros": 7}})";
  CannedServer server({{200, grouped}, {200, ungrouped}, {200, ungrouped}});
  DaemonEnv env(server.url());

  CliRun r = RunCaptured({"usage", "--group-by", "label:team"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "GROUP  SANDBOXES  CPU_SECONDS  GIB_HOURS  GB_MONTHS  COST_MICROS\n"
            "-      1          12.3         0.500      0.000123   40\n"
            "ml     3          100.0        2.000      0.001000   900\n"
            "TOTAL  4          112.3        2.500      0.001123   940\n");

  r = RunCaptured({"usage"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "GROUP  SANDBOXES  CPU_SECONDS  GIB_HOURS  GB_MONTHS  COST_MICROS\n"
            "total  2          1.0          0.000      0.000000   7\n");

  r = RunCaptured({"usage", "--json", "--from", "2026-11-01T00:00:00Z"});
  EXPECT_EQ(json::parse(r.out), json::parse(ungrouped));

  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_TRUE(reqs[0].starts_with("GET /v1/usage?groupBy=label%3Ateam HTTP/1.1\r\n")) << reqs[0];
  EXPECT_TRUE(reqs[1].starts_with("GET /v1/usage HTTP/1.1\r\n")) << reqs[1];
  EXPECT_TRUE(reqs[2].starts_with("GET /v1/usage?from=2026-11-01T00%3A00%3A00Z HTTP/1.1\r\n"))
      << reqs[2];
}

const std::string kPolicy =
    R"({"sandboxId": "sbx_1", "internet": true, "allow": ["pkgs.test", "*.pkgs.test"],
        "deny": [], "version": 2, "enforced": true, "enforcedVersion": 2,
        "updatedAt": "2026-11-29T10:00:00.000Z"})";

TEST(CliCommands, NetworkShowAndSet) {
  const std::string off =
      R"({"sandboxId": "sbx_1", "internet": false, "allow": [], "deny": ["x.test"],
          "version": 3, "enforced": true, "enforcedVersion": 3,
          "updatedAt": "2026-11-29T10:05:00.000Z"})";
  const std::string not_running =
      R"({"error": {"code": "not_running", "status": 409, "message": "sandbox sbx_1 is stopped"}})";
  CannedServer server(
      {{200, kPolicy}, {200, kPolicy}, {200, off}, {200, kPolicy}, {409, not_running}});
  DaemonEnv env(server.url());

  CliRun r = RunCaptured({"sandbox", "network", "sbx_1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "internet:  on\n"
            "allow:     pkgs.test, *.pkgs.test\n"
            "deny:      -\n"
            "version:   2\n"
            "updatedAt: 2026-11-29T10:00:00.000Z\n");
  EXPECT_EQ(r.err, "");

  r = RunCaptured({"sandbox", "network", "sbx_1", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), json::parse(kPolicy));

  r = RunCaptured({"sandbox", "network", "sbx_1", "--internet", "off", "--deny", "x.test"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "internet:  off\n"
            "allow:     -\n"
            "deny:      x.test\n"
            "version:   3\n"
            "updatedAt: 2026-11-29T10:05:00.000Z\n");

  r = RunCaptured({"sandbox", "network", "sbx_1", "--json", "--allow", "pkgs.test,*.pkgs.test"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), json::parse(kPolicy));

  r = RunCaptured({"sandbox", "network", "sbx_1", "--internet", "on"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "kiln: not_running: sandbox sbx_1 is stopped\n");

  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 5u);
  EXPECT_TRUE(reqs[0].starts_with("GET /v1/sandboxes/sbx_1/network HTTP/1.1\r\n")) << reqs[0];
  EXPECT_TRUE(reqs[1].starts_with("GET /v1/sandboxes/sbx_1/network HTTP/1.1\r\n")) << reqs[1];
  EXPECT_TRUE(reqs[2].starts_with("PUT /v1/sandboxes/sbx_1/network HTTP/1.1\r\n")) << reqs[2];
  EXPECT_EQ(json::parse(BodyOf(reqs[2])),
            json::parse(R"({"internet": false, "allow": [], "deny": ["x.test"]})"));
  EXPECT_TRUE(reqs[3].starts_with("PUT /v1/sandboxes/sbx_1/network HTTP/1.1\r\n")) << reqs[3];
  EXPECT_EQ(
      json::parse(BodyOf(reqs[3])),
      json::parse(R"({"internet": true, "allow": ["pkgs.test", "*.pkgs.test"], "deny": []})"));
  EXPECT_EQ(json::parse(BodyOf(reqs[4])),
            json::parse(R"({"internet": true, "allow": [], "deny": []})"));
}

TEST(CliCommands, NetworkShowsAPolicyNotYetInForce) {
  json pending = json::parse(kPolicy);
  pending["enforcedVersion"] = 1;
  CannedServer server({{200, pending.dump()}});
  DaemonEnv env(server.url());
  CliRun r = RunCaptured({"sandbox", "network", "sbx_1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(
      r.out.ends_with("version:         2\n"
                      "updatedAt:       2026-11-29T10:00:00.000Z\n"
                      "enforcedVersion: 1\n"))
      << r.out;
}

TEST(CliCommands, NetworkLogReadsEveryPage) {
  const std::string first = R"({"data": [
      {"id": "1", "time": "2026-11-29T10:00:00.000Z", "method": "CONNECT", "host": "pkgs.test",
       "address": "203.0.113.10", "port": 443, "verdict": "allowed", "bytesOut": 517,
       "bytesIn": 3072, "durationMs": 41, "open": false, "closedBy": "client"}],
      "nextCursor": "1"})";
  const std::string second = R"({"data": [
      {"id": "2", "time": "2026-11-29T10:00:01.000Z", "method": "GET", "host": "example.test",
       "address": null, "port": 80, "verdict": "internet-off", "bytesOut": 0, "bytesIn": 0,
       "durationMs": 0, "open": false, "closedBy": null}],
      "nextCursor": null})";
  CannedServer server({{200, first}, {200, second}, {200, first}, {200, second}});
  DaemonEnv env(server.url());

  CliRun r = RunCaptured({"sandbox", "network", "sbx_1", "--log", "--limit", "1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "TIME                      METHOD   HOST          ADDRESS       PORT  VERDICT       "
            "OUT   IN      MS\n"
            "2026-11-29T10:00:00.000Z  CONNECT  pkgs.test     203.0.113.10  443   allowed       "
            "517B  3.0KiB  41\n"
            "2026-11-29T10:00:01.000Z  GET      example.test  -             80    internet-off  "
            "0B    0B      0\n");
  EXPECT_EQ(r.err, "");

  r = RunCaptured({"sandbox", "network", "sbx_1", "--log", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  const json all = json::parse(r.out);
  EXPECT_EQ(all["nextCursor"], nullptr);
  ASSERT_EQ(all["data"].size(), 2u);
  EXPECT_EQ(all["data"][0], json::parse(first)["data"][0]);
  EXPECT_EQ(all["data"][1], json::parse(second)["data"][0]);

  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_TRUE(reqs[0].starts_with("GET /v1/sandboxes/sbx_1/network/log?limit=1 HTTP/1.1\r\n"))
      << reqs[0];
  EXPECT_TRUE(
      reqs[1].starts_with("GET /v1/sandboxes/sbx_1/network/log?limit=1&cursor=1 HTTP/1.1\r\n"))
      << reqs[1];
  EXPECT_TRUE(reqs[2].starts_with("GET /v1/sandboxes/sbx_1/network/log HTTP/1.1\r\n")) << reqs[2];
  EXPECT_TRUE(reqs[3].starts_with("GET /v1/sandboxes/sbx_1/network/log?cursor=1 HTTP/1.1\r\n"))
      << reqs[3];
}

TEST(CliCommands, CreateAndForkSendTheNetworkPolicy) {
  const std::string answer = R"({"sandboxes": [)" + kSandbox + "]}";
  CannedServer server({{200, kSandbox}, {200, answer}});
  DaemonEnv env(server.url());
  CliRun r = RunCaptured({"sandbox", "create", "--allow", "pkgs.test", "--deny", "bad.test"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "sbx_new\n");
  r = RunCaptured({"sandbox", "fork", "sbx_new", "--internet", "off"});
  EXPECT_EQ(r.status, 0) << r.err;

  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_TRUE(reqs[0].starts_with("POST /v1/sandboxes HTTP/1.1\r\n")) << reqs[0];
  EXPECT_EQ(json::parse(BodyOf(reqs[0])),
            json::parse(R"({"network": {"internet": true, "allow": ["pkgs.test"],
                                        "deny": ["bad.test"]}})"));
  EXPECT_TRUE(reqs[1].starts_with("POST /v1/sandboxes/sbx_new:fork HTTP/1.1\r\n")) << reqs[1];
  EXPECT_EQ(json::parse(BodyOf(reqs[1])),
            json::parse(R"({"network": {"internet": false, "allow": [], "deny": []}})"));
}

// Runs kiln with stderr on a pseudo-terminal; returns what the terminal
// got, or nullopt when the host has no pseudo-terminals.
std::optional<std::string> RunOnTerminal(const Args& args, int* status) {
  int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) return std::nullopt;
  int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  if (slave < 0) return std::nullopt;
  ::fcntl(master, F_SETFL, O_NONBLOCK);
  int null_fd = ::open("/dev/null", O_WRONLY);
  int saved_out = ::dup(STDOUT_FILENO), saved_err = ::dup(STDERR_FILENO);
  ::dup2(null_fd, STDOUT_FILENO);
  ::dup2(slave, STDERR_FILENO);
  *status = RunCli(args);
  ::dup2(saved_out, STDOUT_FILENO);
  ::dup2(saved_err, STDERR_FILENO);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(master, buf, sizeof buf)) > 0;) {
    out.append(buf, static_cast<std::size_t>(n));
  }
  for (int fd : {null_fd, saved_out, saved_err, slave, master}) ::close(fd);
  return out;
}

TEST(CliCommands, ProgressLineOnATerminalOnly) {
  // Slow answers, so the progress line has time to show.
  CannedServer server({{200, kSandbox, 500ms},
                       {200, kSnapshot, 500ms},
                       {200, kSandbox, 500ms},
                       {200, kSandbox, 500ms}});
  DaemonEnv env(server.url());
  int status = -1;
  auto shown = RunOnTerminal({"sandbox", "create"}, &status);
  if (!shown) GTEST_SKIP() << "no pseudo-terminals here";
  EXPECT_EQ(status, 0);
  EXPECT_NE(shown->find("creating sandbox\xe2\x80\xa6 "), std::string::npos) << *shown;
  EXPECT_TRUE(shown->ends_with("\r\x1b[K")) << *shown;  // erased when done

  shown = RunOnTerminal({"sandbox", "snapshot", "sbx_1"}, &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(shown->find("snapshotting sandbox sbx_1\xe2\x80\xa6"), std::string::npos) << *shown;
  EXPECT_TRUE(shown->ends_with("\r\x1b[K")) << *shown;

  // --json and --quiet keep the terminal clean.
  EXPECT_EQ(RunOnTerminal({"sandbox", "create", "--json"}, &status), "");
  EXPECT_EQ(RunOnTerminal({"--quiet", "sandbox", "create"}, &status), "");
  EXPECT_EQ(server.requests().size(), 4u);
}

TEST(CliCommands, BadFlagValuesFailBeforeAnyRequest) {
  CannedServer server({});
  DaemonEnv env(server.url());
  for (const Args& args :
       {Args{"usage", "--group-by", "team"}, Args{"sandbox", "create", "--wait", "500"},
        Args{"sandbox", "fork", "s", "--count", "x"}, Args{"completion", "zsh"},
        Args{"sandbox", "network", "s", "--internet", "off", "--allow", "a.test"},
        Args{"sandbox", "network", "s", "--deny", "a.test"},
        Args{"sandbox", "network", "s", "--log", "--internet", "on"},
        Args{"sandbox", "network", "s", "--log", "--limit", "0"},
        Args{"sandbox", "create", "--internet", "off", "--allow", "a.test"},
        Args{"sandbox", "fork", "s", "--deny", "a.test"}}) {
    CliRun r = RunCaptured(args);
    EXPECT_EQ(r.status, 1) << args[0] << " " << args[1];
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(r.err.starts_with("kiln: ")) << r.err;
  }
  EXPECT_TRUE(server.requests().empty());
}

}  // namespace
}  // namespace cli_commands_daemon_test
}  // namespace kiln::cli
