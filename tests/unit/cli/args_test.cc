// kiln CLI: flag parsing, verb dispatch, daemon URL and flag→request mapping.
#include <gtest/gtest.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/context.h"
#include "cli/errors.h"
#include "cli/requests.h"
#include "cli/url.h"
#include "unit/cli/cli_test_util.h"

namespace kiln::cli {
namespace cli_args_test {
namespace {

using json = nlohmann::json;
using Args = std::vector<std::string>;

const std::vector<FlagSpec> kSpecs = {
    {"vcpu", true, false}, {"memory", true, false}, {"env", true, true},
    {"all", false, false}, {"json", false, false},  {"help", false, false},
};

std::string UsageMessage(const Args& args, const std::vector<FlagSpec>& specs = kSpecs) {
  try {
    ParseArgs(args, specs);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

using testutil::CommandLineError;

// --- parse_args -------------------------------------------------------------

TEST(CliArgs, SpaceAndEqualsForms) {
  ParsedArgs a = ParseArgs({"--vcpu", "4", "--memory=512"}, kSpecs);
  EXPECT_EQ(a.Get("vcpu"), "4");
  EXPECT_EQ(a.Get("memory"), "512");
  EXPECT_FALSE(a.Get("all"));
}

TEST(CliArgs, EqualsKeepsTheRestOfTheValue) {
  ParsedArgs a = ParseArgs({"--env=A=b=c", "--env", "X="}, kSpecs);
  EXPECT_EQ(a.All("env"), (Args{"A=b=c", "X="}));
}

TEST(CliArgs, RepeatedFlagsKeepOrder) {
  ParsedArgs a = ParseArgs({"--env", "A=1", "--env", "B=2", "--env=C=3"}, kSpecs);
  EXPECT_EQ(a.All("env"), (Args{"A=1", "B=2", "C=3"}));
}

TEST(CliArgs, SingleValuedFlagGivenTwiceIsRefused) {
  EXPECT_EQ(UsageMessage({"--vcpu", "1", "--vcpu", "2"}), "--vcpu given more than once");
}

TEST(CliArgs, BooleanFlags) {
  ParsedArgs a = ParseArgs({"--all", "--json"}, kSpecs);
  EXPECT_TRUE(a.Has("all"));
  EXPECT_TRUE(a.Has("json"));
  EXPECT_EQ(UsageMessage({"--all=yes"}), "--all takes no value");
}

TEST(CliArgs, SeparatorEndsFlags) {
  ParsedArgs a = ParseArgs({"--vcpu", "2", "--", "ls", "--all", "-la", "--"}, kSpecs);
  EXPECT_TRUE(a.has_separator);
  EXPECT_EQ(a.command, (Args{"ls", "--all", "-la", "--"}));
  EXPECT_FALSE(a.Has("all"));  // belongs to the command
}

TEST(CliArgs, EmptyCommandAfterSeparator) {
  ParsedArgs a = ParseArgs({"--"}, kSpecs);
  EXPECT_TRUE(a.has_separator);
  EXPECT_TRUE(a.command.empty());
}

TEST(CliArgs, PositionalsMixWithFlags) {
  ParsedArgs a = ParseArgs({"sbx_1", "--all", "-", "x"}, kSpecs);
  EXPECT_EQ(a.positionals, (Args{"sbx_1", "-", "x"}));
}

TEST(CliArgs, MissingValue) {
  EXPECT_EQ(UsageMessage({"--vcpu"}), "--vcpu needs a value");
  // "--" is never swallowed as a value.
  EXPECT_EQ(UsageMessage({"--vcpu", "--", "ls"}), "--vcpu needs a value");
}

TEST(CliArgs, ValueMayLookLikeAFlag) {
  ParsedArgs a = ParseArgs({"--env", "--weird=1"}, kSpecs);
  EXPECT_EQ(a.All("env"), (Args{"--weird=1"}));
}

TEST(CliArgs, UnknownFlagIsNamedWithSuggestion) {
  EXPECT_EQ(UsageMessage({"--memroy", "2"}), "unknown flag --memroy (did you mean --memory?)");
  EXPECT_EQ(UsageMessage({"--mem=2"}), "unknown flag --mem (did you mean --memory?)");
  EXPECT_EQ(UsageMessage({"--frobnicate"}), "unknown flag --frobnicate");
  EXPECT_EQ(UsageMessage({"-la"}), "unknown flag -la");
}

TEST(CliArgs, DashHIsHelp) { EXPECT_TRUE(ParseArgs({"-h"}, kSpecs).Has("help")); }

TEST(CliArgs, Suggest) {
  const Args flags = {"vcpu", "memory", "disk", "timeout-ms", "env", "cwd"};
  EXPECT_EQ(Suggest("memroy", flags), "memory");  // swapped letters
  EXPECT_EQ(Suggest("vpcu", flags), "vcpu");
  EXPECT_EQ(Suggest("timeout", flags), "timeout-ms");  // prefix
  EXPECT_EQ(Suggest("dsk", flags), "disk");
  EXPECT_EQ(Suggest("xyzzy", flags), std::nullopt);
  EXPECT_EQ(Suggest("", flags), std::nullopt);
}

TEST(CliArgs, EditDistance) {
  EXPECT_EQ(EditDistance("memory", "memory"), 0u);
  EXPECT_EQ(EditDistance("memroy", "memory"), 1u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(CliArgs, SplitKeyValue) {
  EXPECT_EQ(SplitKeyValue("--env", "A=1"), (std::pair<std::string, std::string>{"A", "1"}));
  EXPECT_EQ(SplitKeyValue("--env", "A="), (std::pair<std::string, std::string>{"A", ""}));
  EXPECT_EQ(SplitKeyValue("--env", "A=b=c").second, "b=c");
  EXPECT_THROW(SplitKeyValue("--env", "A"), UsageError);
  EXPECT_THROW(SplitKeyValue("--env", "=1"), UsageError);
}

TEST(CliArgs, ParseInt) {
  EXPECT_EQ(ParseInt("--vcpu", "4", 1, 16), 4);
  EXPECT_THROW(ParseInt("--vcpu", "four", 1, 16), UsageError);
  EXPECT_THROW(ParseInt("--vcpu", "4x", 1, 16), UsageError);
  EXPECT_THROW(ParseInt("--vcpu", "", 1, 16), UsageError);
  EXPECT_THROW(ParseInt("--vcpu", "0", 1, 16), UsageError);
  EXPECT_THROW(ParseInt("--vcpu", "99999999999999999999", 1, 16), UsageError);
  try {
    ParseInt("--memory", "2G", 1, 100);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--memory expects a whole number, got '2G'");
  }
}

// --- daemon URL -------------------------------------------------------------

TEST(CliUrl, Default) {
  ApiUrl u = ParseApiUrl(kDefaultApiUrl);
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, "7070");
  EXPECT_EQ(u.base_path, "");
  EXPECT_EQ(u.display, "http://127.0.0.1:7070");
  EXPECT_EQ(u.HostHeader(), "127.0.0.1:7070");
}

TEST(CliUrl, Variants) {
  EXPECT_EQ(ParseApiUrl("http://localhost").port, "80");
  EXPECT_EQ(ParseApiUrl("HTTP://h:8080/").base_path, "");
  EXPECT_EQ(ParseApiUrl("127.0.0.1:9000").port, "9000");  // scheme optional
  ApiUrl prefixed = ParseApiUrl("http://proxy:80/kiln/");
  EXPECT_EQ(prefixed.base_path, "/kiln");
  EXPECT_EQ(prefixed.display, "http://proxy:80/kiln");
  ApiUrl v6 = ParseApiUrl("http://[::1]:7070");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.HostHeader(), "[::1]:7070");
}

TEST(CliUrl, Refused) {
  for (const char* bad :
       {"https://h:7070", "ftp://h", "http://:7070", "http://h:0", "http://h:70000",
        "http://h:12ab", "http://u:p@h:1", "http://h/?q=1", "http://::1:7070", "http://[::1"}) {
    EXPECT_THROW(ParseApiUrl(bad), UsageError) << bad;
  }
}

TEST(CliUrl, PercentEncode) {
  EXPECT_EQ(PercentEncode("abc-._~XYZ09"), "abc-._~XYZ09");
  EXPECT_EQ(PercentEncode("a b/c:d&e=f"), "a%20b%2Fc%3Ad%26e%3Df");
  EXPECT_EQ(PercentEncode("\xc3\xa9"), "%C3%A9");
}

TEST(CliUrl, Query) {
  EXPECT_EQ(Query().Str(), "");
  EXPECT_EQ(Query().Add("a", "1").Add("label", "k:v").Add("label", "x y").Str(),
            "?a=1&label=k%3Av&label=x%20y");
}

TEST(CliUrl, SandboxTargetEncodesTheId) {
  EXPECT_EQ(SandboxTarget("sbx_1"), "/v1/sandboxes/sbx_1");
  EXPECT_EQ(SandboxTarget("sbx_1", ":stop"), "/v1/sandboxes/sbx_1:stop");
  EXPECT_EQ(SandboxTarget("../health"), "/v1/sandboxes/..%2Fhealth");
}

TEST(CliUrl, ConfigFromEnv) {
  ClientConfig c = ConfigFromEnv(nullptr, nullptr);
  EXPECT_EQ(c.url.display, "http://127.0.0.1:7070");
  EXPECT_FALSE(c.api_key);
  c = ConfigFromEnv("", "");
  EXPECT_EQ(c.url.display, "http://127.0.0.1:7070");
  EXPECT_FALSE(c.api_key);
  c = ConfigFromEnv("http://10.0.0.2:8000", "key123");
  EXPECT_EQ(c.url.display, "http://10.0.0.2:8000");
  EXPECT_EQ(c.api_key, "key123");
  EXPECT_THROW(ConfigFromEnv("https://x", nullptr), UsageError);
}

// --- command line -----------------------------------------------------------

TEST(CliCommandLine, Help) {
  Invocation inv = ParseCommandLine({"--help"});
  EXPECT_EQ(inv.action, Action::kHelp);
  EXPECT_FALSE(inv.help_is_error);
  EXPECT_NE(inv.help.find("kiln sandbox run"), std::string::npos);
  EXPECT_NE(inv.help.find("KILN_API_URL"), std::string::npos);

  inv = ParseCommandLine({});
  EXPECT_EQ(inv.action, Action::kHelp);
  EXPECT_TRUE(inv.help_is_error);

  inv = ParseCommandLine({"sandbox", "--help"});
  EXPECT_EQ(inv.action, Action::kHelp);
  EXPECT_NE(inv.help.find("exec ID"), std::string::npos);

  inv = ParseCommandLine({"sandbox"});
  EXPECT_TRUE(inv.help_is_error);
}

TEST(CliCommandLine, VerbHelpWinsOverBadFlags) {
  Invocation inv = ParseCommandLine({"sandbox", "run", "--memroy", "1", "--help"});
  EXPECT_EQ(inv.action, Action::kHelp);
  EXPECT_NE(inv.help.find("--timeout-ms"), std::string::npos);
  // After "--" it belongs to the command.
  inv = ParseCommandLine({"sandbox", "run", "--", "ls", "--help"});
  EXPECT_EQ(inv.action, Action::kVerb);
  EXPECT_EQ(inv.args.command, (Args{"ls", "--help"}));
}

TEST(CliCommandLine, Server) {
  Invocation inv = ParseCommandLine({"server", "--port", "1", "--json"});
  EXPECT_EQ(inv.action, Action::kServer);
  EXPECT_EQ(inv.server_args, (Args{"--port", "1", "--json"}));
}

TEST(CliCommandLine, Version) {
  EXPECT_EQ(ParseCommandLine({"--version"}).action, Action::kVersion);
}

TEST(CliCommandLine, Run) {
  Invocation inv = ParseCommandLine(
      {"sandbox", "run", "--vcpu", "2", "--env", "A=1", "--json", "--", "python3", "-c", "x"});
  ASSERT_EQ(inv.action, Action::kVerb);
  EXPECT_EQ(inv.verb->name, "run");
  EXPECT_TRUE(inv.json);
  EXPECT_EQ(inv.args.command, (Args{"python3", "-c", "x"}));
}

TEST(CliCommandLine, JsonFlagPlacement) {
  EXPECT_TRUE(ParseCommandLine({"--json", "sandbox", "ls"}).json);
  EXPECT_TRUE(ParseCommandLine({"sandbox", "--json", "ls"}).json);
  EXPECT_TRUE(ParseCommandLine({"sandbox", "ls", "--json"}).json);
  EXPECT_FALSE(ParseCommandLine({"sandbox", "exec", "s", "--", "x", "--json"}).json);
  EXPECT_TRUE(WantsJson({"sandbox", "ls", "--jsno", "--json"}));  // known even when parsing fails
  EXPECT_FALSE(WantsJson({"sandbox", "run", "--", "--json"}));
}

TEST(CliCommandLine, IdVerbs) {
  for (const char* verb : {"get", "stop", "rm"}) {
    Invocation inv = ParseCommandLine({"sandbox", verb, "sbx_9"});
    ASSERT_EQ(inv.action, Action::kVerb);
    EXPECT_EQ(inv.args.positionals, (Args{"sbx_9"}));
    EXPECT_EQ(CommandLineError({"sandbox", verb}), "missing the sandbox ID");
    EXPECT_EQ(CommandLineError({"sandbox", verb, "a", "b"}), "unexpected argument 'b'");
  }
  EXPECT_EQ(ParseCommandLine({"sandbox", "delete", "s"}).verb->name, "rm");
  EXPECT_EQ(ParseCommandLine({"sandbox", "list"}).verb->name, "ls");
}

TEST(CliCommandLine, ExecNeedsIdAndCommand) {
  Invocation inv = ParseCommandLine({"sandbox", "exec", "sbx_1", "--cwd", "/w", "--", "ls"});
  EXPECT_EQ(inv.args.positionals, (Args{"sbx_1"}));
  EXPECT_EQ(inv.args.Get("cwd"), "/w");
  EXPECT_EQ(CommandLineError({"sandbox", "exec", "sbx_1"}),
            "missing the command to run (put it after --)");
  EXPECT_EQ(CommandLineError({"sandbox", "exec", "--", "ls"}), "missing the sandbox ID");
  EXPECT_EQ(CommandLineError({"sandbox", "exec", "", "--", "ls"}), "the sandbox ID is empty");
}

TEST(CliCommandLine, RunCommandMustFollowSeparator) {
  EXPECT_EQ(CommandLineError({"sandbox", "run", "ls"}),
            "unexpected argument 'ls'; the command goes after --");
  try {
    ParseCommandLine({"sandbox", "run", "ls", "-la"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "unknown flag -la");
    EXPECT_NE(e.hint.find("goes after --"), std::string::npos);
  }
}

TEST(CliCommandLine, VerbsWithoutCommandRefuseOne) {
  EXPECT_EQ(CommandLineError({"sandbox", "ls", "--", "x"}),
            "kiln sandbox ls does not run a command");
}

TEST(CliCommandLine, UnknownFlagsAreRefusedWithSuggestion) {
  EXPECT_EQ(CommandLineError({"sandbox", "create", "--memroy", "512"}),
            "unknown flag --memroy (did you mean --memory?)");
  EXPECT_EQ(CommandLineError({"sandbox", "run", "--timeoutms", "5", "--", "x"}),
            "unknown flag --timeoutms (did you mean --timeout-ms?)");
  EXPECT_EQ(CommandLineError({"sandbox", "ls", "--al"}), "unknown flag --al (did you mean --all?)");
  // run has no --label/--name: only create does.
  EXPECT_EQ(CommandLineError({"sandbox", "run", "--name", "x", "--", "x"}), "unknown flag --name");
  try {
    ParseCommandLine({"sandbox", "create", "--bogus"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(e.hint, "see `kiln sandbox create --help`");
  }
}

TEST(CliCommandLine, UnknownWords) {
  EXPECT_EQ(CommandLineError({"sandbx"}), "unknown command 'sandbx' (did you mean sandbox?)");
  EXPECT_EQ(CommandLineError({"sandbox", "lst"}), "unknown sandbox verb 'lst' (did you mean ls?)");
  EXPECT_EQ(CommandLineError({"--jsn"}), "unknown flag --jsn (did you mean --json?)");
}

// --- flags → requests ---------------------------------------------------------

ParsedArgs VerbArgs(const Args& args) { return ParseCommandLine(args).args; }

TEST(CliRequests, CreateBody) {
  ParsedArgs a = VerbArgs({"sandbox", "create", "--vcpu", "4", "--memory", "512", "--disk=1024",
                           "--timeout", "600", "--name", "box", "--label", "team=ml", "--label",
                           "tier=", "--env", "A=1", "--env", "A=2"});
  EXPECT_EQ(SandboxCreateBody(a), json::parse(R"({
      "vcpu": 4, "memoryMiB": 512, "diskMiB": 1024, "timeoutSeconds": 600, "name": "box",
      "labels": {"team": "ml", "tier": ""}, "env": {"A": "2"}})"));
  EXPECT_EQ(SandboxCreateBody(VerbArgs({"sandbox", "create"})), json::object());
}

TEST(CliRequests, CreateBodyRefusesBadNumbers) {
  EXPECT_THROW(SandboxCreateBody(VerbArgs({"sandbox", "create", "--memory", "2GiB"})), UsageError);
  EXPECT_THROW(SandboxCreateBody(VerbArgs({"sandbox", "create", "--vcpu", "-1"})), UsageError);
  EXPECT_THROW(SandboxCreateBody(VerbArgs({"sandbox", "create", "--env", "NOEQ"})), UsageError);
}

TEST(CliRequests, ExecBody) {
  ParsedArgs a = VerbArgs({"sandbox", "exec", "s", "--cwd", "/tmp", "--env", "K=V", "--timeout-ms",
                           "1500", "--", "sh", "-c", "echo $K"});
  EXPECT_EQ(ExecBody(a, a.command, true, std::string("in\n")), json::parse(R"({
      "argv": ["sh", "-c", "echo $K"], "cwd": "/tmp", "env": {"K": "V"}, "timeoutMs": 1500,
      "stdinBase64": "aW4K", "stream": true, "outputEncoding": "base64"})"));
  EXPECT_EQ(ExecBody(a, {"x"}, false, std::nullopt),
            json::parse(R"({"argv": ["x"], "cwd": "/tmp", "env": {"K": "V"}, "timeoutMs": 1500})"));
  ParsedArgs too_long = VerbArgs({"sandbox", "exec", "s", "--timeout-ms", "86400001", "--", "x"});
  EXPECT_THROW(ExecBody(too_long, {"x"}, true, std::nullopt), UsageError);
}

TEST(CliRequests, ExecHttpTimeoutIsCommandTimeoutPlus30s) {
  EXPECT_EQ(ExecHttpTimeout(json{{"timeoutMs", 1500}}), std::chrono::milliseconds(31500));
  EXPECT_EQ(ExecHttpTimeout(json::object()), std::chrono::milliseconds(90000));
}

TEST(CliRequests, ListTarget) {
  EXPECT_EQ(ListTarget(VerbArgs({"sandbox", "ls"}), std::nullopt), "/v1/sandboxes");
  EXPECT_EQ(ListTarget(VerbArgs({"sandbox", "ls", "--all", "--state", "stopped", "--label",
                                 "team=ml", "--label", "a=b c"}),
                       std::string("c2")),
            "/v1/sandboxes?includeStopped=true&state=stopped&label=team%3Aml&label=a%3Ab%20c"
            "&cursor=c2");
}

}  // namespace
}  // namespace cli_args_test
}  // namespace kiln::cli
