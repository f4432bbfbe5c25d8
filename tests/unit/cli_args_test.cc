// kiln CLI: flag parsing, verb dispatch, daemon URL and flag→request mapping.
#include <gtest/gtest.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/context.h"
#include "cli/errors.h"
#include "cli/requests.h"
#include "cli/url.h"
#include "cli_test_util.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
using Args = std::vector<std::string>;

const std::vector<FlagSpec> kSpecs = {
    {"vcpu", true, false}, {"memory", true, false}, {"env", true, true},
    {"all", false, false}, {"json", false, false},  {"help", false, false},
};

std::string usage_message(const Args& args, const std::vector<FlagSpec>& specs = kSpecs) {
  try {
    parse_args(args, specs);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

using testutil::command_line_error;

// --- parse_args -------------------------------------------------------------

TEST(CliArgs, SpaceAndEqualsForms) {
  ParsedArgs a = parse_args({"--vcpu", "4", "--memory=512"}, kSpecs);
  EXPECT_EQ(a.get("vcpu"), "4");
  EXPECT_EQ(a.get("memory"), "512");
  EXPECT_FALSE(a.get("all"));
}

TEST(CliArgs, EqualsKeepsTheRestOfTheValue) {
  ParsedArgs a = parse_args({"--env=A=b=c", "--env", "X="}, kSpecs);
  EXPECT_EQ(a.all("env"), (Args{"A=b=c", "X="}));
}

TEST(CliArgs, RepeatedFlagsKeepOrder) {
  ParsedArgs a = parse_args({"--env", "A=1", "--env", "B=2", "--env=C=3"}, kSpecs);
  EXPECT_EQ(a.all("env"), (Args{"A=1", "B=2", "C=3"}));
}

TEST(CliArgs, SingleValuedFlagGivenTwiceIsRefused) {
  EXPECT_EQ(usage_message({"--vcpu", "1", "--vcpu", "2"}), "--vcpu given more than once");
}

TEST(CliArgs, BooleanFlags) {
  ParsedArgs a = parse_args({"--all", "--json"}, kSpecs);
  EXPECT_TRUE(a.has("all"));
  EXPECT_TRUE(a.has("json"));
  EXPECT_EQ(usage_message({"--all=yes"}), "--all takes no value");
}

TEST(CliArgs, SeparatorEndsFlags) {
  ParsedArgs a = parse_args({"--vcpu", "2", "--", "ls", "--all", "-la", "--"}, kSpecs);
  EXPECT_TRUE(a.has_separator);
  EXPECT_EQ(a.command, (Args{"ls", "--all", "-la", "--"}));
  EXPECT_FALSE(a.has("all"));  // belongs to the command
}

TEST(CliArgs, EmptyCommandAfterSeparator) {
  ParsedArgs a = parse_args({"--"}, kSpecs);
  EXPECT_TRUE(a.has_separator);
  EXPECT_TRUE(a.command.empty());
}

TEST(CliArgs, PositionalsMixWithFlags) {
  ParsedArgs a = parse_args({"sbx_1", "--all", "-", "x"}, kSpecs);
  EXPECT_EQ(a.positionals, (Args{"sbx_1", "-", "x"}));
}

TEST(CliArgs, MissingValue) {
  EXPECT_EQ(usage_message({"--vcpu"}), "--vcpu needs a value");
  // "--" is never swallowed as a value.
  EXPECT_EQ(usage_message({"--vcpu", "--", "ls"}), "--vcpu needs a value");
}

TEST(CliArgs, ValueMayLookLikeAFlag) {
  ParsedArgs a = parse_args({"--env", "--weird=1"}, kSpecs);
  EXPECT_EQ(a.all("env"), (Args{"--weird=1"}));
}

TEST(CliArgs, UnknownFlagIsNamedWithSuggestion) {
  EXPECT_EQ(usage_message({"--memroy", "2"}), "unknown flag --memroy (did you mean --memory?)");
  EXPECT_EQ(usage_message({"--mem=2"}), "unknown flag --mem (did you mean --memory?)");
  EXPECT_EQ(usage_message({"--frobnicate"}), "unknown flag --frobnicate");
  EXPECT_EQ(usage_message({"-la"}), "unknown flag -la");
}

TEST(CliArgs, DashHIsHelp) { EXPECT_TRUE(parse_args({"-h"}, kSpecs).has("help")); }

TEST(CliArgs, Suggest) {
  const Args flags = {"vcpu", "memory", "disk", "timeout-ms", "env", "cwd"};
  EXPECT_EQ(suggest("memroy", flags), "memory");  // swapped letters
  EXPECT_EQ(suggest("vpcu", flags), "vcpu");
  EXPECT_EQ(suggest("timeout", flags), "timeout-ms");  // prefix
  EXPECT_EQ(suggest("dsk", flags), "disk");
  EXPECT_EQ(suggest("xyzzy", flags), std::nullopt);
  EXPECT_EQ(suggest("", flags), std::nullopt);
}

TEST(CliArgs, EditDistance) {
  EXPECT_EQ(edit_distance("memory", "memory"), 0u);
  EXPECT_EQ(edit_distance("memroy", "memory"), 1u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(CliArgs, SplitKeyValue) {
  EXPECT_EQ(split_key_value("--env", "A=1"), (std::pair<std::string, std::string>{"A", "1"}));
  EXPECT_EQ(split_key_value("--env", "A="), (std::pair<std::string, std::string>{"A", ""}));
  EXPECT_EQ(split_key_value("--env", "A=b=c").second, "b=c");
  EXPECT_THROW(split_key_value("--env", "A"), UsageError);
  EXPECT_THROW(split_key_value("--env", "=1"), UsageError);
}

TEST(CliArgs, ParseInt) {
  EXPECT_EQ(parse_int("--vcpu", "4", 1, 16), 4);
  EXPECT_THROW(parse_int("--vcpu", "four", 1, 16), UsageError);
  EXPECT_THROW(parse_int("--vcpu", "4x", 1, 16), UsageError);
  EXPECT_THROW(parse_int("--vcpu", "", 1, 16), UsageError);
  EXPECT_THROW(parse_int("--vcpu", "0", 1, 16), UsageError);
  EXPECT_THROW(parse_int("--vcpu", "99999999999999999999", 1, 16), UsageError);
  try {
    parse_int("--memory", "2G", 1, 100);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--memory expects a whole number, got '2G'");
  }
}

// --- daemon URL -------------------------------------------------------------

TEST(CliUrl, Default) {
  ApiUrl u = parse_api_url(kDefaultApiUrl);
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, "7070");
  EXPECT_EQ(u.base_path, "");
  EXPECT_EQ(u.display, "http://127.0.0.1:7070");
  EXPECT_EQ(u.host_header(), "127.0.0.1:7070");
}

TEST(CliUrl, Variants) {
  EXPECT_EQ(parse_api_url("http://localhost").port, "80");
  EXPECT_EQ(parse_api_url("HTTP://h:8080/").base_path, "");
  EXPECT_EQ(parse_api_url("127.0.0.1:9000").port, "9000");  // scheme optional
  ApiUrl prefixed = parse_api_url("http://proxy:80/kiln/");
  EXPECT_EQ(prefixed.base_path, "/kiln");
  EXPECT_EQ(prefixed.display, "http://proxy:80/kiln");
  ApiUrl v6 = parse_api_url("http://[::1]:7070");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.host_header(), "[::1]:7070");
}

TEST(CliUrl, Refused) {
  for (const char* bad :
       {"https://h:7070", "ftp://h", "http://:7070", "http://h:0", "http://h:70000",
        "http://h:12ab", "http://u:p@h:1", "http://h/?q=1", "http://::1:7070", "http://[::1"}) {
    EXPECT_THROW(parse_api_url(bad), UsageError) << bad;
  }
}

TEST(CliUrl, PercentEncode) {
  EXPECT_EQ(percent_encode("abc-._~XYZ09"), "abc-._~XYZ09");
  EXPECT_EQ(percent_encode("a b/c:d&e=f"), "a%20b%2Fc%3Ad%26e%3Df");
  EXPECT_EQ(percent_encode("\xc3\xa9"), "%C3%A9");
}

TEST(CliUrl, Query) {
  EXPECT_EQ(Query().str(), "");
  EXPECT_EQ(Query().add("a", "1").add("label", "k:v").add("label", "x y").str(),
            "?a=1&label=k%3Av&label=x%20y");
}

TEST(CliUrl, SandboxTargetEncodesTheId) {
  EXPECT_EQ(sandbox_target("sbx_1"), "/v1/sandboxes/sbx_1");
  EXPECT_EQ(sandbox_target("sbx_1", ":stop"), "/v1/sandboxes/sbx_1:stop");
  EXPECT_EQ(sandbox_target("../health"), "/v1/sandboxes/..%2Fhealth");
}

TEST(CliUrl, ConfigFromEnv) {
  ClientConfig c = config_from_env(nullptr, nullptr);
  EXPECT_EQ(c.url.display, "http://127.0.0.1:7070");
  EXPECT_FALSE(c.api_key);
  c = config_from_env("", "");
  EXPECT_EQ(c.url.display, "http://127.0.0.1:7070");
  EXPECT_FALSE(c.api_key);
  c = config_from_env("http://10.0.0.2:8000", "key123");
  EXPECT_EQ(c.url.display, "http://10.0.0.2:8000");
  EXPECT_EQ(c.api_key, "key123");
  EXPECT_THROW(config_from_env("https://x", nullptr), UsageError);
}

// --- command line -----------------------------------------------------------

TEST(CliCommandLine, Help) {
  Invocation inv = parse_command_line({"--help"});
  EXPECT_EQ(inv.action, Action::kHelp);
  EXPECT_FALSE(inv.help_is_error);
  EXPECT_NE(inv.help.find("kiln sandbox run"), std::string::npos);
  EXPECT_NE(inv.help.find("KILN_API_URL"), std::string::npos);

  inv = parse_command_line({});
  EXPECT_EQ(inv.action, Action::kHelp);
  EXPECT_TRUE(inv.help_is_error);

  inv = parse_command_line({"sandbox", "--help"});
  EXPECT_EQ(inv.action, Action::kHelp);
  EXPECT_NE(inv.help.find("exec ID"), std::string::npos);

  inv = parse_command_line({"sandbox"});
  EXPECT_TRUE(inv.help_is_error);
}

TEST(CliCommandLine, VerbHelpWinsOverBadFlags) {
  Invocation inv = parse_command_line({"sandbox", "run", "--memroy", "1", "--help"});
  EXPECT_EQ(inv.action, Action::kHelp);
  EXPECT_NE(inv.help.find("--timeout-ms"), std::string::npos);
  // After "--" it belongs to the command.
  inv = parse_command_line({"sandbox", "run", "--", "ls", "--help"});
  EXPECT_EQ(inv.action, Action::kVerb);
  EXPECT_EQ(inv.args.command, (Args{"ls", "--help"}));
}

TEST(CliCommandLine, Server) {
  Invocation inv = parse_command_line({"server", "--port", "1", "--json"});
  EXPECT_EQ(inv.action, Action::kServer);
  EXPECT_EQ(inv.server_args, (Args{"--port", "1", "--json"}));
}

TEST(CliCommandLine, Version) {
  EXPECT_EQ(parse_command_line({"--version"}).action, Action::kVersion);
}

TEST(CliCommandLine, Run) {
  Invocation inv = parse_command_line(
      {"sandbox", "run", "--vcpu", "2", "--env", "A=1", "--json", "--", "python3", "-c", "x"});
  ASSERT_EQ(inv.action, Action::kVerb);
  EXPECT_EQ(inv.verb->name, "run");
  EXPECT_TRUE(inv.json);
  EXPECT_EQ(inv.args.command, (Args{"python3", "-c", "x"}));
}

TEST(CliCommandLine, JsonFlagPlacement) {
  EXPECT_TRUE(parse_command_line({"--json", "sandbox", "ls"}).json);
  EXPECT_TRUE(parse_command_line({"sandbox", "--json", "ls"}).json);
  EXPECT_TRUE(parse_command_line({"sandbox", "ls", "--json"}).json);
  EXPECT_FALSE(parse_command_line({"sandbox", "exec", "s", "--", "x", "--json"}).json);
  EXPECT_TRUE(wants_json({"sandbox", "ls", "--jsno", "--json"}));  // known even when parsing fails
  EXPECT_FALSE(wants_json({"sandbox", "run", "--", "--json"}));
}

TEST(CliCommandLine, IdVerbs) {
  for (const char* verb : {"get", "stop", "rm"}) {
    Invocation inv = parse_command_line({"sandbox", verb, "sbx_9"});
    ASSERT_EQ(inv.action, Action::kVerb);
    EXPECT_EQ(inv.args.positionals, (Args{"sbx_9"}));
    EXPECT_EQ(command_line_error({"sandbox", verb}), "missing the sandbox ID");
    EXPECT_EQ(command_line_error({"sandbox", verb, "a", "b"}), "unexpected argument 'b'");
  }
  EXPECT_EQ(parse_command_line({"sandbox", "delete", "s"}).verb->name, "rm");
  EXPECT_EQ(parse_command_line({"sandbox", "list"}).verb->name, "ls");
}

TEST(CliCommandLine, ExecNeedsIdAndCommand) {
  Invocation inv = parse_command_line({"sandbox", "exec", "sbx_1", "--cwd", "/w", "--", "ls"});
  EXPECT_EQ(inv.args.positionals, (Args{"sbx_1"}));
  EXPECT_EQ(inv.args.get("cwd"), "/w");
  EXPECT_EQ(command_line_error({"sandbox", "exec", "sbx_1"}),
            "missing the command to run (put it after --)");
  EXPECT_EQ(command_line_error({"sandbox", "exec", "--", "ls"}), "missing the sandbox ID");
  EXPECT_EQ(command_line_error({"sandbox", "exec", "", "--", "ls"}), "the sandbox ID is empty");
}

TEST(CliCommandLine, RunCommandMustFollowSeparator) {
  EXPECT_EQ(command_line_error({"sandbox", "run", "ls"}),
            "unexpected argument 'ls'; the command goes after --");
  try {
    parse_command_line({"sandbox", "run", "ls", "-la"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "unknown flag -la");
    EXPECT_NE(e.hint.find("goes after --"), std::string::npos);
  }
}

TEST(CliCommandLine, VerbsWithoutCommandRefuseOne) {
  EXPECT_EQ(command_line_error({"sandbox", "ls", "--", "x"}),
            "kiln sandbox ls does not run a command");
}

TEST(CliCommandLine, UnknownFlagsAreRefusedWithSuggestion) {
  EXPECT_EQ(command_line_error({"sandbox", "create", "--memroy", "512"}),
            "unknown flag --memroy (did you mean --memory?)");
  EXPECT_EQ(command_line_error({"sandbox", "run", "--timeout", "5", "--", "x"}),
            "unknown flag --timeout (did you mean --timeout-ms?)");
  EXPECT_EQ(command_line_error({"sandbox", "ls", "--al"}),
            "unknown flag --al (did you mean --all?)");
  // run has no --label/--name: only create does.
  EXPECT_EQ(command_line_error({"sandbox", "run", "--name", "x", "--", "x"}),
            "unknown flag --name");
  try {
    parse_command_line({"sandbox", "create", "--bogus"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(e.hint, "see `kiln sandbox create --help`");
  }
}

TEST(CliCommandLine, UnknownWords) {
  EXPECT_EQ(command_line_error({"sandbx"}), "unknown command 'sandbx' (did you mean sandbox?)");
  EXPECT_EQ(command_line_error({"sandbox", "lst"}),
            "unknown sandbox verb 'lst' (did you mean ls?)");
  EXPECT_EQ(command_line_error({"--jsn"}), "unknown flag --jsn (did you mean --json?)");
}

// --- flags → requests ---------------------------------------------------------

ParsedArgs verb_args(const Args& args) { return parse_command_line(args).args; }

TEST(CliRequests, CreateBody) {
  ParsedArgs a = verb_args({"sandbox", "create", "--vcpu", "4", "--memory", "512", "--disk=1024",
                            "--timeout", "600", "--name", "box", "--label", "team=ml", "--label",
                            "tier=", "--env", "A=1", "--env", "A=2"});
  EXPECT_EQ(sandbox_create_body(a), json::parse(R"({
      "vcpu": 4, "memoryMiB": 512, "diskMiB": 1024, "timeoutSeconds": 600, "name": "box",
      "labels": {"team": "ml", "tier": ""}, "env": {"A": "2"}})"));
  EXPECT_EQ(sandbox_create_body(verb_args({"sandbox", "create"})), json::object());
}

TEST(CliRequests, CreateBodyRefusesBadNumbers) {
  EXPECT_THROW(sandbox_create_body(verb_args({"sandbox", "create", "--memory", "2GiB"})),
               UsageError);
  EXPECT_THROW(sandbox_create_body(verb_args({"sandbox", "create", "--vcpu", "-1"})), UsageError);
  EXPECT_THROW(sandbox_create_body(verb_args({"sandbox", "create", "--env", "NOEQ"})), UsageError);
}

TEST(CliRequests, ExecBody) {
  ParsedArgs a = verb_args({"sandbox", "exec", "s", "--cwd", "/tmp", "--env", "K=V", "--timeout-ms",
                            "1500", "--", "sh", "-c", "echo $K"});
  EXPECT_EQ(exec_body(a, a.command, true, std::string("in\n")), json::parse(R"({
      "argv": ["sh", "-c", "echo $K"], "cwd": "/tmp", "env": {"K": "V"}, "timeoutMs": 1500,
      "stdinBase64": "aW4K", "stream": true, "outputEncoding": "base64"})"));
  EXPECT_EQ(exec_body(a, {"x"}, false, std::nullopt),
            json::parse(R"({"argv": ["x"], "cwd": "/tmp", "env": {"K": "V"}, "timeoutMs": 1500})"));
  ParsedArgs too_long = verb_args({"sandbox", "exec", "s", "--timeout-ms", "86400001", "--", "x"});
  EXPECT_THROW(exec_body(too_long, {"x"}, true, std::nullopt), UsageError);
}

TEST(CliRequests, ExecHttpTimeoutIsCommandTimeoutPlus30s) {
  EXPECT_EQ(exec_http_timeout(json{{"timeoutMs", 1500}}), std::chrono::milliseconds(31500));
  EXPECT_EQ(exec_http_timeout(json::object()), std::chrono::milliseconds(90000));
}

TEST(CliRequests, ListTarget) {
  EXPECT_EQ(list_target(verb_args({"sandbox", "ls"}), std::nullopt), "/v1/sandboxes");
  EXPECT_EQ(list_target(verb_args({"sandbox", "ls", "--all", "--state", "stopped", "--label",
                                   "team=ml", "--label", "a=b c"}),
                        std::string("c2")),
            "/v1/sandboxes?includeStopped=true&state=stopped&label=team%3Aml&label=a%3Ab%20c"
            "&cursor=c2");
}

}  // namespace
}  // namespace kiln::cli
