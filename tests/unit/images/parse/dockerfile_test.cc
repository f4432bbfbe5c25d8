// Dockerfile parsing (src/images/parse/dockerfile.h): each instruction and form,
// continuations, the escape directive, quoting, variable expansion and ARG
// scope, multi-stage builds and StagesFor, every refusal with its line, and
// the limits.
#include <gtest/gtest.h>

#include <string>

#include "images/parse/dockerfile.h"

namespace kiln::images {
namespace images_dockerfile_test {
namespace {

using Args = std::map<std::string, std::string>;
using Pairs = std::vector<std::pair<std::string, std::string>>;
using Strings = std::vector<std::string>;

Dockerfile Parse(const std::string& text, const Args& args = {}) {
  Result<Dockerfile> file = ParseDockerfile(text, args);
  EXPECT_TRUE(file.ok()) << text << "\n-> " << file.status().ToString();
  return file.ok() ? *file : Dockerfile{};
}

// The single stage's steps.
std::vector<Step> Steps(const std::string& text, const Args& args = {}) {
  Dockerfile file = Parse(text, args);
  return file.stages.empty() ? std::vector<Step>{} : file.stages.back().steps;
}

template <typename T>
T Only(const std::string& text, const Args& args = {}) {
  std::vector<Step> steps = Steps(text, args);
  EXPECT_EQ(steps.size(), 1u) << text;
  if (steps.empty() || !std::holds_alternative<T>(steps.back().instruction)) {
    ADD_FAILURE() << "not the expected instruction: " << text;
    return T{};
  }
  return std::get<T>(steps.back().instruction);
}

// Expects a refusal at `line` whose message contains `says`.
void ExpectError(const std::string& text, int line, const std::string& says,
                 const Args& args = {}) {
  Result<Dockerfile> file = ParseDockerfile(text, args);
  ASSERT_FALSE(file.ok()) << text;
  EXPECT_EQ(file.status().code(), Code::kInvalidRequest) << text;
  const std::string prefix = "Dockerfile line " + std::to_string(line) + ": ";
  EXPECT_EQ(file.status().message().substr(0, prefix.size()), prefix)
      << text << "\n-> " << file.status().message();
  EXPECT_NE(file.status().message().find(says), std::string::npos)
      << text << "\n-> " << file.status().message();
  EXPECT_EQ(file.status().details()["line"], line);
}

TEST(DockerfileTest, ParsesFromAndStageBasics) {
  Dockerfile file = Parse("FROM python:3.12 AS Build\nRUN make\n");
  ASSERT_EQ(file.stages.size(), 1u);
  const Stage& stage = file.stages[0];
  EXPECT_EQ(stage.index, 0);
  EXPECT_EQ(stage.line, 1);
  EXPECT_EQ(stage.base, "python:3.12");
  EXPECT_EQ(stage.name, "build");
  EXPECT_FALSE(stage.base_stage.has_value());
  ASSERT_EQ(stage.steps.size(), 1u);
  EXPECT_EQ(stage.steps[0].line, 2);
  EXPECT_EQ(stage.steps[0].text, "RUN make");
}

TEST(DockerfileTest, RunShellAndExecForms) {
  RunInstr shell = Only<RunInstr>("FROM a\nrun  make  all\n");
  EXPECT_FALSE(shell.command.exec_form);
  EXPECT_EQ(shell.command.shell, "make  all");
  EXPECT_EQ(shell.command.argv, (Strings{"/bin/sh", "-c", "make  all"}));

  RunInstr exec = Only<RunInstr>("FROM a\nRUN [\"make\", \"a b\", \"$HOME\"]\n");
  EXPECT_TRUE(exec.command.exec_form);
  EXPECT_EQ(exec.command.argv, (Strings{"make", "a b", "$HOME"}));  // not expanded
  EXPECT_EQ(exec.command.shell, "");

  // Invalid JSON falls back to shell form, as Docker does.
  RunInstr fallback = Only<RunInstr>("FROM a\nRUN [\"make\", oops]\n");
  EXPECT_FALSE(fallback.command.exec_form);
  EXPECT_EQ(fallback.command.shell, "[\"make\", oops]");
  RunInstr not_strings = Only<RunInstr>("FROM a\nRUN [1, 2]\n");
  EXPECT_FALSE(not_strings.command.exec_form);

  RunInstr network = Only<RunInstr>("FROM a\nRUN --network=none echo hi\n");
  EXPECT_EQ(network.command.shell, "echo hi");
  EXPECT_EQ(Only<RunInstr>("FROM a\nRUN --network=default [\"x\"]\n").command.argv, (Strings{"x"}));
}

TEST(DockerfileTest, ShellInstructionChangesShellForm) {
  std::vector<Step> steps = Steps(
      "FROM a\nSHELL [\"/bin/bash\", \"-eo\", \"pipefail\", \"-c\"]\nRUN echo $X\nCMD run it\n");
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(std::get<ShellInstr>(steps[0].instruction).argv,
            (Strings{"/bin/bash", "-eo", "pipefail", "-c"}));
  EXPECT_EQ(std::get<RunInstr>(steps[1].instruction).command.argv,
            (Strings{"/bin/bash", "-eo", "pipefail", "-c", "echo $X"}));
  EXPECT_EQ(std::get<CmdInstr>(steps[2].instruction).command.argv,
            (Strings{"/bin/bash", "-eo", "pipefail", "-c", "run it"}));
}

TEST(DockerfileTest, CmdEntrypoint) {
  CmdInstr cmd = Only<CmdInstr>("FROM a\nCMD [\"python\", \"-m\", \"http.server\"]\n");
  EXPECT_TRUE(cmd.command.exec_form);
  EXPECT_EQ(cmd.command.argv, (Strings{"python", "-m", "http.server"}));
  EntrypointInstr entry = Only<EntrypointInstr>("FROM a\nENTRYPOINT exec app $PORT\n");
  EXPECT_FALSE(entry.command.exec_form);
  EXPECT_EQ(entry.command.shell, "exec app $PORT");
  EXPECT_TRUE(Only<CmdInstr>("FROM a\nCMD []\n").command.argv.empty());
}

TEST(DockerfileTest, CopyAndAddWithFlags) {
  CopyInstr copy = Only<CopyInstr>("FROM a\nCOPY --chown=app:app --chmod=0755 --link a b* /dst/\n");
  EXPECT_FALSE(copy.add);
  EXPECT_EQ(copy.sources, (Strings{"a", "b*"}));
  EXPECT_EQ(copy.dest, "/dst/");
  EXPECT_EQ(copy.chown, "app:app");
  EXPECT_EQ(copy.chmod, 0755u);
  EXPECT_FALSE(copy.from.has_value());

  CopyInstr json = Only<CopyInstr>("FROM a\nCOPY [\"with space\", \"/d s\"]\n");
  EXPECT_EQ(json.sources, (Strings{"with space"}));
  EXPECT_EQ(json.dest, "/d s");

  CopyInstr add = Only<CopyInstr>("FROM a\nADD --chmod=644 app.tar.gz /opt/\n");
  EXPECT_TRUE(add.add);
  EXPECT_EQ(add.sources, (Strings{"app.tar.gz"}));
  EXPECT_EQ(add.chmod, 0644u);

  CopyInstr image = Only<CopyInstr>("FROM a\nCOPY --from=nginx:latest /etc/nginx /etc/nginx\n");
  EXPECT_EQ(image.from, "nginx:latest");
  EXPECT_FALSE(image.from_stage.has_value());

  CopyInstr quoted = Only<CopyInstr>("FROM a\nCOPY \"a b\" 'c$d' /x\n");
  EXPECT_EQ(quoted.sources, (Strings{"a b", "c$d"}));
}

TEST(DockerfileTest, EnvForms) {
  EnvInstr legacy = Only<EnvInstr>("FROM a\nENV PATH /usr/local/bin:/usr/bin  extra\n");
  EXPECT_EQ(legacy.vars, (Pairs{{"PATH", "/usr/local/bin:/usr/bin  extra"}}));
  EnvInstr pairs = Only<EnvInstr>("FROM a\nENV A=1 B=\"v 2\" C='x y' D=a\\ b E=\n");
  EXPECT_EQ(pairs.vars, (Pairs{{"A", "1"}, {"B", "v 2"}, {"C", "x y"}, {"D", "a b"}, {"E", ""}}));
}

TEST(DockerfileTest, LabelsAndMaintainer) {
  LabelInstr labels =
      Only<LabelInstr>("FROM a\nLABEL \"com.example.vendor\"=\"ACME Inc\" version=1.0\n");
  EXPECT_EQ(labels.labels, (Pairs{{"com.example.vendor", "ACME Inc"}, {"version", "1.0"}}));
  EXPECT_EQ(Only<LabelInstr>("FROM a\nLABEL description This is it\n").labels,
            (Pairs{{"description", "This is it"}}));
  EXPECT_EQ(Only<LabelInstr>("FROM a\nMAINTAINER Jo <jo@example.com>\n").labels,
            (Pairs{{"maintainer", "Jo <jo@example.com>"}}));
}

TEST(DockerfileTest, WorkdirUserExposeVolumeStopsignal) {
  std::vector<Step> steps = Steps(
      "FROM a\nWORKDIR app\nWORKDIR src/../lib\nWORKDIR /opt//x/.\nWORKDIR ..\n"
      "USER app:staff\nEXPOSE 80 443/TCP 53/udp 8000-8010\nVOLUME /data /logs\n"
      "VOLUME [\"/a b\"]\nSTOPSIGNAL SIGINT\nHEALTHCHECK CMD curl -f http://localhost/\n");
  ASSERT_EQ(steps.size(), 9u);  // HEALTHCHECK is not a step
  EXPECT_EQ(std::get<WorkdirInstr>(steps[0].instruction).path, "/app");
  EXPECT_EQ(std::get<WorkdirInstr>(steps[1].instruction).path, "/app/lib");
  EXPECT_EQ(std::get<WorkdirInstr>(steps[2].instruction).path, "/opt/x");
  EXPECT_EQ(std::get<WorkdirInstr>(steps[3].instruction).path, "/opt");
  EXPECT_EQ(std::get<UserInstr>(steps[4].instruction).user, "app:staff");
  EXPECT_EQ(std::get<ExposeInstr>(steps[5].instruction).ports,
            (Strings{"80/tcp", "443/tcp", "53/udp", "8000-8010/tcp"}));
  EXPECT_EQ(std::get<VolumeInstr>(steps[6].instruction).paths, (Strings{"/data", "/logs"}));
  EXPECT_EQ(std::get<VolumeInstr>(steps[7].instruction).paths, (Strings{"/a b"}));
  EXPECT_EQ(std::get<StopSignalInstr>(steps[8].instruction).signal, "SIGINT");
}

TEST(DockerfileTest, ContinuationsCommentsAndCase) {
  const std::string text =
      "# a comment\n"
      "\n"
      "from a\n"
      "RUN apt-get update && \\\n"
      "# a comment inside the continuation is skipped\n"
      "\n"
      "    apt-get install -y curl \\  \n"
      "    && echo done\n"
      "  Run echo # not a comment\n"
      "RUN echo trailing \\\n";
  Dockerfile file = Parse(text);
  ASSERT_EQ(file.stages.size(), 1u);
  EXPECT_EQ(file.stages[0].line, 3);
  const auto& steps = file.stages[0].steps;
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].line, 4);
  EXPECT_EQ(steps[0].text, "RUN apt-get update &&     apt-get install -y curl     && echo done");
  EXPECT_EQ(std::get<RunInstr>(steps[0].instruction).command.shell,
            "apt-get update &&     apt-get install -y curl     && echo done");
  EXPECT_EQ(steps[1].line, 9);
  EXPECT_EQ(std::get<RunInstr>(steps[1].instruction).command.shell, "echo # not a comment");
  EXPECT_EQ(steps[2].line, 10);
  EXPECT_EQ(std::get<RunInstr>(steps[2].instruction).command.shell, "echo trailing");
}

TEST(DockerfileTest, CrlfLineEndings) {
  std::vector<Step> steps = Steps("FROM a\r\nRUN a \\\r\n b\r\nENV X=1\r\n");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(std::get<RunInstr>(steps[0].instruction).command.shell, "a  b");
  EXPECT_EQ(std::get<EnvInstr>(steps[1].instruction).vars, (Pairs{{"X", "1"}}));
}

TEST(DockerfileTest, EscapeDirective) {
  const std::string text =
      "# syntax=docker/dockerfile:1\n"
      "# escape=`\n"
      "FROM a\n"
      "RUN dir c:\\ `\n"
      "    && echo x\n"
      "ENV P=c:\\path W=a`$b\n";
  std::vector<Step> steps = Steps(text);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(std::get<RunInstr>(steps[0].instruction).command.shell, "dir c:\\     && echo x");
  EXPECT_EQ(std::get<EnvInstr>(steps[1].instruction).vars,
            (Pairs{{"P", "c:\\path"}, {"W", "a$b"}}));

  // After a comment or a blank line, a directive is only a comment.
  std::vector<Step> late = Steps("# hello\n# escape=`\nFROM a\nRUN a \\\n b\n");
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(std::get<RunInstr>(late[0].instruction).command.shell, "a  b");

  ExpectError("# escape=x\nFROM a\n", 1, "invalid escape");
  ExpectError("# escape=\\\n# escape=`\nFROM a\n", 2, "only one escape");
}

TEST(DockerfileTest, ExpansionForms) {
  const std::string text =
      "FROM a\n"
      "ENV A=one EMPTY=\n"
      "ENV \\\n"
      "  B=$A C=${A} D=${UNSET:-dflt} E=${A:-dflt} F=${A:+alt} G=${UNSET:+alt} \\\n"
      "  H=${EMPTY:-e} I=${EMPTY-e} J=${EMPTY:+x} K=${EMPTY+x} L=\\$A M='$A' N=\"$A b\" \\\n"
      "  O=${UNSET:-${A}2} P=$ Q=a$-b R=\"x\\\"y\"\n";
  std::vector<Step> steps = Steps(text);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(std::get<EnvInstr>(steps[1].instruction).vars, (Pairs{{"B", "one"},
                                                                  {"C", "one"},
                                                                  {"D", "dflt"},
                                                                  {"E", "one"},
                                                                  {"F", "alt"},
                                                                  {"G", ""},
                                                                  {"H", "e"},
                                                                  {"I", ""},
                                                                  {"J", ""},
                                                                  {"K", "x"},
                                                                  {"L", "$A"},
                                                                  {"M", "$A"},
                                                                  {"N", "one b"},
                                                                  {"O", "one2"},
                                                                  {"P", "$"},
                                                                  {"Q", "a$-b"},
                                                                  {"R", "x\"y"}}));
}

TEST(DockerfileTest, EnvUsesValuesFromBeforeTheInstruction) {
  std::vector<Step> steps = Steps("FROM a\nENV X=old\nENV X=new Y=$X\nENV Z=$X\n");
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(std::get<EnvInstr>(steps[1].instruction).vars, (Pairs{{"X", "new"}, {"Y", "old"}}));
  EXPECT_EQ(std::get<EnvInstr>(steps[2].instruction).vars, (Pairs{{"Z", "new"}}));
}

TEST(DockerfileTest, AnExternalBaseGivesItsEnvAndWorkdirWhenKnown) {
  BaseScope scope = [](const std::string& base) -> std::optional<BaseConfig> {
    if (base != "known") return std::nullopt;
    return BaseConfig{{"PATH=/usr/bin:/bin", "EMPTY"}, "/home/app"};
  };
  auto file = ParseDockerfile(
      "FROM known\nENV PATH=/opt/tools:$PATH E=${EMPTY-unset}\nWORKDIR sub\n"
      "FROM known AS second\nFROM other\nENV PATH=/x:$PATH\nWORKDIR sub\n"
      "FROM second\nENV P=$PATH\n",
      {}, {}, scope);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const auto& s = file->stages;
  EXPECT_EQ(std::get<EnvInstr>(s[0].steps[0].instruction).vars,
            (Pairs{{"PATH", "/opt/tools:/usr/bin:/bin"}, {"E", ""}}));
  EXPECT_EQ(std::get<WorkdirInstr>(s[0].steps[1].instruction).path, "/home/app/sub");
  // Unknown (a registry image before its pull): empty, as before.
  EXPECT_EQ(std::get<EnvInstr>(s[2].steps[0].instruction).vars, (Pairs{{"PATH", "/x:"}}));
  EXPECT_EQ(std::get<WorkdirInstr>(s[2].steps[1].instruction).path, "/sub");
  // An earlier stage's own scope, the base's included.
  EXPECT_EQ(std::get<EnvInstr>(s[3].steps[0].instruction).vars, (Pairs{{"P", "/usr/bin:/bin"}}));
}

TEST(DockerfileTest, ExpansionInEachExpandedInstruction) {
  std::vector<Step> steps = Steps(
      "FROM a\nARG DIR=/srv\nARG PORT=8080\nENV U=app\n"
      "COPY --chown=$U --from=${STAGE:-img} src $DIR/\nWORKDIR $DIR/app\nUSER ${U}:${U}\n"
      "LABEL dir=$DIR\nEXPOSE $PORT\nVOLUME $DIR/data\nSTOPSIGNAL ${SIG:-SIGQUIT}\n"
      "RUN echo $DIR\nCMD echo $DIR\n");
  ASSERT_EQ(steps.size(), 12u);
  const auto& copy = std::get<CopyInstr>(steps[3].instruction);
  EXPECT_EQ(copy.chown, "app");
  EXPECT_EQ(copy.from, "img");
  EXPECT_EQ(copy.dest, "/srv/");
  EXPECT_EQ(std::get<WorkdirInstr>(steps[4].instruction).path, "/srv/app");
  EXPECT_EQ(std::get<UserInstr>(steps[5].instruction).user, "app:app");
  EXPECT_EQ(std::get<LabelInstr>(steps[6].instruction).labels, (Pairs{{"dir", "/srv"}}));
  EXPECT_EQ(std::get<ExposeInstr>(steps[7].instruction).ports, (Strings{"8080/tcp"}));
  EXPECT_EQ(std::get<VolumeInstr>(steps[8].instruction).paths, (Strings{"/srv/data"}));
  EXPECT_EQ(std::get<StopSignalInstr>(steps[9].instruction).signal, "SIGQUIT");
  const auto& run = std::get<RunInstr>(steps[10].instruction);
  EXPECT_EQ(run.command.shell, "echo $DIR");  // the shell expands it
  EXPECT_EQ(run.build_args, (Args{{"DIR", "/srv"}, {"PORT", "8080"}}));
  EXPECT_EQ(std::get<CmdInstr>(steps[11].instruction).command.shell, "echo $DIR");
}

TEST(DockerfileTest, GlobalArgsExpandFromOnly) {
  const std::string text =
      "ARG BASE=python\n"
      "ARG TAG=3.11\n"
      "ARG UNUSED\n"
      "FROM ${BASE}:$TAG AS build\n"
      "RUN echo\n"
      "ARG TAG\n"
      "ARG BASE=other\n"
      "ARG NEW\n"
      "RUN echo\n"
      "COPY $TAG /x\n";
  Dockerfile file = Parse(text);
  ASSERT_EQ(file.stages.size(), 1u);
  EXPECT_EQ(file.stages[0].base, "python:3.11");
  const auto& steps = file.stages[0].steps;
  ASSERT_EQ(steps.size(), 6u);
  // Global ARGs are not in scope in the stage until redeclared.
  EXPECT_TRUE(std::get<RunInstr>(steps[0].instruction).build_args.empty());
  EXPECT_EQ(std::get<ArgInstr>(steps[1].instruction).value, "3.11");
  EXPECT_EQ(std::get<ArgInstr>(steps[2].instruction).value, "other");
  EXPECT_EQ(std::get<ArgInstr>(steps[3].instruction).name, "NEW");
  EXPECT_FALSE(std::get<ArgInstr>(steps[3].instruction).value.has_value());
  EXPECT_EQ(std::get<RunInstr>(steps[4].instruction).build_args,
            (Args{{"TAG", "3.11"}, {"BASE", "other"}}));
  EXPECT_EQ(std::get<CopyInstr>(steps[5].instruction).sources, (Strings{"3.11"}));
}

TEST(DockerfileTest, BuildArgsOverrideDefaults) {
  const std::string text =
      "ARG TAG=3.11\nARG UNSET_GLOBAL\nFROM python:${TAG}\nARG TAG\nARG LOCAL=1\n"
      "ARG UNSET_GLOBAL\nENV SHADOW=env\nARG SHADOW=arg\nRUN make\n";
  Dockerfile file =
      Parse(text, {{"TAG", "3.12"}, {"LOCAL", "2"}, {"UNSET_GLOBAL", "g"}, {"NOT_DECLARED", "x"}});
  ASSERT_EQ(file.stages.size(), 1u);
  EXPECT_EQ(file.stages[0].base, "python:3.12");
  const auto& steps = file.stages[0].steps;
  ASSERT_EQ(steps.size(), 6u);
  // ENV wins over ARG of the same name, so SHADOW is not an ARG of the RUN.
  EXPECT_EQ(std::get<RunInstr>(steps[5].instruction).build_args,
            (Args{{"TAG", "3.12"}, {"LOCAL", "2"}, {"UNSET_GLOBAL", "g"}}));
}

TEST(DockerfileTest, ArgScopeEndsAtFrom) {
  const std::string text =
      "FROM a AS one\nARG X=1\nENV E=e\nWORKDIR /w\nSHELL [\"/bin/bash\", \"-c\"]\n"
      "FROM one AS two\nRUN echo\nCOPY ${X:-none} ${E} ./\n"
      "FROM a\nCOPY ${E:-noenv} ./\nRUN x\n";
  Dockerfile file = Parse(text);
  ASSERT_EQ(file.stages.size(), 3u);
  EXPECT_EQ(file.stages[1].base_stage, 0);
  const auto& two = file.stages[1].steps;
  EXPECT_TRUE(std::get<RunInstr>(two[0].instruction).build_args.empty());
  // ENV, WORKDIR and SHELL carry over from the base stage; ARGs do not.
  EXPECT_EQ(std::get<RunInstr>(two[0].instruction).command.argv,
            (Strings{"/bin/bash", "-c", "echo"}));
  const auto& copy = std::get<CopyInstr>(two[1].instruction);
  EXPECT_EQ(copy.sources, (Strings{"none", "e"}));
  const auto& three = file.stages[2].steps;
  EXPECT_EQ(std::get<CopyInstr>(three[0].instruction).sources, (Strings{"noenv"}));
  EXPECT_EQ(std::get<RunInstr>(three[1].instruction).command.argv, (Strings{"/bin/sh", "-c", "x"}));
}

TEST(DockerfileTest, WorkdirInheritedFromBaseStage) {
  Dockerfile file = Parse("FROM a AS one\nWORKDIR /w\nFROM one\nWORKDIR sub\n");
  ASSERT_EQ(file.stages.size(), 2u);
  EXPECT_EQ(std::get<WorkdirInstr>(file.stages[1].steps[0].instruction).path, "/w/sub");
}

TEST(DockerfileTest, MultipleArgsInOneInstruction) {
  std::vector<Step> steps = Steps("FROM a\nARG A=1 B\n");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(std::get<ArgInstr>(steps[0].instruction).name, "A");
  EXPECT_EQ(std::get<ArgInstr>(steps[1].instruction).name, "B");
  EXPECT_EQ(steps[1].line, 2);
}

const char kMultiStage[] =
    "FROM golang AS deps\n"  // 0
    "RUN go mod download\n"
    "FROM deps AS build\n"  // 1: FROM deps
    "RUN go build\n"
    "FROM alpine AS assets\n"  // 2: used by COPY --from=assets
    "RUN make assets\n"
    "FROM alpine AS unused\n"  // 3
    "RUN true\n"
    "FROM debian AS final\n"  // 4
    "COPY --from=build /app /app\n"
    "COPY --from=ASSETS /a /a\n"
    "COPY --from=nginx /etc/x /x\n"  // an image, not a stage
    "FROM final AS test\n"           // 5
    "COPY --from=2 /a /b\n";

TEST(DockerfileTest, MultiStageLinks) {
  Dockerfile file = Parse(kMultiStage);
  ASSERT_EQ(file.stages.size(), 6u);
  EXPECT_EQ(file.stages[1].base, "deps");
  EXPECT_EQ(file.stages[1].base_stage, 0);
  EXPECT_EQ(file.stages[4].line, 9);
  const auto& final_steps = file.stages[4].steps;
  EXPECT_EQ(std::get<CopyInstr>(final_steps[0].instruction).from_stage, 1);
  EXPECT_EQ(std::get<CopyInstr>(final_steps[1].instruction).from, "assets");  // as Stage::name
  EXPECT_EQ(std::get<CopyInstr>(final_steps[1].instruction).from_stage, 2);
  EXPECT_EQ(std::get<CopyInstr>(final_steps[2].instruction).from, "nginx");
  EXPECT_FALSE(std::get<CopyInstr>(final_steps[2].instruction).from_stage.has_value());
  EXPECT_EQ(std::get<CopyInstr>(file.stages[5].steps[0].instruction).from_stage, 2);
}

TEST(DockerfileTest, StagesForTargets) {
  Dockerfile file = Parse(kMultiStage);
  auto last = StagesFor(file, std::nullopt);  // test: final (and its chain) + assets via index
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, (std::vector<int>{0, 1, 2, 4, 5}));
  auto final_stage = StagesFor(file, "Final");
  ASSERT_TRUE(final_stage.ok());
  EXPECT_EQ(*final_stage, (std::vector<int>{0, 1, 2, 4}));
  auto build = StagesFor(file, "build");
  ASSERT_TRUE(build.ok());
  EXPECT_EQ(*build, (std::vector<int>{0, 1}));
  auto unused = StagesFor(file, "unused");
  ASSERT_TRUE(unused.ok());
  EXPECT_EQ(*unused, (std::vector<int>{3}));

