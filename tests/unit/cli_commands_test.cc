// kiln CLI: snapshot, fork, extend, usage, network and create (Prefer:
// wait, Idempotency-Key) — their flags, request bodies and output, against
// a canned daemon.
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
#include "cli_test_util.h"
#include "fake_daemon.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
using Args = std::vector<std::string>;
using namespace std::chrono_literals;

using testutil::CliRun;
using testutil::CommandLineError;
using testutil::RunCaptured;
using testutil::VerbArgs;

// --- command line ------------------------------------------------------------

TEST(CliCommandsParse, NewVerbs) {
  Invocation inv = ParseCommandLine(
      {"sandbox", "snapshot", "sbx_1", "--name", "base", "--retention-days", "3", "--json"});
  ASSERT_EQ(inv.action, Action::kVerb);
  EXPECT_EQ(inv.group, &SandboxGroup());
  EXPECT_EQ(inv.verb->name, "snapshot");
  EXPECT_TRUE(inv.json);
  EXPECT_EQ(inv.args.positionals, (Args{"sbx_1"}));

  inv = ParseCommandLine({"sandbox", "fork", "sbx_1", "--count", "2", "--keep-snapshot"});
  EXPECT_EQ(inv.verb->name, "fork");
  EXPECT_TRUE(inv.args.Has("keep-snapshot"));

  inv = ParseCommandLine({"sandbox", "extend", "sbx_1", "--seconds=600"});
  EXPECT_EQ(inv.verb->name, "extend");
  EXPECT_EQ(inv.args.Get("seconds"), "600");

  for (const char* verb : {"ls", "list"}) {
    inv = ParseCommandLine({"snapshot", verb, "--sandbox", "sbx_1"});
    EXPECT_EQ(inv.group, &SnapshotGroup());
    EXPECT_EQ(inv.verb->name, "ls");
  }
  EXPECT_EQ(ParseCommandLine({"snapshot", "get", "snp_1"}).verb->name, "get");
  EXPECT_EQ(ParseCommandLine({"snapshot", "delete", "snp_1"}).verb->name, "rm");

  inv = ParseCommandLine({"usage", "--from", "7d", "--group-by", "label:team", "--json"});
  ASSERT_EQ(inv.action, Action::kVerb);
  EXPECT_EQ(inv.group, nullptr);
  EXPECT_EQ(inv.verb, &UsageVerb());
  EXPECT_TRUE(inv.json);

  inv = ParseCommandLine({"completion", "bash"});
  EXPECT_EQ(inv.verb, &CompletionVerb());
  EXPECT_EQ(inv.args.positionals, (Args{"bash"}));
}

TEST(CliCommandsParse, QuietAnywhereBeforeTheVerbOrAfter) {
  EXPECT_TRUE(ParseCommandLine({"--quiet", "sandbox", "create"}).quiet);
  EXPECT_TRUE(ParseCommandLine({"sandbox", "--quiet", "create"}).quiet);
  EXPECT_TRUE(ParseCommandLine({"sandbox", "create", "--quiet"}).quiet);
  EXPECT_TRUE(ParseCommandLine({"usage", "--quiet"}).quiet);
  EXPECT_FALSE(ParseCommandLine({"sandbox", "create"}).quiet);
  // After "--" it is the command's.
  EXPECT_FALSE(ParseCommandLine({"sandbox", "run", "--", "x", "--quiet"}).quiet);
}

