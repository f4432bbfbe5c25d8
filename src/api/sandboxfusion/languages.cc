// The languages SandboxFusion names, and how kiln's image runs each: the
// program's file, a compile step, a run step. The command lines follow
// SandboxFusion's runners (sandbox/runners/major.py, minor.py) so a program
// passes or fails as it does there; where a tool differs (Debian's), the
// entry says so.
#include <regex>

#include "api/sandboxfusion/sandboxfusion.h"

namespace kiln::api::sandboxfusion {

namespace {

using MR = MemoryRule;

constexpr const char* kNoGpu = "kiln's gVisor sandboxes have no GPU";

// SandboxFusion's Language literal, in its order.
const std::vector<Language>& Table() {
  static const std::vector<Language> table = {
      {"python", "main.py", "", "python3 main.py", "python3", MR::kAddressSpace, true, ""},
      {"cpp", "main.cpp", "g++ -std=c++17 main.cpp -o test -lpthread", "./test", "g++",
       MR::kAddressSpace, true, ""},
      {"nodejs", "main.js", "", "node {node} main.js", "node", MR::kNode, true, ""},
      {"go", "main.go", "go build -o out main.go", "./out", "go", MR::kGo, true, ""},
      {"go_test", "main_test.go", "", "go test main_test.go", "go", MR::kGo, true, ""},
      {"java", "Main.java", "javac -encoding UTF-8 Main.java", "java {jvm} -ea Main", "javac",
       MR::kJvm, true, ""},
      {"php", "main.php", "", "php -f main.php", "php", MR::kAddressSpace, false, ""},
      // Mono's compiler and runtime (Debian has no .NET SDK): a compile
      // error is a compile step's failure here, where dotnet run folds it
      // into the run.
      {"csharp", "main.cs", "mcs -out:main.exe main.cs", "mono main.exe", "mcs", MR::kNone, false,
       ""},
      {"bash", "main.sh", "", "/bin/bash main.sh", "bash", MR::kAddressSpace, true, ""},
      // Debian's tsc (SandboxFusion runs tsx): emitted even past type
      // errors, which tsx does not check either.
      {"typescript", "main.ts", "",
       "tsc --target es2020 --module commonjs --outDir .ts-out main.ts >/dev/null 2>&1; "
       "node {node} .ts-out/main.js",
       "tsc", MR::kNode, false, ""},
      // SandboxFusion names sql but has no runner for it; kiln runs SQLite.
      {"sql", "main.sql", "", "sqlite3 -bail db.sqlite3 '.read main.sql'", "sqlite3",
       MR::kAddressSpace, false, ""},
      {"rust", "main.rs", "rustc main.rs -o test", "./test", "rustc", MR::kAddressSpace, true, ""},
      {"cuda", "", "", "", "", MR::kNone, false, kNoGpu},
      {"lua", "main.lua", "", "lua5.4 main.lua", "lua5.4", MR::kAddressSpace, false, ""},
      {"R", "main.R", "", "Rscript main.R", "Rscript", MR::kAddressSpace, false, ""},
      {"perl", "main.pl", "", "perl main.pl", "perl", MR::kAddressSpace, false, ""},
      // LDC (Debian has no dmd), with dmd's -unittest.
      {"D_ut", "main.d", "ldc2 -unittest -of=test main.d", "./test", "ldc2", MR::kAddressSpace,
       false, ""},
      {"ruby", "main.rb", "", "ruby main.rb", "ruby", MR::kAddressSpace, false, ""},
      {"scala", "main.scala", "scalac main.scala", "scala {class}", "scalac", MR::kNone, false, ""},
      {"julia", "", "", "", "", MR::kNone, false,
       "Debian bookworm, npm and PyPI supply no Julia, so kiln's image has none"},
      {"pytest", "test_main.py", "", "pytest -q -p no:cacheprovider test_main.py", "pytest",
       MR::kAddressSpace, true, ""},
      {"junit", "{class}.java",
       "javac -encoding UTF-8 -cp .:/usr/share/java/junit-platform-console-standalone.jar *.java",
       "java {jvm} -jar /usr/share/java/junit-platform-console-standalone.jar --class-path . "
       "--scan-class-path",
       "javac", MR::kJvm, false, ""},
      {"kotlin_script", "main.kts", "", "kotlinc -script main.kts", "kotlinc", MR::kNone, false,
       ""},
      {"jest", "", "", "", "", MR::kNone, false,
       "kiln's image does not set up jest (npm's jest with a TypeScript transform) yet"},
      {"verilog", "main.sv",
       "iverilog -Wall -Winfloop -Wno-timescale -g2012 -s tb -o test.vvp main.sv",
       "vvp -n test.vvp", "iverilog", MR::kAddressSpace, false, ""},
      {"python_gpu", "", "", "", "", MR::kNone, false, kNoGpu},
      {"lean", "", "", "", "", MR::kNone, false,
       "Debian bookworm, npm and PyPI supply no Lean 4 (it comes from elan), so kiln's image has "
       "none"},
      {"swift", "", "", "", "", MR::kNone, false,
       "Debian bookworm, npm and PyPI supply no Swift toolchain, so kiln's image has none"},
      {"racket", "main.rkt", "", "racket main.rkt", "racket", MR::kNone, false, ""},
  };
  return table;
}

void ReplaceAll(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// A step's command line: `line` in kWorkDir, behind a check that the image
// has `tool` (when `check`).
io::Command StepCommand(const std::string& line, const Language& lang, bool check) {
  io::Command c;
  std::string text;
  if (check) {
    text = "command -v " + lang.tool + " >/dev/null 2>&1 || { echo '" +
           std::string(kMissingToolMarker) + lang.tool + "' >&2; exit 127; }\n";
  }
  c.command = text + line;
  c.cwd = kWorkDir;
  return c;
}

}  // namespace

const std::vector<Language>& Languages() { return Table(); }

const Language* FindLanguage(std::string_view name) {
  for (const Language& l : Table())
    if (l.name == name) return &l;
  return nullptr;
}

std::string MainClassOf(const std::string& code, const std::string& language) {
  // The first public class (Java) or object (Scala) the source declares.
  static const std::regex kJava(R"(public\s+(?:final\s+|abstract\s+)*class\s+([A-Za-z_$][\w$]*))");
  static const std::regex kScala(R"(object\s+([A-Za-z_][\w]*))");
  std::smatch m;
  const std::regex& re = language == "scala" ? kScala : kJava;
  if (std::regex_search(code, m, re)) return m[1].str();
  return "Main";
}

Plan PlanFor(const RunCodeRequest& request) {
  const Language& lang = *request.language;
  Plan plan;
  std::string cls;
  if (lang.name == "scala" || lang.name == "junit") cls = MainClassOf(request.code, lang.name);
  plan.file = lang.file;
  ReplaceAll(plan.file, "{class}", cls);
  plan.source = request.code;
  // SandboxFusion adds PHP's opening tag when the program lacks one.
  if (lang.name == "php" && request.code.find("<?php") == std::string::npos)
    plan.source = "<?php\n" + request.code;

  int64_t mb = request.memory_limit_mb;
  std::string run = lang.run;
  std::string jvm, node;
  std::map<std::string, std::string> run_env;
  if (mb > 0) {
    switch (lang.memory) {
      case MR::kAddressSpace:
        run = "ulimit -S -v " + std::to_string(mb * 1024) + " && " + run;
        break;
      case MR::kJvm:
        jvm = "-Xmx" + std::to_string(mb) + "m";
        break;
      case MR::kNode:
        node = "--max-old-space-size=" + std::to_string(mb);
        break;
      case MR::kGo:
        run_env["GOMEMLIMIT"] = std::to_string(mb) + "MiB";
        break;
      case MR::kNone:
        break;
    }
  }
  ReplaceAll(run, "{jvm}", jvm);
  ReplaceAll(run, "{node}", node);
  ReplaceAll(run, "{class}", cls);
  ReplaceAll(run, "  ", " ");

  // Go stays offline and keeps its caches in the sandbox.
  std::map<std::string, std::string> env;
  if (lang.tool == "go") env = {{"GOPROXY", "off"}, {"GOCACHE", "/tmp/go-build"}};
  bool compiled = !lang.compile.empty();
  if (compiled) {
    plan.compile = StepCommand(lang.compile, lang, true);
    plan.compile->env = env;
  }
  plan.run = StepCommand(run, lang, !compiled);
  plan.run.env = env;
  for (const auto& [k, v] : run_env) plan.run.env[k] = v;
  return plan;
}

}  // namespace kiln::api::sandboxfusion
