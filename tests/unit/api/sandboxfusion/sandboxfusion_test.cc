// The SandboxFusion front's pure parts (src/api/sandboxfusion/): run_code's
// body, the language table and each language's steps, kiln's exec results
// in SandboxFusion's words, and the verdict verl draws from each answer.
#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/sandboxfusion/sandboxfusion.h"
#include "unit/support/api_issue_paths.h"

namespace kiln::api::sandboxfusion {
namespace sandboxfusion_test {
namespace {

using nlohmann::json;

std::vector<std::string> IssuesOf(const json& body) {
  try {
    ReadRunCode(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status().code(), Code::kInvalidRequest);
    return IssuePaths(e);
  }
  return {};
}

// verl's verdict for an answer (verl/utils/reward_score/sandbox_fusion/
// utils.py, _process_single_case), written again from its rules: true/false
// as 1/0, -1 sandbox or API error, -2 runtime error, -3 timeout, -4 compile
// error. `expected` is the case's output.
int VerlVerdict(const json& a, const std::string& expected) {
  std::string status = a.value("status", "");
  const json& c = a["compile_result"];
  const json& r = a["run_result"];
  if (status == "SandboxError") return -1;
  if (status == "Failed") {
    if (c.is_object()) {
      std::string cs = c.value("status", "");
      if (cs == "Error" || cs == "TimeLimitExceeded" ||
          (cs == "Finished" && c["return_code"] != json(0)))
        return -4;
    }
    if (!r.is_object()) return -1;
    std::string rs = r.value("status", "");
    if (rs == "TimeLimitExceeded") return -3;
    if (rs == "Error" || (rs == "Finished" && r["return_code"] != json(0))) return -2;
    return -1;
  }
  if (status == "Success") {
    if (!r.is_object() || r.value("status", "") != "Finished") return -1;
    std::string out = r.value("stdout", "");
    auto trim = [](std::string s) {
      while (!s.empty() && s.back() == '\n') s.pop_back();
      return s;
    };
    return trim(out) == trim(expected) ? 1 : 0;
  }
  return -1;
}

io::ExecResult Exited(int code, std::string out = "", std::string err = "") {
  io::ExecResult r;
  r.exit.exit_code = code;
  r.exit.duration_ms = 250;
  r.stdout_data = std::move(out);
  r.stderr_data = std::move(err);
  return r;
}

json Answer(std::optional<io::ExecResult> compile, std::optional<io::ExecResult> run) {
  RunCodeAnswer a;
  if (compile) a.compile_result = StepFromExec(*compile);
  if (run) a.run_result = StepFromExec(*run);
  a.status = StatusOf(a.compile_result, a.run_result);
  return AnswerJson(a);
}

TEST(SandboxFusionRequestTest, VerlsBodyIsReadWithSandboxFusionsDefaults) {
  // verl's call_sandbox_api body, as it sends it.
  ReadResult r = ReadRunCode(json::parse(R"j({"compile_timeout": 10, "run_timeout": 10,
      "code": "print(1)", "stdin": "3\n", "memory_limit_MB": 1024, "language": "python",
      "files": {}, "fetch_files": []})j"));
  ASSERT_NE(r.request.language, nullptr);
  EXPECT_EQ(r.request.language->name, "python");
  EXPECT_EQ(r.request.code, "print(1)");
  EXPECT_EQ(r.request.stdin_data, "3\n");
  EXPECT_EQ(r.request.memory_limit_mb, 1024);
  EXPECT_DOUBLE_EQ(r.request.run_timeout, 10);
  EXPECT_TRUE(r.unknown_language.empty());

  ReadResult d = ReadRunCode(json{{"code", "x"}, {"language", "cpp"}, {"stdin", nullptr}});
  EXPECT_DOUBLE_EQ(d.request.compile_timeout, 10);
  EXPECT_DOUBLE_EQ(d.request.run_timeout, 10);
  EXPECT_EQ(d.request.memory_limit_mb, -1);
  EXPECT_FALSE(d.request.stdin_data);
}

TEST(SandboxFusionRequestTest, FractionalTimeoutsAndFilesAreTaken) {
  ReadResult r = ReadRunCode(json::parse(R"j({"code": "", "language": "bash",
      "run_timeout": 0.5, "files": {"data/in.txt": "aGk=", "skip.txt": null,
      "a/IGNORE_THIS_FILE": "aGk="}, "fetch_files": ["out.txt"]})j"));
  EXPECT_DOUBLE_EQ(r.request.run_timeout, 0.5);
  ASSERT_EQ(r.request.files.size(), 1u);
  EXPECT_EQ(r.request.files[0].first, "data/in.txt");
  EXPECT_EQ(r.request.files[0].second, "hi");
  EXPECT_EQ(r.request.fetch_files, std::vector<std::string>{"out.txt"});
}

TEST(SandboxFusionRequestTest, ProblemsNameTheirFields) {
  EXPECT_EQ(IssuesOf(json{{"language", "python"}}), std::vector<std::string>{"body.code"});
  EXPECT_EQ(IssuesOf(json{{"code", "x"}}), std::vector<std::string>{"body.language"});
  EXPECT_EQ(IssuesOf(json{{"code", "x"}, {"language", "python"}, {"run_timeout", 601}}),
            std::vector<std::string>{"body.run_timeout"});
  EXPECT_EQ(IssuesOf(json{{"code", "x"}, {"language", "python"}, {"compile_timeout", 0}}),
            std::vector<std::string>{"body.compile_timeout"});
  EXPECT_EQ(IssuesOf(json{{"code", "x"}, {"language", "python"}, {"run_timeout", "10"}}),
            std::vector<std::string>{"body.run_timeout"});
  EXPECT_EQ(IssuesOf(json{{"code", "x"}, {"language", "python"}, {"memory_limit_MB", 1 << 20}}),
            std::vector<std::string>{"body.memory_limit_MB"});
  EXPECT_EQ(IssuesOf(json{{"code", "x"}, {"language", "python"}, {"files", {{"../x", "aGk="}}}}),
            std::vector<std::string>{"body.files.../x"});
  EXPECT_EQ(IssuesOf(json{{"code", "x"}, {"language", "python"}, {"files", {{"x", "!!"}}}}),
            std::vector<std::string>{"body.files.x"});
  EXPECT_EQ(IssuesOf(json{{"code", "x"}, {"language", "python"}, {"fetch_files", {"a/../../b"}}}),
            std::vector<std::string>{"body.fetch_files[0]"});
  EXPECT_EQ(IssuesOf(json{{"code", "x"}, {"language", "python"}, {"memory_limit_mb", 5}}),
            std::vector<std::string>{"body.memory_limit_mb"});
}

TEST(SandboxFusionRequestTest, AnUnknownLanguageIsNotAFieldProblem) {
  ReadResult r = ReadRunCode(json{{"code", "x"}, {"language", "cobol"}});
  EXPECT_EQ(r.request.language, nullptr);
  EXPECT_EQ(r.unknown_language, "cobol");
}

TEST(SandboxFusionLanguagesTest, EverySandboxFusionLanguageHasAnEntry) {
  // SandboxFusion's Language literal (sandbox/runners/types.py).
  const std::vector<std::string> names = {
      "python",  "cpp",        "nodejs", "go",         "go_test",       "java",
      "php",     "csharp",     "bash",   "typescript", "sql",           "rust",
      "cuda",    "lua",        "R",      "perl",       "D_ut",          "ruby",
      "scala",   "julia",      "pytest", "junit",      "kotlin_script", "jest",
      "verilog", "python_gpu", "lean",   "swift",      "racket"};
  EXPECT_EQ(Languages().size(), names.size());
  for (const auto& n : names) {
    const Language* l = FindLanguage(n);
    ASSERT_NE(l, nullptr) << n;
    if (l->refused.empty()) {
      EXPECT_FALSE(l->file.empty()) << n;
      EXPECT_FALSE(l->run.empty()) << n;
      EXPECT_FALSE(l->tool.empty()) << n;
    }
  }
  // The core image serves these; GPUs and the toolchains no Debian, npm or
  // PyPI package supplies are refused with a reason.
  for (const char* n : {"python", "cpp", "nodejs", "go", "java", "rust", "bash"})
    EXPECT_TRUE(FindLanguage(n)->core && FindLanguage(n)->refused.empty()) << n;
  for (const char* n : {"cuda", "python_gpu", "julia", "swift", "lean"})
    EXPECT_FALSE(FindLanguage(n)->refused.empty()) << n;
  EXPECT_NE(FindLanguage("cuda")->refused.find("GPU"), std::string::npos);
  EXPECT_EQ(FindLanguage("Python"), nullptr);  // names are SandboxFusion's, exactly
}

RunCodeRequest RequestFor(const std::string& lang, const std::string& code, int64_t mb = -1) {
  RunCodeRequest r;
  r.language = FindLanguage(lang);
  r.code = code;
  r.memory_limit_mb = mb;
  return r;
}

TEST(SandboxFusionLanguagesTest, CompiledLanguagesCheckTheirToolBeforeCompiling) {
  Plan cpp = PlanFor(RequestFor("cpp", "int main(){}"));
  EXPECT_EQ(cpp.file, "main.cpp");
  ASSERT_TRUE(cpp.compile);
  EXPECT_NE(cpp.compile->command->find("command -v g++"), std::string::npos);
  EXPECT_NE(cpp.compile->command->find("g++ -std=c++17 main.cpp -o test"), std::string::npos);
  EXPECT_EQ(*cpp.run.command, "./test");
  EXPECT_EQ(cpp.run.cwd, kWorkDir);

  Plan py = PlanFor(RequestFor("python", "print(1)"));
  EXPECT_FALSE(py.compile);
  EXPECT_NE(py.run.command->find("command -v python3"), std::string::npos);
  EXPECT_EQ(py.source, "print(1)");
}

TEST(SandboxFusionLanguagesTest, TheMemoryLimitIsEachRuntimesOwn) {
  Plan py = PlanFor(RequestFor("python", "", 256));
  EXPECT_NE(py.run.command->find("ulimit -S -v 262144 && python3 main.py"), std::string::npos);
  Plan java = PlanFor(RequestFor("java", "", 256));
  EXPECT_NE(java.run.command->find("java -Xmx256m -ea Main"), std::string::npos);
  Plan node = PlanFor(RequestFor("nodejs", "", 256));
  EXPECT_NE(node.run.command->find("node --max-old-space-size=256 main.js"), std::string::npos);
  Plan go = PlanFor(RequestFor("go", "", 256));
  EXPECT_EQ(go.run.env.at("GOMEMLIMIT"), "256MiB");
  EXPECT_EQ(go.run.env.at("GOPROXY"), "off");
  // No limit: the commands as SandboxFusion's, nothing added.
  EXPECT_NE(PlanFor(RequestFor("java", "")).run.command->find("java -ea Main"), std::string::npos);
  EXPECT_EQ(PlanFor(RequestFor("cpp", "", -1)).run.command, "./test");
}

TEST(SandboxFusionLanguagesTest, ClassNamesAndPhpTags) {
  EXPECT_EQ(MainClassOf("import x;\npublic final class Solver { }", "junit"), "Solver");
  EXPECT_EQ(MainClassOf("class A {}", "junit"), "Main");
  EXPECT_EQ(MainClassOf("object Hello extends App { }", "scala"), "Hello");
  EXPECT_EQ(PlanFor(RequestFor("junit", "public class FooTest {}")).file, "FooTest.java");
  EXPECT_NE(PlanFor(RequestFor("scala", "object Hi { }")).run.command->find("scala Hi"),
            std::string::npos);
  EXPECT_EQ(PlanFor(RequestFor("php", "echo 1;")).source, "<?php\necho 1;");
  EXPECT_EQ(PlanFor(RequestFor("php", "<?php echo 1;")).source, "<?php echo 1;");
}

TEST(SandboxFusionStepTest, ExecResultsInSandboxFusionsWords) {
  StepResult ok = StepFromExec(Exited(0, "3\n"));
  EXPECT_EQ(ok.status, StepStatus::kFinished);
  EXPECT_EQ(ok.return_code, 0);
  EXPECT_DOUBLE_EQ(ok.execution_time, 0.25);
  EXPECT_EQ(ok.stdout_data, "3\n");

  io::ExecResult segv;
  segv.exit.signal = "SIGSEGV";
  EXPECT_EQ(StepFromExec(segv).return_code, -11);

  io::ExecResult slow;
  slow.exit.timed_out = true;
  slow.exit.signal = "SIGKILL";
  StepResult tle = StepFromExec(slow);
  EXPECT_EQ(tle.status, StepStatus::kTimeLimitExceeded);
  EXPECT_FALSE(tle.return_code);

  io::ExecResult late;
  late.end = io::ExecResult::End::kDeadline;
  EXPECT_EQ(StepFromExec(late).status, StepStatus::kTimeLimitExceeded);

  io::ExecResult unstarted;
  unstarted.exit.start_error = "no such file";
  EXPECT_EQ(StepFromExec(unstarted).status, StepStatus::kError);

  StepResult bad = StepFromExec(Exited(0, "\xff\xfe ok"));
  EXPECT_NO_THROW(json(bad.stdout_data).dump());  // valid UTF-8 now
}

TEST(SandboxFusionStepTest, AMissingToolIsRecognised) {
  std::string tool;
  StepResult s = StepFromExec(Exited(127, "", std::string(kMissingToolMarker) + "rustc\n"));
  EXPECT_TRUE(MissingTool(s, &tool));
  EXPECT_EQ(tool, "rustc");
  // The program's own 127 is the program's.
  EXPECT_FALSE(MissingTool(StepFromExec(Exited(127, "", "sh: foo: not found\n")), &tool));
}

TEST(SandboxFusionVerdictTest, EveryOutcomeMapsToVerlsVerdict) {
  io::ExecResult tle;
  tle.exit.timed_out = true;
  io::ExecResult segv;
  segv.exit.signal = "SIGSEGV";
  // Interpreted: no compile step.
  EXPECT_EQ(VerlVerdict(Answer(std::nullopt, Exited(0, "6\n")), "6"), 1);
  EXPECT_EQ(VerlVerdict(Answer(std::nullopt, Exited(0, "7\n")), "6"), 0);
  EXPECT_EQ(VerlVerdict(Answer(std::nullopt, Exited(1, "", "Traceback")), "6"), -2);
  EXPECT_EQ(VerlVerdict(Answer(std::nullopt, segv), "6"), -2);
  EXPECT_EQ(VerlVerdict(Answer(std::nullopt, tle), "6"), -3);
  // Compiled.
  EXPECT_EQ(VerlVerdict(Answer(Exited(0), Exited(0, "6")), "6"), 1);
  EXPECT_EQ(VerlVerdict(Answer(Exited(0), Exited(0, "5")), "6"), 0);
  EXPECT_EQ(VerlVerdict(Answer(Exited(1, "", "error: expected ';'"), std::nullopt), "6"), -4);
  EXPECT_EQ(VerlVerdict(Answer(tle, std::nullopt), "6"), -4);
  EXPECT_EQ(VerlVerdict(Answer(Exited(0), tle), "6"), -3);
  EXPECT_EQ(VerlVerdict(Answer(Exited(0), Exited(134)), "6"), -2);
  // Refusals and sandbox failures.
  EXPECT_EQ(VerlVerdict(SandboxErrorJson("unknown language 'cobol'"), "6"), -1);
  io::ExecResult unstarted;
  unstarted.exit.start_error = "gone";
  json err = Answer(std::nullopt, unstarted);
  EXPECT_EQ(err["status"], "SandboxError");
  EXPECT_EQ(VerlVerdict(err, "6"), -1);
}

TEST(SandboxFusionVerdictTest, TheAnswerHasSandboxFusionsShape) {
  json a = Answer(Exited(0), Exited(0, "hi\n"));
  for (const char* k :
       {"status", "message", "compile_result", "run_result", "executor_pod_name", "files"})
    EXPECT_TRUE(a.contains(k)) << k;
  EXPECT_EQ(a["status"], "Success");
  EXPECT_EQ(a["run_result"]["status"], "Finished");
  EXPECT_EQ(a["run_result"]["return_code"], 0);
  EXPECT_TRUE(a["files"].is_object());
  json e = SandboxErrorJson("why");
  EXPECT_TRUE(e["compile_result"].is_null());
  EXPECT_TRUE(e["run_result"].is_null());
  EXPECT_EQ(e["message"], "why");
}

TEST(SandboxFusionJupyterTest, CellsAndTimeoutsAreRead) {
  RunJupyterRequest r = ReadRunJupyter(json::parse(R"j({"cells": ["a = 1", "a"],
      "cell_timeout": 0, "total_timeout": 30, "kernel": "python3", "files": {}})j"));
  EXPECT_EQ(r.cells, (std::vector<std::string>{"a = 1", "a"}));
  EXPECT_DOUBLE_EQ(r.cell_timeout, 0);
  EXPECT_DOUBLE_EQ(r.total_timeout, 30);
  EXPECT_DOUBLE_EQ(ReadRunJupyter(json{{"cells", json::array()}}).total_timeout, 45);
  auto issues = [](const json& body) {
    try {
      ReadRunJupyter(body);
    } catch (const ApiError& e) {
      return IssuePaths(e);
    }
    return std::vector<std::string>{};
  };
  EXPECT_EQ(issues(json::object()), std::vector<std::string>{"body.cells"});
  EXPECT_EQ(issues(json{{"cells", {1}}}), std::vector<std::string>{"body.cells[0]"});
  EXPECT_EQ(issues(json{{"cells", json::array()}, {"kernel", "julia"}}),
            std::vector<std::string>{"body.kernel"});
  EXPECT_EQ(issues(json{{"cells", json::array()}, {"cell_timeout", -1}}),
            std::vector<std::string>{"body.cell_timeout"});
  EXPECT_EQ(issues(json{{"cells", json::array()}, {"memory_limit_MB", 1u << 30}}),
            std::vector<std::string>{"body.memory_limit_MB"});
  EXPECT_EQ(ReadRunJupyter(json{{"cells", json::array()}}).memory_limit_mb, -1);
  EXPECT_EQ(
      ReadRunJupyter(json{{"cells", json::array()}, {"memory_limit_MB", 256}}).memory_limit_mb,
      256);
}

TEST(SandboxFusionJupyterTest, TheKernelsMemoryLimitCellLeavesNoName) {
  std::string cell = KernelMemoryLimitCell(256);
  EXPECT_NE(cell.find("_kiln_limit(256 * 1024 * 1024)"), std::string::npos) << cell;
  EXPECT_NE(cell.find("RLIMIT_AS"), std::string::npos) << cell;
  EXPECT_NE(cell.find("RLIMIT_DATA"), std::string::npos) << cell;
  EXPECT_NE(cell.find("del _kiln_limit"), std::string::npos) << cell;
}

TEST(SandboxFusionJupyterTest, ACellInJupytersWords) {
  interpreter::Execution run;
  run.stdout_text = "hi\n";
  run.results.push_back(
      json{{"main", true}, {"data", {{"text/plain", "2"}}}, {"refs", json::array()}});
  run.error =
      json{{"name", "ZeroDivisionError"},
           {"value", "division by zero"},
           {"traceback", "Traceback (most recent call last):\n  line 1\nZeroDivisionError"}};
  json cell = CellJson(run);
  EXPECT_EQ(cell["stdout"], "hi\n");
  EXPECT_EQ(cell["display"], json::array({{{"text/plain", "2"}}}));
  ASSERT_EQ(cell["error"].size(), 1u);
  EXPECT_EQ(cell["error"][0]["ename"], "ZeroDivisionError");
  EXPECT_EQ(cell["error"][0]["traceback"].size(), 3u);
  json a = JupyterJson(RunStatus::kSuccess, "", std::nullopt, json::array({cell}), {});
  EXPECT_EQ(a["status"], "Success");
  EXPECT_TRUE(a["driver"].is_null());
  EXPECT_EQ(a["cells"].size(), 1u);
}

TEST(SandboxFusionFrontTest, TheKeyComesFromThePath) {
  EXPECT_EQ(KeyFromPath("/sandboxfusion/kiln_abc/run_code"), "kiln_abc");
  EXPECT_EQ(KeyFromPath("/sandboxfusion/kiln_abc/v1/ping"), "kiln_abc");
  EXPECT_FALSE(KeyFromPath("/sandboxfusion//run_code"));
  EXPECT_FALSE(KeyFromPath("/sandboxfusion"));
  EXPECT_FALSE(KeyFromPath("/sandboxfusionx/k/run_code"));
}

TEST(SandboxFusionFrontTest, WhatClearsOnItsOwnIs504ForVerlToRetry) {
  EXPECT_EQ(HttpStatus(Code::kNoCapacity), 504);
  EXPECT_EQ(HttpStatus(Code::kRateLimited), 504);
  EXPECT_EQ(HttpStatus(Code::kUnauthorized), 401);
  EXPECT_EQ(HttpStatus(Code::kInvalidRequest), 400);
}

}  // namespace
}  // namespace sandboxfusion_test
}  // namespace kiln::api::sandboxfusion