TEST(CliCommandsParse, UsageErrors) {
  EXPECT_EQ(CommandLineError({"sandbox", "extend", "sbx_1"}), "missing --seconds");
  EXPECT_EQ(CommandLineError({"sandbox", "extend", "--seconds", "5"}), "missing the sandbox ID");
  EXPECT_EQ(CommandLineError({"snapshot", "get"}), "missing the snapshot ID");
  EXPECT_EQ(CommandLineError({"snapshot", "rm", "a", "b"}), "unexpected argument 'b'");
  EXPECT_EQ(CommandLineError({"sandbox", "fork", "s", "--keep-snapshot=yes"}),
            "--keep-snapshot takes no value");
  EXPECT_EQ(CommandLineError({"sandbox", "fork", "s", "--cout", "2"}),
            "unknown flag --cout (did you mean --count?)");
  EXPECT_EQ(CommandLineError({"usage", "x"}), "unexpected argument 'x'");
  EXPECT_EQ(CommandLineError({"usage", "--form", "7d"}),
            "unknown flag --form (did you mean --from?)");
  EXPECT_EQ(CommandLineError({"completion"}), "missing the shell (bash)");
  EXPECT_EQ(CommandLineError({"snapshots", "ls"}),
            "unknown command 'snapshots' (did you mean snapshot?)");
  EXPECT_EQ(CommandLineError({"usge"}), "unknown command 'usge' (did you mean usage?)");
  try {
    ParseCommandLine({"usage", "--bogus"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(e.hint, "see `kiln usage --help`");
  }
  // --help wins over a missing required flag.
  EXPECT_EQ(ParseCommandLine({"sandbox", "extend", "--help"}).action, Action::kHelp);
}

TEST(CliCommandsParse, Help) {
  const std::string top = ParseCommandLine({"--help"}).help;
  for (const char* word : {"snapshot VERB", "usage [OPTIONS]", "completion bash", "--quiet",
                           "keys VERB", "server [ARGS...]"}) {
    EXPECT_NE(top.find(word), std::string::npos) << word;
  }
  const std::string sandbox = ParseCommandLine({"sandbox", "--help"}).help;
  for (const char* word : {"snapshot ID", "fork ID", "extend ID --seconds N"}) {
    EXPECT_NE(sandbox.find(word), std::string::npos) << word;
  }
  Invocation inv = ParseCommandLine({"snapshot", "--help"});
  EXPECT_NE(inv.help.find("Usage: kiln snapshot VERB"), std::string::npos);
  EXPECT_NE(inv.help.find("rm ID"), std::string::npos);
  EXPECT_TRUE(ParseCommandLine({"snapshot"}).help_is_error);

  inv = ParseCommandLine({"sandbox", "fork", "--help"});
  EXPECT_NE(inv.help.find("Usage: kiln sandbox fork ID"), std::string::npos);
  EXPECT_NE(inv.help.find("--keep-snapshot"), std::string::npos);
  EXPECT_NE(inv.help.find("--wait S"), std::string::npos);
  EXPECT_NE(ParseCommandLine({"sandbox", "create", "-h"}).help.find("--wait S"), std::string::npos);
  inv = ParseCommandLine({"usage", "--help"});
  EXPECT_NE(inv.help.find("Usage: kiln usage [--from T]"), std::string::npos);
  EXPECT_NE(inv.help.find("label:NAME"), std::string::npos);
  EXPECT_NE(inv.help.find("--json"), std::string::npos);
  inv = ParseCommandLine({"completion", "--help"});
  EXPECT_NE(inv.help.find("Usage: kiln completion bash"), std::string::npos);
}

TEST(CliCommandsParse, Network) {
  Invocation inv = ParseCommandLine(
      {"sandbox", "network", "sbx_1", "--allow", "a.test", "--allow=b.test", "--deny", "c.test"});
  ASSERT_EQ(inv.action, Action::kVerb);
  EXPECT_EQ(inv.verb->name, "network");
  EXPECT_EQ(inv.args.positionals, (Args{"sbx_1"}));
  EXPECT_EQ(inv.args.All("allow"), (Args{"a.test", "b.test"}));
  inv = ParseCommandLine({"sandbox", "network", "sbx_1", "--log", "--limit", "2", "--json"});
  EXPECT_TRUE(inv.args.Has("log"));
  EXPECT_TRUE(inv.json);
  EXPECT_EQ(ParseCommandLine({"sandbox", "create", "--internet", "on", "--deny", "x"}).verb->name,
            "create");
  EXPECT_EQ(ParseCommandLine({"sandbox", "fork", "s", "--allow", "x"}).verb->name, "fork");

  EXPECT_EQ(CommandLineError({"sandbox", "network"}), "missing the sandbox ID");
  EXPECT_EQ(CommandLineError({"sandbox", "network", "s", "--internet"}),
            "--internet needs a value");
  EXPECT_EQ(CommandLineError({"sandbox", "network", "s", "--internet", "on", "--internet", "off"}),
            "--internet given more than once");
  EXPECT_EQ(CommandLineError({"sandbox", "network", "s", "--alow", "x"}),
            "unknown flag --alow (did you mean --allow?)");
  EXPECT_EQ(CommandLineError({"sandbox", "network", "s", "--log=yes"}), "--log takes no value");

  inv = ParseCommandLine({"sandbox", "network", "--help"});
  EXPECT_EQ(inv.action, Action::kHelp);
  for (const char* word : {"Usage: kiln sandbox network ID [--internet on|off]", "--allow H",
                           "--allow implies --internet on", "comma-separated", "--deny H", "--log",
                           "--limit N", "replaces\nevery rule"}) {
    EXPECT_NE(inv.help.find(word), std::string::npos) << word;
  }
  for (const char* verb : {"create", "fork"}) {
    inv = ParseCommandLine({"sandbox", verb, "--help"});
    for (const char* word :
         {"--internet on|off", "--allow H", "--allow implies --internet on", "--deny H"}) {
      EXPECT_NE(inv.help.find(word), std::string::npos) << verb << " " << word;
    }
  }
  EXPECT_NE(ParseCommandLine({"sandbox", "--help"}).help.find("network ID"), std::string::npos);
  EXPECT_NE(ParseCommandLine({"--help"}).help.find("egress rules"), std::string::npos);
}

// --- flags → requests --------------------------------------------------------

TEST(CliCommandsRequests, Bodies) {
  EXPECT_EQ(SnapshotBody(VerbArgs({"sandbox", "snapshot", "s", "--name", "base", "--label",
                                   "team=ml", "--retention-days", "3"})),
            json::parse(R"({"name": "base", "labels": {"team": "ml"}, "retentionDays": 3})"));
  EXPECT_EQ(SnapshotBody(VerbArgs({"sandbox", "snapshot", "s"})), json::object());
  EXPECT_THROW(SnapshotBody(VerbArgs({"sandbox", "snapshot", "s", "--retention-days", "1w"})),
               UsageError);

  EXPECT_EQ(ForkBody(VerbArgs(
                {"sandbox", "fork", "s", "--count", "2", "--keep-snapshot", "--label", "a=b"})),
            json::parse(R"({"count": 2, "keepSnapshot": true, "labels": {"a": "b"}})"));
  EXPECT_EQ(ForkBody(VerbArgs({"sandbox", "fork", "s"})), json::object());
  EXPECT_THROW(ForkBody(VerbArgs({"sandbox", "fork", "s", "--count", "0"})), UsageError);

  EXPECT_EQ(ExtendBody(VerbArgs({"sandbox", "extend", "s", "--seconds", "600"})),
            json::parse(R"({"seconds": 600})"));
  EXPECT_THROW(ExtendBody(VerbArgs({"sandbox", "extend", "s", "--seconds", "ten"})), UsageError);

  EXPECT_EQ(SandboxCreateBody(VerbArgs({"sandbox", "create", "--snapshot", "snp_1"})),
            json::parse(R"({"snapshot": "snp_1"})"));
}

TEST(CliCommandsRequests, Wait) {
  EXPECT_EQ(WaitSeconds(VerbArgs({"sandbox", "create"})), 120);
  EXPECT_EQ(WaitSeconds(VerbArgs({"sandbox", "create", "--wait", "0"})), 0);
  EXPECT_EQ(WaitSeconds(VerbArgs({"sandbox", "fork", "s", "--wait", "30"})), 30);
  EXPECT_EQ(WaitSeconds(VerbArgs({"sandbox", "run", "--wait=5", "--", "x"})), 5);
  EXPECT_THROW(WaitSeconds(VerbArgs({"sandbox", "create", "--wait", "121"})), UsageError);
  EXPECT_THROW(WaitSeconds(VerbArgs({"sandbox", "create", "--wait", "-1"})), UsageError);
}

TEST(CliCommandsRequests, IdempotencyKeysAreFreshUuids) {
  const std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  const std::string a = NewIdempotencyKey(), b = NewIdempotencyKey();
  EXPECT_TRUE(std::regex_match(a, uuid)) << a;
  EXPECT_TRUE(std::regex_match(b, uuid)) << b;
  EXPECT_NE(a, b);
}

TEST(CliCommandsRequests, Targets) {
  EXPECT_EQ(SnapshotTarget("snp_1", ":delete"), "/v1/snapshots/snp_1:delete");
  EXPECT_EQ(SnapshotTarget("../keys"), "/v1/snapshots/..%2Fkeys");
  EXPECT_EQ(SnapshotListTarget(VerbArgs({"snapshot", "ls"}), std::nullopt), "/v1/snapshots");
  EXPECT_EQ(SnapshotListTarget(VerbArgs({"snapshot", "ls", "--sandbox", "sbx 1", "--name", "base"}),
                               "c2"),
            "/v1/snapshots?sandboxId=sbx%201&name=base&cursor=c2");
}

TEST(CliCommandsRequests, UsageTarget) {
  // 2026-11-29T10:00:00Z
  const auto now = std::chrono::system_clock::from_time_t(1795946400);
  auto target = [&](const Args& args) { return UsageTarget(VerbArgs(args), now); };
  EXPECT_EQ(target({"usage"}), "/v1/usage");
  EXPECT_EQ(target({"usage", "--from", "7d", "--to", "2h"}),
            "/v1/usage?from=2026-11-22T10%3A00%3A00Z&to=2026-11-29T08%3A00%3A00Z");
  EXPECT_EQ(target({"usage", "--from", "30m"}), "/v1/usage?from=2026-11-29T09%3A30%3A00Z");
  // Anything else goes to the daemon as is; it checks RFC 3339.
  EXPECT_EQ(target({"usage", "--from", "2026-11-01T00:00:00Z"}),
            "/v1/usage?from=2026-11-01T00%3A00%3A00Z");
  EXPECT_EQ(target({"usage", "--group-by", "key"}), "/v1/usage?groupBy=key");
  EXPECT_EQ(target({"usage", "--group-by", "label:team"}), "/v1/usage?groupBy=label%3Ateam");
  for (const char* bad : {"label", "label:", "keys", ""}) {
    EXPECT_THROW(target({"usage", "--group-by", bad}), UsageError) << bad;
  }
}

TEST(CliCommandsRequests, NetworkPolicy) {
  auto create = [](const Args& flags) {
    Args args = {"sandbox", "create"};
    args.insert(args.end(), flags.begin(), flags.end());
    return SandboxCreateBody(VerbArgs(args));
  };
  EXPECT_FALSE(create({}).contains("network"));
  // --allow implies the internet; values may list several hosts.
  EXPECT_EQ(create({"--allow", "a.test", "--allow", "b.test, *.c.test", "--deny", "10.1.0.0/16"}),
            json::parse(R"({"network": {"internet": true,
                                        "allow": ["a.test", "b.test", "*.c.test"],
                                        "deny": ["10.1.0.0/16"]}})"));
  EXPECT_EQ(create({"--internet", "off"}),
            json::parse(R"({"network": {"internet": false, "allow": [], "deny": []}})"));
  EXPECT_EQ(create({"--internet", "on", "--vcpu", "1"}),
            json::parse(R"({"vcpu": 1, "network": {"internet": true, "allow": [], "deny": []}})"));
  // A new sandbox has nothing to replace: the internet stays off, as by default.
  EXPECT_EQ(create({"--deny", "x.test"})["network"],
            json::parse(R"({"internet": false, "allow": [], "deny": ["x.test"]})"));

  EXPECT_EQ(ForkBody(VerbArgs({"sandbox", "fork", "s", "--allow", "pkgs.test", "--count", "2"})),
            json::parse(R"({"count": 2,
                            "network": {"internet": true, "allow": ["pkgs.test"], "deny": []}})"));
  EXPECT_EQ(ForkBody(VerbArgs({"sandbox", "fork", "s", "--internet", "on", "--deny", "x"})),
            json::parse(R"({"network": {"internet": true, "allow": [], "deny": ["x"]}})"));
  EXPECT_FALSE(ForkBody(VerbArgs({"sandbox", "fork", "s"})).contains("network"));

  auto put = [](const Args& flags) {
    Args args = {"sandbox", "network", "s"};
    args.insert(args.end(), flags.begin(), flags.end());
    return NetworkPutBody(VerbArgs(args));
  };
  EXPECT_EQ(put({}), std::nullopt);  // show
  EXPECT_EQ(put({"--log", "--limit", "5"}), std::nullopt);
  EXPECT_EQ(put({"--internet", "off"}),
            json::parse(R"({"internet": false, "allow": [], "deny": []})"));
  EXPECT_EQ(
      put({"--allow", "pkgs.test,*.pkgs.test"}),
      json::parse(R"({"internet": true, "allow": ["pkgs.test", "*.pkgs.test"], "deny": []})"));
  EXPECT_EQ(put({"--internet", "on", "--deny", "a.test", "--deny", "b.test"}),
            json::parse(R"({"internet": true, "allow": [], "deny": ["a.test", "b.test"]})"));

  auto error = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const UsageError& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string contradiction =
      "--internet off contradicts --allow: allowed hosts are reached over the internet "
      "(--allow implies --internet on)";
  const std::string needs_internet =
      "say --internet on or off: the new policy replaces every rule (--allow implies "
      "--internet on)";
  EXPECT_EQ(error([&] { put({"--internet", "off", "--allow", "a.test"}); }), contradiction);
  EXPECT_EQ(error([&] { create({"--allow", "a.test", "--internet", "off"}); }), contradiction);
  EXPECT_EQ(error([&] {
              ForkBody(VerbArgs({"sandbox", "fork", "s", "--internet", "off", "--allow", "a"}));
            }),
            contradiction);
  EXPECT_EQ(error([&] { put({"--deny", "a.test"}); }), needs_internet);
  EXPECT_EQ(error([&] {
              ForkBody(VerbArgs({"sandbox", "fork", "s", "--deny", "a"}));
            }),
            needs_internet);
  EXPECT_EQ(error([&] { put({"--internet", "yes"}); }), "--internet expects on or off, got 'yes'");
  EXPECT_EQ(error([&] {
              create({"--internet", "true"});
            }),
            "--internet expects on or off, got 'true'");
  EXPECT_EQ(error([&] {
              put({"--allow", "a.test,,b.test"});
            }),
            "--allow expects a host, got 'a.test,,b.test'");
  EXPECT_EQ(error([&] {
              put({"--internet", "on", "--deny", ""});
            }),
            "--deny expects a host, got ''");
  EXPECT_EQ(error([&] {
              put({"--log", "--allow", "a.test"});
            }),
            "--log shows the log; it cannot be combined with --internet, --allow or --deny");
  EXPECT_EQ(error([&] {
              put({"--log", "--internet", "off"});
            }),
            "--log shows the log; it cannot be combined with --internet, --allow or --deny");
  EXPECT_EQ(error([&] { put({"--limit", "5"}); }), "--limit goes with --log");
  EXPECT_EQ(error([&] {
              put({"--log", "--limit", "501"});
            }),
            "--limit must be between 1 and 500, got 501");

  const ParsedArgs plain = VerbArgs({"sandbox", "network", "s", "--log"});
  EXPECT_EQ(NetworkLogTarget("sbx 1", plain, std::nullopt), "/v1/sandboxes/sbx%201/network/log");
  const ParsedArgs limited = VerbArgs({"sandbox", "network", "s", "--log", "--limit", "500"});
  EXPECT_EQ(NetworkLogTarget("s", limited, "17"),
            "/v1/sandboxes/s/network/log?limit=500&cursor=17");
  for (const char* bad : {"0", "501", "ten"}) {
    EXPECT_THROW(
        NetworkLogTarget("s", VerbArgs({"sandbox", "network", "s", "--log", "--limit", bad}),
                         std::nullopt),
        UsageError)
        << bad;
  }
}

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
}  // namespace kiln::cli
