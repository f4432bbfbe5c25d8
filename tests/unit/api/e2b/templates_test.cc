// E2B's template builds, the pure part (src/api/e2b/templates.h): the
// bodies read, the steps written as the Dockerfile kiln's builder runs
// (which its own parser must take, step for step), statuses in E2B's shape.
#include <gtest/gtest.h>

#include "api/e2b/routes.h"
#include "api/e2b/templates.h"
#include "api/errors.h"
#include "images/parse/dockerfile.h"

namespace kiln::api::e2b {
namespace e2b_templates_test {
namespace {

using nlohmann::json;

const std::string kHash(64, 'a');
const std::string kOtherHash(64, 'b');

std::optional<Sha256Digest> Uploaded(const std::string& hash) {
  if (hash == kHash) return Sha256Digest::Of("the archive");
  return std::nullopt;
}

KilnTemplateBuild Translate(const json& body) {
  auto built = TemplateDockerfile(ReadTemplateBuild(body), Uploaded);
  EXPECT_TRUE(built.ok()) << built.status().message();
  return built.ok() ? *built : KilnTemplateBuild{};
}

// The steps kiln's parser reads from `text`, each as the parser names it.
std::vector<images::Step> Parsed(const std::string& text) {
  auto file = images::ParseDockerfile(text, {});
  EXPECT_TRUE(file.ok()) << file.status().message() << "\n" << text;
  if (!file.ok() || file->stages.size() != 1) return {};
  return file->stages[0].steps;
}

Status StatusOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e.status();
  }
  return Status::Ok();
}

TEST(E2bTemplatesTest, TheRequestNamesTagsAndShape) {
  TemplateRequest r = ReadTemplateRequest(json{{"name", "task__0123abcd:v1"},
                                               {"tags", {"default", "v1", "x"}},
                                               {"cpuCount", 1},
                                               {"memoryMB", 1024},
                                               {"minFreeDiskMB", nullptr}});
  EXPECT_EQ(r.name, "task__0123abcd");
  EXPECT_EQ(r.tags, (std::vector<std::string>{"v1", "latest", "x"}));
  EXPECT_TRUE(r.given.vcpu && r.given.memory && !r.given.disk);
  EXPECT_EQ(r.shape.vcpu, 1);
  EXPECT_EQ(r.shape.memory_mib, 1024);
  EXPECT_TRUE(ReadTemplateRequest(json{{"name", "plain"}}).tags.empty());
  Status bad = StatusOf([] { ReadTemplateRequest(json{{"cpuCount", 99}, {"bogus", 1}}); });
  EXPECT_EQ(bad.code(), Code::kInvalidRequest);
  std::string text = bad.details().dump();
  for (const char* field : {"body.name", "body.cpuCount", "body.bogus"})
    EXPECT_NE(text.find(field), std::string::npos) << field << " in " << text;
  EXPECT_EQ(KilnTemplateRef("t:default"), "t");
  EXPECT_EQ(KilnTemplateRef("t:v2"), "t:v2");
  EXPECT_EQ(E2bTag("latest"), "default");
}

TEST(E2bTemplatesTest, ADockerfilesStepsBecomeKilnsInstructionForInstruction) {
  // What the SDK sends for `FROM ubuntu:24.04 / WORKDIR /app / COPY app /app/
  // / RUN make` (its Dockerfile reader adds the USER and WORKDIR steps).
  json body = {{"fromImage", "ubuntu:24.04"},
               {"force", false},
               {"steps",
                {{{"type", "USER"}, {"args", {"root"}}, {"force", false}},
                 {{"type", "WORKDIR"}, {"args", {"/"}}, {"force", false}},
                 {{"type", "WORKDIR"}, {"args", {"/app"}}, {"force", false}},
                 {{"type", "COPY"},
                  {"args", {"app", "/app/", "", ""}},
                  {"filesHash", kHash},
                  {"force", false}},
                 {{"type", "RUN"}, {"args", {"make \"all\" && echo $HOME"}}, {"force", false}},
                 {{"type", "USER"}, {"args", {"user"}}, {"force", false}}}}};
  KilnTemplateBuild k = Translate(body);
  auto steps = Parsed(k.dockerfile);
  // FROM, then E2B's provisioning (USER root, make `user`, USER user,
  // WORKDIR, E2B's shell), then one line per step (the second USER user:
  // no new account).
  ASSERT_EQ(steps.size() + 1, k.step_names.size()) << k.dockerfile;
  EXPECT_TRUE(k.dockerfile.starts_with("FROM docker.io/library/ubuntu:24.04\n")) << k.dockerfile;
  std::vector<std::string> names(k.step_names.begin(), k.step_names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"base", "base", "base", "base", "base", "base", "1",
                                             "2", "3", "4", "5", "6"}));
  // The COPY reads the uploaded archive as a named context, owned by root
  // (the current user), and keeps its destination.
  const auto& copy = std::get<images::CopyInstr>(steps[8].instruction);
  EXPECT_EQ(copy.from, kHash);
  EXPECT_EQ(copy.chown, "root:root");
  EXPECT_EQ(copy.sources, (std::vector<std::string>{"app"}));
  EXPECT_EQ(copy.dest, "/app/");
  ASSERT_EQ(k.contexts.count(kHash), 1u);
  // The RUN reads as written; its command reaches E2B's shell (bash when
  // there is one) as one argument, quotes and $ intact.
  const auto& run = std::get<images::RunInstr>(steps[9].instruction);
  EXPECT_EQ(steps[9].text, "RUN make \"all\" && echo $HOME");
  EXPECT_FALSE(run.command.exec_form);
  ASSERT_EQ(run.command.argv.size(), 5u);
  EXPECT_EQ(run.command.argv[3], "e2b-run");
  EXPECT_EQ(run.command.argv.back(), "make \"all\" && echo $HOME");
  EXPECT_EQ(std::get<images::UserInstr>(steps[10].instruction).user, "user");
  // A command of several lines (a heredoc's) cannot be a line of its own:
  // it goes in exec form, to the same shell.
  KilnTemplateBuild multi = Translate(
      json{{"steps", {{{"type", "RUN"}, {"args", {"cat <<EOF > f\nx\nEOF\\"}}}}}});
  auto multi_steps = Parsed(multi.dockerfile);
  ASSERT_FALSE(multi_steps.empty());
  const auto& heredoc = std::get<images::RunInstr>(multi_steps.back().instruction);
  EXPECT_TRUE(heredoc.command.exec_form);
  EXPECT_EQ(heredoc.command.argv.back(), "cat <<EOF > f\nx\nEOF\\");
  EXPECT_EQ(heredoc.command.argv[3], "e2b-run");
  EXPECT_TRUE(k.cache);
  EXPECT_FALSE(k.rebuild_from_step);
  EXPECT_FALSE(k.start);
}

