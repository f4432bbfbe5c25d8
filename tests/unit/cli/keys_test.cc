// kiln CLI: `kiln keys …` parsing and requests, and which API key kiln sends.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli/cli.h"
#include "cli/context.h"
#include "cli/errors.h"
#include "cli/requests.h"
#include "cli/url.h"
#include "fakes/fake_daemon.h"
#include "unit/cli/cli_test_util.h"
#include "unit/support/temp_dir.h"

namespace kiln::cli {
namespace cli_keys_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Args = std::vector<std::string>;

using testutil::CliRun;
using testutil::CommandLineError;
using testutil::RunCaptured;
using testutil::TempDir;
using testutil::VerbArgs;

// --- command line -----------------------------------------------------------

TEST(CliKeys, Help) {
  Invocation inv = ParseCommandLine({"--help"});
  EXPECT_NE(inv.help.find("keys VERB"), std::string::npos);
  EXPECT_NE(inv.help.find("RUNTIME_API_KEY"), std::string::npos);
  EXPECT_NE(inv.help.find("KILN_ADMIN_KEY_FILE"), std::string::npos);
  EXPECT_NE(inv.help.find("/var/lib/kiln/admin.key"), std::string::npos);

  inv = ParseCommandLine({"keys", "--help"});
  EXPECT_EQ(inv.action, Action::kHelp);
  EXPECT_FALSE(inv.help_is_error);
  EXPECT_NE(inv.help.find("Usage: kiln keys VERB"), std::string::npos);
  EXPECT_NE(inv.help.find("revoke ID"), std::string::npos);
  EXPECT_NE(inv.help.find("--daily-limit-micros"), std::string::npos);
  EXPECT_TRUE(ParseCommandLine({"keys"}).help_is_error);

  inv = ParseCommandLine({"keys", "create", "--help"});
  EXPECT_NE(inv.help.find("Usage: kiln keys create"), std::string::npos);
  EXPECT_NE(inv.help.find("--admin"), std::string::npos);

  // The sandbox help is unchanged by the second group.
  inv = ParseCommandLine({"sandbox", "rm", "--help"});
  EXPECT_NE(inv.help.find("Usage: kiln sandbox rm ID"), std::string::npos);
}

TEST(CliKeys, Verbs) {
  Invocation inv = ParseCommandLine(
      {"keys", "create", "--name", "ci", "--daily-limit-micros", "5000", "--admin", "--json"});
  ASSERT_EQ(inv.action, Action::kVerb);
  EXPECT_EQ(inv.group, &KeysGroup());
  EXPECT_EQ(inv.verb->name, "create");
  EXPECT_TRUE(inv.json);
  EXPECT_EQ(inv.args.Get("name"), "ci");
  EXPECT_TRUE(inv.args.Has("admin"));

  inv = ParseCommandLine({"keys", "ls"});
  EXPECT_EQ(inv.verb->name, "ls");
  EXPECT_EQ(ParseCommandLine({"keys", "list"}).verb->name, "ls");
  EXPECT_TRUE(ParseCommandLine({"--json", "keys", "ls"}).json);

  inv = ParseCommandLine({"keys", "revoke", "key_0123"});
  EXPECT_EQ(inv.verb->name, "revoke");
  EXPECT_EQ(inv.args.positionals, (Args{"key_0123"}));

  // `sandbox create` is still the sandbox one.
  inv = ParseCommandLine({"sandbox", "create"});
  EXPECT_EQ(inv.group, &SandboxGroup());
  EXPECT_EQ(Synopsis(*inv.verb), "create [OPTIONS]");
}

TEST(CliKeys, UsageErrors) {
  EXPECT_EQ(CommandLineError({"keys", "revoke"}), "missing the key ID");
  EXPECT_EQ(CommandLineError({"keys", "revoke", ""}), "the key ID is empty");
  EXPECT_EQ(CommandLineError({"keys", "revoke", "a", "b"}), "unexpected argument 'b'");
  EXPECT_EQ(CommandLineError({"keys", "ls", "x"}), "unexpected argument 'x'");
  EXPECT_EQ(CommandLineError({"keys", "ls", "--", "x"}), "kiln keys ls does not run a command");
  EXPECT_EQ(CommandLineError({"keys", "revok", "k"}),
            "unknown keys verb 'revok' (did you mean revoke?)");
  EXPECT_EQ(CommandLineError({"keys", "create", "--admn"}),
            "unknown flag --admn (did you mean --admin?)");
  EXPECT_EQ(CommandLineError({"keys", "create", "--admin=yes"}), "--admin takes no value");
  EXPECT_EQ(CommandLineError({"key", "ls"}), "unknown command 'key' (did you mean keys?)");
  try {
    ParseCommandLine({"keys", "revoke"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(e.hint, "see `kiln keys revoke --help`");
  }
  // The sandbox messages keep naming the sandbox.
  EXPECT_EQ(CommandLineError({"sandbox", "get"}), "missing the sandbox ID");
}

// --- flags → requests ---------------------------------------------------------

TEST(CliKeys, CreateBody) {
  EXPECT_EQ(KeyCreateBody(
                VerbArgs({"keys", "create", "--name", "ci", "--daily-limit-micros=0", "--admin"})),
            json::parse(R"({"name": "ci", "dailyLimitMicros": 0, "admin": true})"));
  EXPECT_EQ(KeyCreateBody(VerbArgs({"keys", "create"})), json::object());
  EXPECT_EQ(KeyCreateBody(VerbArgs({"keys", "create", "--daily-limit-micros",
                                    "9223372036854775807"}))["dailyLimitMicros"],
            INT64_MAX);
  for (const char* bad : {"-1", "1.5", "5k", "", "9223372036854775808"}) {
    EXPECT_THROW(KeyCreateBody(VerbArgs({"keys", "create", "--daily-limit-micros", bad})),
                 UsageError)
        << bad;
  }
}

TEST(CliKeys, Target) {
  EXPECT_EQ(KeyTarget("key_1", ":revoke"), "/v1/keys/key_1:revoke");
  EXPECT_EQ(KeyTarget("../sandboxes", ":revoke"), "/v1/keys/..%2Fsandboxes:revoke");
}

// --- which key is sent --------------------------------------------------------

TEST(CliKeySelection, Order) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string file = dir.Write("admin.key", "kiln_fromfile\n");
  EXPECT_EQ(SelectApiKey("k1", "r1", file.c_str()), "k1");
  EXPECT_EQ(SelectApiKey("", "r1", file.c_str()), "r1");
  EXPECT_EQ(SelectApiKey(nullptr, "r1", file.c_str()), "r1");
  EXPECT_EQ(SelectApiKey(nullptr, "", file.c_str()), "kiln_fromfile");
  EXPECT_EQ(SelectApiKey(nullptr, nullptr, file.c_str()), "kiln_fromfile");
  const std::string missing = dir.path() + "/none.key";
  EXPECT_EQ(SelectApiKey(nullptr, nullptr, missing.c_str()), std::nullopt);
  EXPECT_EQ(SelectApiKey("k1", nullptr, missing.c_str()), "k1");
}

TEST(CliKeySelection, DefaultFile) {
  // Unset or empty KILN_ADMIN_KEY_FILE means the daemon's default file.
  EXPECT_EQ(SelectApiKey(nullptr, nullptr, nullptr),
            ReadKeyFile(std::string(kDefaultAdminKeyFile)));
  EXPECT_EQ(SelectApiKey(nullptr, nullptr, ""), ReadKeyFile(std::string(kDefaultAdminKeyFile)));
}

TEST(CliKeySelection, KeyFileContent) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  EXPECT_EQ(ReadKeyFile(dir.Write("a", "kiln_abc")), "kiln_abc");
  EXPECT_EQ(ReadKeyFile(dir.Write("b", "  kiln_abc \r\nsecond line\n")), "kiln_abc");
  EXPECT_EQ(ReadKeyFile(dir.Write("c", "")), std::nullopt);
  EXPECT_EQ(ReadKeyFile(dir.Write("d", " \n")), std::nullopt);
  EXPECT_EQ(ReadKeyFile(dir.Write("e", "two words\n")), std::nullopt);
  EXPECT_EQ(ReadKeyFile(dir.Write("f", std::string("kiln_\x01x"))), std::nullopt);
  EXPECT_EQ(ReadKeyFile(dir.Write("g", "kiln_\xc3\xa9")), std::nullopt);
  EXPECT_EQ(ReadKeyFile(dir.path()), std::nullopt);  // a directory
  EXPECT_EQ(ReadKeyFile(dir.path() + "/nothing"), std::nullopt);
  // A FIFO must not hang kiln.
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(ReadKeyFile(fifo), std::nullopt);
}

// --- the commands against a canned daemon -------------------------------------

using testutil::CannedServer;

// Sets environment variables for one test and restores them afterwards.
class ScopedEnv {
 public:
  void Set(const char* name, const char* value) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

const std::string kKeyJson =
    R"({"id": "key_00ff", "name": "ci", "admin": false, "dailyLimitMicros": 5000,
        "createdAt": "2026-11-29T10:00:00.000Z", "revokedAt": null)";

TEST(CliKeysCommands, CreateListRevoke) {
  CannedServer server({
      {201, kKeyJson + R"(, "secret": "kiln_s3cret"})"},
      {200, R"({"data": [)" + kKeyJson + "}]}"},
      {200, R"({"id": "key_00ff", "revokedAt": "2026-11-29T11:00:00.000Z"})"},
  });
  TempDir dir;
  const std::string key_file = dir.Write("admin.key", "kiln_local\n");
  ScopedEnv env;
  env.Set("KILN_API_URL", server.url().c_str());
  env.Set("KILN_API_KEY", nullptr);
  env.Set("RUNTIME_API_KEY", nullptr);
  env.Set("KILN_ADMIN_KEY_FILE", key_file.c_str());

  CliRun r = RunCaptured({"keys", "create", "--name", "ci", "--daily-limit-micros", "5000"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "id:     key_00ff\nsecret: kiln_s3cret\n");
  EXPECT_NE(r.err.find("only this once"), std::string::npos);

  r = RunCaptured({"keys", "ls"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("ID"), std::string::npos);
  EXPECT_NE(r.out.find("key_00ff  ci"), std::string::npos);
  EXPECT_NE(r.out.find("5000"), std::string::npos);
  EXPECT_EQ(r.out.find("s3cret"), std::string::npos);

  r = RunCaptured({"keys", "revoke", "key_00ff", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["revokedAt"], "2026-11-29T11:00:00.000Z");

  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_TRUE(reqs[0].starts_with("POST /v1/keys HTTP/1.1\r\n")) << reqs[0];
  EXPECT_NE(reqs[0].find(R"({"dailyLimitMicros":5000,"name":"ci"})"), std::string::npos);
  EXPECT_TRUE(reqs[1].starts_with("GET /v1/keys HTTP/1.1\r\n")) << reqs[1];
  EXPECT_TRUE(reqs[2].starts_with("POST /v1/keys/key_00ff:revoke HTTP/1.1\r\n")) << reqs[2];
  for (const auto& req : reqs) {
    // No KILN_API_KEY / RUNTIME_API_KEY: the local admin key file's key.
    EXPECT_NE(req.find("Bearer kiln_local\r\n"), std::string::npos) << req;
  }
}

TEST(CliKeysCommands, EnvironmentKeyWinsAndErrorsAreReported) {
  CannedServer server({
      {201, kKeyJson + R"(, "secret": "kiln_s3cret"})"},
  });
  ScopedEnv env;
  env.Set("KILN_API_URL", server.url().c_str());
  env.Set("KILN_API_KEY", nullptr);
  env.Set("RUNTIME_API_KEY", "kiln_runtime");
  env.Set("KILN_ADMIN_KEY_FILE", "/nonexistent/admin.key");

  CliRun r = RunCaptured({"keys", "create", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["secret"], "kiln_s3cret");  // the full answer
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_NE(server.requests()[0].find("Bearer kiln_runtime\r\n"), std::string::npos);
}

TEST(CliKeysCommands, ForbiddenIsAnError) {
  CannedServer server({
      {403, R"({"error": {"code": "forbidden", "status": 403, "message": "needs an admin key"}})"},
  });
  ScopedEnv env;
  env.Set("KILN_API_URL", server.url().c_str());
  env.Set("KILN_API_KEY", "kiln_plain");

  CliRun r = RunCaptured({"keys", "ls"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "kiln: forbidden: needs an admin key\n");
}

}  // namespace
}  // namespace cli_keys_test
}  // namespace kiln::cli