  auto unknown = StagesFor(file, "nope");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), Code::kInvalidRequest);
  EXPECT_NE(unknown.status().message().find("unknown target 'nope'"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("deps, build, assets, unused, final, test"),
            std::string::npos)
      << unknown.status().message();
  EXPECT_EQ(unknown.status().details()["stages"].size(), 6u);

  auto unnamed = StagesFor(Parse("FROM a\nFROM b\n"), "x");
  ASSERT_FALSE(unnamed.ok());
  EXPECT_NE(unnamed.status().message().find("names no stages"), std::string::npos);
  auto single = StagesFor(Parse("FROM a\nFROM b\n"), std::nullopt);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(*single, (std::vector<int>{1}));
}

TEST(DockerfileTest, FromPlatform) {
  EXPECT_EQ(Parse("FROM --platform=linux/amd64 a\n").stages.size(), 1u);
  EXPECT_EQ(Parse("FROM --platform=$BUILDPLATFORM a\n").stages.size(), 1u);
  ExpectError("FROM a\nFROM --platform=linux/arm64 b\n", 2,
              "FROM --platform=linux/arm64 is not supported");
  ExpectError("FROM --foo=bar a\n", 1, "unknown flag --foo for FROM");
}

TEST(DockerfileTest, RefusalsNameTheLine) {
  ExpectError("FROM a\n\nRUN --mount=type=secret,id=x cat /run/secrets/x\n", 3,
              "RUN --mount=type=secret is not supported");
  ExpectError("FROM a\nRUN --mount=target=/root/.cache go build\n", 2,
              "RUN --mount=type=bind is not supported");
  ExpectError("FROM a\nRUN --mount=type=cache,target=/c make\n", 2, "type=cache");
  ExpectError("FROM a\nRUN --network=host make\n", 2, "RUN --network=host is not supported");
  ExpectError("FROM a\nRUN --security=insecure make\n", 2, "RUN --security is not supported");
  ExpectError("FROM a\n# c\nONBUILD RUN make\n", 3, "ONBUILD is not supported");
  ExpectError("FROM a\nADD https://example.com/x.tgz /x\n", 2, "ADD from a URL");
  ExpectError("FROM a\nADD http://example.com/x /x\n", 2, "ADD from a URL");
  ExpectError("FROM a\nADD ftp://example.com/x /x\n", 2, "ADD from a URL");
  ExpectError("FROM a\nADD git@github.com:o/r /x\n", 2, "ADD from a git repository");
  ExpectError("FROM a\nADD git://example.com/r /x\n", 2, "ADD from a git repository");
  ExpectError("FROM a\nADD local/repo.git /x\n", 2, "ADD from a git repository");
  ExpectError("FROM a\nADD --checksum=sha256:0 a /x\n", 2, "ADD --checksum is not supported");
  ExpectError("FROM a\nCOPY --exclude=*.md . /x\n", 2, "COPY --exclude is not supported");
  ExpectError("FROM a\nCOPY --bogus a /x\n", 2, "unknown flag --bogus for COPY");
  ExpectError("FROM a\nRUN <<EOF\necho hi\nEOF\n", 2, "heredocs");
  ExpectError("FROM a\nRUN python3 <<-'PY'\n", 2, "heredocs");
  ExpectError("FROM a\nCOPY <<EOF /x\n", 2, "heredocs");
  ExpectError("FROM a\nFROBNICATE x\n", 2, "unknown instruction FROBNICATE");
  ExpectError("RUN make\nFROM a\n", 1, "RUN before the first FROM");
  ExpectError("# only a comment\n\n", 1, "no FROM");
  ExpectError("", 1, "no FROM");
  ExpectError("ARG X=1\n", 1, "no FROM");
  ExpectError("FROM a\nCOPY onlyone\n", 2, "at least one source and a destination");
  ExpectError("FROM a\nCOPY --chmod=0758 a /b\n", 2, "--chmod=0758 is not an octal mode");
  ExpectError("FROM a\nCOPY --chmod=u+x a /b\n", 2, "not an octal mode");
  ExpectError("FROM a\nCOPY --from= a /b\n", 2, "--from needs a value");
  ExpectError("FROM a AS x\nCOPY --from=x a /b\n", 2, "names the stage it is in");
  ExpectError("FROM a AS x\nCOPY --from=0 a /b\n", 2, "names a later or the same stage");
  ExpectError("FROM a AS x\nCOPY --from=1 a /b\nFROM b AS y\n", 2,
              "names a later or the same stage");
  ExpectError("FROM a AS x\n\nCOPY --from=Y a /b\nFROM b AS y\n", 3, "names a later stage");
  ExpectError("FROM a AS x\nFROM b AS X\n", 2, "already used");
  ExpectError("FROM a AS 1x\n", 1, "invalid stage name");
  ExpectError("FROM a AS\n", 1, "FROM takes an image");
  ExpectError("FROM a b\n", 1, "FROM takes an image");
  ExpectError("FROM $NOPE\n", 1, "expands to nothing");
  ExpectError("FROM a\nENV ONLYKEY\n", 2, "needs a value");
  ExpectError("FROM a\nENV A=1 B\n", 2, "'B' is not name=value");
  ExpectError("FROM a\nLABEL\n", 2, "LABEL needs a name and a value");
  ExpectError("FROM a\nENV A=${B\n", 2, "missing '}'");
  ExpectError("FROM a\nENV A=${B/x/y}\n", 2, "unsupported modifier");
  ExpectError("FROM a\nENV A=${B:?required}\n", 2, "B: required");
  ExpectError("FROM a\nENV A=${B?}\n", 2, "B: is not set");
  ExpectError("FROM a\nENV A=\"open\n", 2, "unterminated double quote");
  ExpectError("FROM a\nWORKDIR\n", 2, "WORKDIR needs a path");
  ExpectError("FROM a\nUSER\n", 2, "USER needs a user");
  ExpectError("FROM a\nEXPOSE 0\n", 2, "invalid port '0'");
  ExpectError("FROM a\nEXPOSE 80/icmp\n", 2, "invalid port '80/icmp'");
  ExpectError("FROM a\nEXPOSE 90-80\n", 2, "invalid port");
  ExpectError("FROM a\nSHELL /bin/bash -c\n", 2, "SHELL needs a JSON array");
  ExpectError("FROM a\nSHELL []\n", 2, "SHELL needs a JSON array");
  ExpectError("FROM a\nCMD\n", 2, "CMD needs a command");
  ExpectError("FROM a\nRUN\n", 2, "RUN needs a command");
  ExpectError("FROM a\nARG\n", 2, "ARG needs a name");
  ExpectError("FROM a\nARG 1X=2\n", 2, "invalid ARG name");
  ExpectError("FROM a\nWORKDIR --x /a\n", 2, "unknown flag --x for WORKDIR");
  ExpectError("FROM a\nSTOPSIGNAL\n", 2, "STOPSIGNAL needs one signal");
}

