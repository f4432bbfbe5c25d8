// kiln CLI: `kiln completion bash` — the script covers the whole command
// table, the committed copy is current, and bash completes with it.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli/cli.h"
#include "cli/completion.h"
#include "unit/support/temp_dir.h"

namespace kiln::cli {
namespace cli_completion_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string Slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The repository root, from this file's path, tests/unit/cli/completion_test.cc
// (CMake compiles absolute paths).
fs::path RepoRoot() {
  fs::path root = fs::path(__FILE__);
  for (int up = 0; up < 4; ++up) root = root.parent_path();
  return root;
}

TEST(CliCompletion, CoversTheCommandTable) {
  const std::string script = BashCompletionScript();
  EXPECT_TRUE(script.starts_with("# bash completion for kiln."));
  EXPECT_TRUE(script.ends_with("complete -F _kiln kiln\n"));
  auto has = [&](const std::string& text) { return script.find(text) != std::string::npos; };
  for (const auto& c : Commands()) {
    EXPECT_TRUE(has(" " + std::string(c.name) + " ") || has(" " + std::string(c.name) + "\""))
        << c.name;
    const std::vector<Verb>* verbs = c.group ? &c.group->verbs() : nullptr;
    std::vector<Verb> single;
    if (c.verb) single.push_back(*c.verb);
    for (const auto& v : verbs ? *verbs : single) {
      const std::string path =
          c.group ? std::string(c.name) + " " + std::string(v.name) : std::string(v.name);
      EXPECT_TRUE(has("\"" + path + "\"")) << path;
      for (const auto& f : v.flags) EXPECT_TRUE(has("--" + f.name)) << path << " --" << f.name;
    }
  }
  EXPECT_TRUE(has("\"sandbox ls\"|\"sandbox list\""));  // aliases complete flags too
  EXPECT_TRUE(has("starting running stopping stopped"));
  EXPECT_TRUE(has("key label:"));
}

TEST(CliCompletion, CommittedScriptIsCurrent) {
  const fs::path committed = RepoRoot() / "scripts" / "kiln-completion.bash";
  ASSERT_TRUE(fs::exists(committed)) << committed;
  EXPECT_EQ(Slurp(committed), BashCompletionScript())
      << "regenerate it: kiln completion bash > scripts/kiln-completion.bash";
}

struct Captured {
  int status;
  std::string out;
};
Captured RunStdout(const std::vector<std::string>& args) {
  const testutil::TempDir tmp("kiln-cli-completion");
  const fs::path path = tmp / "stdout";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int saved = ::dup(STDOUT_FILENO);
  ::dup2(fd, STDOUT_FILENO);
  int status = RunCli(args);
  ::dup2(saved, STDOUT_FILENO);
  ::close(fd);
  ::close(saved);
  return Captured{status, Slurp(path)};
}

TEST(CliCompletion, Command) {
  Captured c = RunStdout({"completion", "bash"});
  EXPECT_EQ(c.status, 0);
  EXPECT_EQ(c.out, BashCompletionScript());
  c = RunStdout({"completion", "bash", "--json"});
  EXPECT_EQ(c.status, 0);
  EXPECT_EQ(json::parse(c.out), (json{{"shell", "bash"}, {"script", BashCompletionScript()}}));
}

// What bash offers for a command line ("" = the word being completed is empty).
TEST(CliCompletion, BashCompletes) {
  if (::access("/bin/bash", X_OK) != 0) GTEST_SKIP() << "no bash";
  const testutil::TempDir tmp("kiln-cli-bash");
  const fs::path dir = tmp.path();
  std::ofstream(dir / "kiln.bash") << BashCompletionScript();
  std::ofstream(dir / "stdin.txt") << "";
  std::ofstream(dir / "test.sh") << "source " << (dir / "kiln.bash") << R"(
t() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _kiln; echo "${COMPREPLY[*]}"; }
t kiln ""
t kiln sn
t kiln --json sandbox ex
t kiln sandbox fork sbx_1 --k
t kiln sandbox ls --state r
t kiln sandbox list --state =
t kiln sandbox ls --state = st
t kiln usage --group-by ""
t kiln completion ""
t kiln completion bash ""
t kiln sandbox run -- ""
t kiln snapshot delete snp_1 --j
t kiln server --
t kiln sandbox get ""
t kiln keys ""
t kiln sandbox ne
t kiln sandbox network s --internet ""
t kiln sandbox create --allow x --i
cd )" << dir << R"( && t kiln sandbox exec s --stdin-file std
)";
  const std::string command = "/bin/bash --norc --noprofile " + (dir / "test.sh").string();
  FILE* p = ::popen(command.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0);
  EXPECT_EQ(out,
            "server sandbox snapshot image keys usage completion\n"
            "snapshot\n"
            "exec extend\n"
            "--keep-snapshot\n"
            "running\n"
            "starting running stopping stopped\n"
            "starting stopping stopped\n"
            "key label:\n"
            "bash\n"
            "\n"
            "\n"
            "--json\n"
            "\n"
            "\n"
            "create ls revoke\n"
            "network\n"
            "on off\n"
            "--image --idle-pause --internet\n"
            "stdin.txt\n");
}

}  // namespace
}  // namespace cli_completion_test
}  // namespace kiln::cli
