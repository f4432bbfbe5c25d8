// kiln CLI: snapshot, fork, extend, usage, network and create (Prefer:
// wait, Idempotency-Key) — their command lines and request bodies. What they
// do against a canned daemon is commands_daemon_test.cc.
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
namespace cli_commands_test {
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

// Help is generated from the table: every flag of every verb is in its
// --help with its value's name, and described (alone or with the next flag).
TEST(CliCommandsParse, HelpDescribesEveryFlag) {
  for (const auto& c : Commands()) {
    std::vector<std::pair<const Group*, const Verb*>> verbs;
    if (c.group) {
      for (const auto& v : c.group->verbs()) verbs.emplace_back(c.group, &v);
    }
    if (c.verb) verbs.emplace_back(nullptr, c.verb);
    for (const auto& [group, verb] : verbs) {
      const std::string help = VerbHelp(group, *verb);
      const std::string where = std::string(c.name) + " " + std::string(verb->name);
      for (const auto& f : verb->flags) {
        const std::string label = "--" + f.name + (f.takes_value ? " " + f.value_name : "");
        EXPECT_NE(help.find(label), std::string::npos) << where << ": " << label;
        EXPECT_EQ(f.takes_value, !f.value_name.empty()) << where << ": --" << f.name;
      }
      if (!verb->flags.empty()) EXPECT_FALSE(verb->flags.back().help.empty()) << where;
      for (const auto& f : CommonFlags()) EXPECT_NE(help.find("--" + f.name), std::string::npos);
    }
  }
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
  EXPECT_EQ(SnapshotBody(VerbArgs({"sandbox", "snapshot", "s", "--disk"})),
            json::parse(R"({"mode": "disk"})"));
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

TEST(CliCommandsRequests, CreateLifecycleFlags) {
  EXPECT_EQ(SandboxCreateBody(VerbArgs(
                {"sandbox", "create", "--name", "dev", "--get-or-create", "--idle-pause", "900",
                 "--auto-wake", "off", "--on-lease-end", "pause", "--persistent", "--no-sudo",
                 "--max-total-cost", "5000000", "--max-cost", "0", "--trial", "--no-internet"})),
            json::parse(R"({"name": "dev", "getOrCreate": true, "idlePauseSeconds": 900,
                            "autoWake": false, "onLeaseEnd": "pause", "persistent": true,
                            "sudo": false, "maxTotalCostMicros": 5000000, "maxCostMicros": 0,
                            "funding": "trial", "network": {"internet": false}})"));
  EXPECT_EQ(SandboxCreateBody(VerbArgs({"sandbox", "create", "--paid", "--auto-wake", "on"})),
            json::parse(R"({"funding": "paid", "autoWake": true})"));
  EXPECT_THROW(SandboxCreateBody(VerbArgs({"sandbox", "create", "--get-or-create"})), UsageError);
  EXPECT_THROW(SandboxCreateBody(VerbArgs({"sandbox", "create", "--trial", "--paid"})), UsageError);
  EXPECT_THROW(SandboxCreateBody(VerbArgs({"sandbox", "create", "--auto-wake", "maybe"})),
               UsageError);
  EXPECT_THROW(
      SandboxCreateBody(VerbArgs({"sandbox", "create", "--no-internet", "--allow", "a.test"})),
      UsageError);
  EXPECT_THROW(SandboxCreateBody(VerbArgs({"sandbox", "create", "--idle-pause", "-1"})),
               UsageError);
  // run: --trial, --no-internet and --max-cost too; --timeout is the command's, in seconds.
  EXPECT_EQ(SandboxCreateBody(VerbArgs({"sandbox", "run", "--trial", "--no-internet", "--max-cost",
                                        "50000", "--", "true"})),
            json::parse(R"({"funding": "trial", "network": {"internet": false},
                            "maxCostMicros": 50000})"));
  ParsedArgs run = VerbArgs({"sandbox", "run", "--timeout", "90", "--", "sleep", "1"});
  EXPECT_EQ(ExecBody(run, run.command, false, std::nullopt)["timeoutMs"], 90000);
  ParsedArgs both = VerbArgs({"sandbox", "run", "--timeout", "9", "--timeout-ms", "9", "--", "x"});
  EXPECT_THROW(ExecBody(both, both.command, false, std::nullopt), UsageError);
}

TEST(CliCommandsRequests, ProcessesAndWake) {
  EXPECT_EQ(WakeBody(VerbArgs({"sandbox", "wake", "s"})), json::object());
  EXPECT_EQ(WakeBody(VerbArgs({"sandbox", "wake", "s", "--timeout", "600"})),
            json::parse(R"({"timeoutSeconds": 600})"));
  ParsedArgs spawn =
      VerbArgs({"sandbox", "spawn", "s", "--cwd", "/tmp", "--env", "A=1", "--", "sleep", "5"});
  EXPECT_EQ(SpawnBody(spawn, spawn.command),
            json::parse(R"({"argv": ["sleep", "5"], "cwd": "/tmp", "env": {"A": "1"}})"));
  EXPECT_EQ(SignalBody(VerbArgs({"sandbox", "kill", "s", "p1"})),
            json::parse(R"({"signal": "SIGTERM"})"));
  EXPECT_EQ(SignalBody(VerbArgs({"sandbox", "kill", "s", "p1", "--signal", "kill"})),
            json::parse(R"({"signal": "SIGKILL"})"));
  EXPECT_EQ(SignalBody(VerbArgs({"sandbox", "kill", "s", "p1", "--signal", "SIGUSR1"})),
            json::parse(R"({"signal": "SIGUSR1"})"));
  EXPECT_THROW(SignalBody(VerbArgs({"sandbox", "kill", "s", "p1", "--signal", "STOP"})),
               UsageError);
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

}  // namespace
}  // namespace cli_commands_test
}  // namespace kiln::cli