TEST(DockerfileTest, ErrorDetailsNameTheInstruction) {
  Result<Dockerfile> file = ParseDockerfile("FROM a\nrun --mount=type=ssh x\n", {});
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().details()["line"], 2);
  EXPECT_EQ(file.status().details()["instruction"], "RUN");
}

TEST(DockerfileTest, LineNumbersCountContinuationsAndComments) {
  ExpectError("FROM a\nRUN a \\\n  # c\n  b \\\n  c\nONBUILD x\n", 6, "ONBUILD");
  ExpectError("FROM a\nRUN a \\\n  b\nRUN --mount=type=tmpfs \\\n  x\n", 4, "type=tmpfs");
}

TEST(DockerfileTest, Limits) {
  Result<Dockerfile> big = ParseDockerfile("FROM a\nRUN " + std::string(300, 'x') + "\n", {},
                                           DockerfileLimits{.max_bytes = 100});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), Code::kPayloadTooLarge);
  EXPECT_TRUE(ParseDockerfile("FROM a\n", {}, DockerfileLimits{.max_bytes = 7}).ok());

  // Every instruction counts: global ARG, FROM, HEALTHCHECK included.
  const std::string four = "ARG X\nFROM a\nHEALTHCHECK NONE\nRUN a\n";
  EXPECT_TRUE(ParseDockerfile(four, {}, DockerfileLimits{.max_steps = 4}).ok());
  Result<Dockerfile> steps = ParseDockerfile(four, {}, DockerfileLimits{.max_steps = 3});
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.status().code(), Code::kInvalidRequest);
  EXPECT_EQ(steps.status().details()["line"], 4);
  EXPECT_NE(steps.status().message().find("more than 3 instructions"), std::string::npos);

  std::string many = "FROM a\n";
  for (int i = 0; i < 200; ++i) many += "RUN x\n";
  EXPECT_FALSE(ParseDockerfile(many, {}).ok());  // 201 instructions against the default 200

  const std::string stages = "FROM a\nFROM b\nFROM c\n";
  EXPECT_TRUE(ParseDockerfile(stages, {}, DockerfileLimits{.max_stages = 3}).ok());
  Result<Dockerfile> too_many = ParseDockerfile(stages, {}, DockerfileLimits{.max_stages = 2});
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().details()["line"], 3);
  EXPECT_NE(too_many.status().message().find("more than 2 stages"), std::string::npos);
}

}  // namespace
}  // namespace images_dockerfile_test
}  // namespace kiln::images