TEST(E2bTemplatesTest, UsersGlobsModesEnvsAndTheStartCommand) {
  json body = {{"fromTemplate", "base"},
               {"steps",
                {{{"type", "RUN"}, {"args", {"id", "root"}}},
                 {{"type", "USER"}, {"args", {"app", "true"}}},
                 {{"type", "COPY"},
                  {"args", {"./src/**/*.py", "lib", "", "0755"}},
                  {"filesHash", kHash},
                  {"force", true}},
                 {{"type", "ENV"}, {"args", {"A", "two words \"q\"", "B", "$A/x"}}},
                 {{"type", "WORKDIR"}, {"args", {"my dir"}}}}},
               {"startCmd", "python -m http.server 8000"},
               {"readyCmd", "sleep 1"}};
  KilnTemplateBuild k = Translate(body);
  EXPECT_TRUE(k.dockerfile.starts_with("FROM base\n"));
  auto steps = Parsed(k.dockerfile);
  ASSERT_FALSE(steps.empty());
  // RUN as root, between a USER root and the current user again.
  EXPECT_NE(k.dockerfile.find("USER \"root\"\nRUN "), std::string::npos) << k.dockerfile;
  // A new account is made, as root, before USER app; the COPY it owns has
  // the glob's fixed folder as source and a folder as destination.
  size_t made = k.dockerfile.find("\"e2b-user\",\"app\"]");
  ASSERT_NE(made, std::string::npos) << k.dockerfile;
  EXPECT_LT(made, k.dockerfile.find("USER \"app\""));
  const images::CopyInstr* copy = nullptr;
  const images::EnvInstr* env = nullptr;
  for (const auto& s : steps) {
    if (auto c = std::get_if<images::CopyInstr>(&s.instruction)) copy = c;
    if (auto e = std::get_if<images::EnvInstr>(&s.instruction)) env = e;
  }
  ASSERT_TRUE(copy && env);
  EXPECT_EQ(copy->sources, (std::vector<std::string>{"src"}));
  EXPECT_EQ(copy->dest, "lib/");
  EXPECT_EQ(copy->chown, "app:app");
  EXPECT_EQ(copy->chmod, 0755u);
  ASSERT_EQ(env->vars.size(), 2u);
  EXPECT_EQ(env->vars[0].second, "two words \"q\"");
  // Expanded as Docker does: with the values before this ENV, A's unset.
  EXPECT_EQ(env->vars[1].second, "/x");
  EXPECT_EQ(std::get<images::WorkdirInstr>(steps.back().instruction).path, "/home/user/my dir");
  // The forced COPY and what follows it run again (its kiln step number).
  ASSERT_TRUE(k.rebuild_from_step);
  EXPECT_EQ(k.step_names[*k.rebuild_from_step - 1], "3");
  ASSERT_TRUE(k.start);
  EXPECT_EQ(k.start->command, "python -m http.server 8000");
  EXPECT_EQ(k.start->ready_command, "sleep 1");
  // A whole-template force skips the cache; E2B's base image is kiln's.
  EXPECT_FALSE(Translate(json{{"force", true}, {"steps", json::array()}}).cache);
  EXPECT_TRUE(Translate(json{{"fromImage", "e2bdev/base"}}).dockerfile.starts_with("FROM base\n"));
}

TEST(E2bTemplatesTest, RefusalsNameTheStep) {
  auto refused = [](const json& steps) {
    auto r = TemplateDockerfile(ReadTemplateBuild(json{{"fromImage", "alpine"}, {"steps", steps}}),
                                Uploaded);
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_TRUE(refused(json::array({{{"type", "COPY"}, {"args", {"a", "/a"}}}}))
                  .starts_with("body.steps[0]: COPY needs the filesHash"));
  EXPECT_NE(
      refused(json::array({{{"type", "RUN"}, {"args", {"true"}}},
                           {{"type", "COPY"}, {"args", {"a", "/a"}}, {"filesHash", kOtherHash}}}))
          .find("body.steps[1]: the files of hash " + kOtherHash + " were not uploaded"),
      std::string::npos);
  EXPECT_NE(refused(json::array({{{"type", "USER"}, {"args", {"bad name; rm -rf /"}}}}))
                .find("body.steps[0]"),
            std::string::npos);
  EXPECT_NE(refused(json::array({{{"type", "ENV"}, {"args", {"A", "x\ny"}}}})).find("newline"),
            std::string::npos);
  EXPECT_NE(
      refused(json::array({{{"type", "COPY"}, {"args", {"../x", "/a"}}, {"filesHash", kHash}}}))
          .find("within the uploaded files"),
      std::string::npos);
  EXPECT_NE(
      refused(
          json::array({{{"type", "COPY"}, {"args", {"a", "/a", "", "rwx"}}, {"filesHash", kHash}}}))
          .find("octal"),
      std::string::npos);
  Status s = StatusOf([] { ReadTemplateBuild(json{{"steps", {{{"type", "ADD"}}}}}); });
  EXPECT_NE(s.details().dump().find("body.steps[0].type"), std::string::npos);
  s = StatusOf([] {
    ReadTemplateBuild(json{{"fromImage", "x"}, {"fromImageRegistry", {{"type", "aws"}}}});
  });
  EXPECT_EQ(s.code(), Code::kNotSupported);
  EXPECT_EQ(s.details()["feature"], "fromImageRegistry");
}

TEST(E2bTemplatesTest, StatusesAndLogEntriesInE2bsShape) {
  images::ImageRecord r;
  r.id = "00000000-0000-4000-8000-000000000001";
  r.name = "t";
  r.step_names = {"base", "base", "1", "2"};
  r.state = images::ImageState::kBuilding;
  images::LogPage page;
  page.lines.push_back({1, 0, "stdout", 3, "compiling"});
  json st = BuildStatusJson(r, page);
  EXPECT_EQ(st["status"], "building");
  EXPECT_EQ(st["templateID"], "t");
  EXPECT_EQ(st["logEntries"][0]["step"], "1");
  EXPECT_EQ(st["logEntries"][0]["level"], "info");
  EXPECT_EQ(st["logEntries"][0]["timestamp"], "1970-01-01T00:00:00.000Z");
  EXPECT_FALSE(st.contains("reason"));
  r.state = images::ImageState::kQueued;
  EXPECT_EQ(BuildStatusJson(r, {})["status"], "waiting");
  r.state = images::ImageState::kFailed;
  r.error = {{"code", "step_failed"}, {"message", "step 4 (line 4) failed with exit code 2"},
             {"step", 4},         {"instruction", "RUN make"},
             {"exitCode", 2},     {"logTail", {"oops"}}};
  st = BuildStatusJson(r, {});
  EXPECT_EQ(st["status"], "error");
  EXPECT_EQ(st["reason"]["step"], "2");
  EXPECT_EQ(st["reason"]["message"], "step 2 (RUN make) failed with exit code 2");
  EXPECT_EQ(st["reason"]["logEntries"][0]["message"], "oops");
  r.error = {{"code", "start_failed"}, {"message", "not ready"}};
  EXPECT_EQ(BuildStatusJson(r, {})["reason"]["step"], "finalize");
  EXPECT_EQ(WaitingStatusJson("t", "b")["status"], "waiting");
}

}  // namespace
}  // namespace e2b_templates_test
}  // namespace kiln::api::e2b
