// Recipes (src/images/parse/recipe.h): the generated Dockerfile, read back by
// ParseDockerfile; every validation error's field path; files (utf8, base64,
// modes); the limits.
#include <gtest/gtest.h>

#include <string>

#include "images/parse/dockerfile.h"
#include "images/parse/recipe.h"

namespace kiln::images {
namespace images_recipe_test {
namespace {

using nlohmann::json;
using Strings = std::vector<std::string>;

RecipeBuild Build(const json& recipe) {
  Result<RecipeBuild> build = RecipeToBuild(recipe);
  EXPECT_TRUE(build.ok()) << recipe.dump() << " -> " << build.status().ToString();
  return build.ok() ? *build : RecipeBuild{};
}

void ExpectError(const json& recipe, const std::string& field, const std::string& says,
                 Code code = Code::kInvalidRequest) {
  Result<RecipeBuild> build = RecipeToBuild(recipe);
  ASSERT_FALSE(build.ok()) << recipe.dump();
  EXPECT_EQ(build.status().code(), code) << recipe.dump();
  EXPECT_EQ(build.status().message().substr(0, field.size() + 2), field + ": ")
      << build.status().message();
  EXPECT_NE(build.status().message().find(says), std::string::npos) << build.status().message();
  EXPECT_EQ(build.status().details()["field"], field);
}

TEST(RecipeTest, EmptyRecipeIsBaseAsRoot) {
  EXPECT_EQ(Build(json::object()).dockerfile, "FROM base\nUSER root\n");
  EXPECT_TRUE(Build(json::object()).context.empty());
}

TEST(RecipeTest, FullRecipeText) {
  json recipe = {
      {"base", "python:3.12-slim"},
      {"apt", {"curl", "libpq-dev=15.6~1"}},
      {"pip", {"numpy>=1.26", "requests[socks]", "pandas==2.2.0"}},
      {"npm", {"typescript"}},
      {"files",
       {{{"path", "/etc/app.conf"}, {"content", "a=1\n"}},
        {{"path", "/usr/local/bin/run it"},
         {"content", "IyEvYmluL3NoCg=="},
         {"encoding", "base64"},
         {"mode", "0755"}}}},
      {"commands", {"useradd -m app", "echo \"$HOME\" > /x\necho 'two' \\"}},
      {"env", {{"APP_ENV", "prod $x"}, {"EMPTY", ""}}},
      {"workdir", "/srv/app"},
  };
  RecipeBuild build = Build(recipe);
  EXPECT_EQ(build.dockerfile,
            "FROM python:3.12-slim\n"
            "USER root\n"
            "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
            "--no-install-recommends 'curl' 'libpq-dev=15.6~1' && rm -rf /var/lib/apt/lists/*\n"
            "RUN python3 -m pip install --no-cache-dir --break-system-packages 'numpy>=1.26' "
            "'requests[socks]' 'pandas==2.2.0'\n"
            "RUN npm install -g 'typescript'\n"
            "COPY --chmod=0644 [\"recipe-files/0\",\"/etc/app.conf\"]\n"
            "COPY --chmod=0755 [\"recipe-files/1\",\"/usr/local/bin/run\\\\ it\"]\n"
            "RUN [\"/bin/sh\",\"-c\",\"useradd -m app\"]\n"
            "RUN [\"/bin/sh\",\"-c\",\"echo \\\"$HOME\\\" > /x\\necho 'two' \\\\\"]\n"
            "ENV APP_ENV=prod\\ \\$x EMPTY=\n"
            "WORKDIR /srv/app\n");
  ASSERT_EQ(build.context.size(), 2u);
  EXPECT_EQ(build.context[0].context_path, "recipe-files/0");
  EXPECT_EQ(build.context[0].bytes, "a=1\n");
  EXPECT_EQ(build.context[0].mode, 0644u);
  EXPECT_EQ(build.context[1].context_path, "recipe-files/1");
  EXPECT_EQ(build.context[1].bytes, "#!/bin/sh\n");
  EXPECT_EQ(build.context[1].mode, 0755u);
}

// The Dockerfile means what the recipe says: parse it back.
TEST(RecipeTest, DockerfileParsesBackToTheRecipe) {
  json recipe = {
      {"apt", {"git"}},
      {"files", {{{"path", "/o dd/$HOME/a'b\"c\\d"}, {"content", "x"}, {"mode", 384}}}},
      {"commands", {"line one\nline two \\", "RUN --mount=type=secret x", "cat <<EOF\nhi\nEOF"}},
      {"env", {{"A", "v 'q' \"d\" \\ $B ${C}"}}},
      {"workdir", "/w s/$x"},
  };
  RecipeBuild build = Build(recipe);
  Result<Dockerfile> file = ParseDockerfile(build.dockerfile, {});
  ASSERT_TRUE(file.ok()) << build.dockerfile << "\n" << file.status().ToString();
  ASSERT_EQ(file->stages.size(), 1u);
  EXPECT_EQ(file->stages[0].base, "base");
  const auto& steps = file->stages[0].steps;
  ASSERT_EQ(steps.size(), 8u);
  EXPECT_EQ(std::get<UserInstr>(steps[0].instruction).user, "root");
  const auto& copy = std::get<CopyInstr>(steps[2].instruction);
  EXPECT_EQ(copy.sources, (Strings{"recipe-files/0"}));
  EXPECT_EQ(copy.dest, "/o dd/$HOME/a'b\"c\\d");
  EXPECT_EQ(copy.chmod, 0600u);
  for (int i = 0; i < 3; ++i) {
    const auto& run = std::get<RunInstr>(steps[3 + i].instruction);
    EXPECT_TRUE(run.command.exec_form);
    EXPECT_EQ(run.command.argv,
              (Strings{"/bin/sh", "-c", recipe["commands"][i].get<std::string>()}));
  }
  EXPECT_EQ(std::get<EnvInstr>(steps[6].instruction).vars,
            (std::vector<std::pair<std::string, std::string>>{{"A", "v 'q' \"d\" \\ $B ${C}"}}));
  EXPECT_EQ(std::get<WorkdirInstr>(steps[7].instruction).path, "/w s/$x");
}

TEST(RecipeTest, FileModesAndEncodings) {
  json files = json::array();
  files.push_back({{"path", "/a"}, {"content", ""}, {"mode", 0755}});
  files.push_back({{"path", "/b"}, {"content", "AAEC/w=="}, {"encoding", "base64"}});
  files.push_back({{"path", "/c"}, {"content", "é"}, {"encoding", "utf8"}, {"mode", "600"}});
  files.push_back({{"path", "/d"}, {"content", "x"}, {"mode", "04755"}});
  RecipeBuild build = Build({{"files", files}});
  ASSERT_EQ(build.context.size(), 4u);
  EXPECT_EQ(build.context[0].mode, 0755u);
  EXPECT_EQ(build.context[1].bytes, std::string("\x00\x01\x02\xff", 4));
  EXPECT_EQ(build.context[1].mode, 0644u);
  EXPECT_EQ(build.context[2].bytes, "é");
  EXPECT_EQ(build.context[2].mode, 0600u);
  EXPECT_EQ(build.context[3].mode, 04755u);
  EXPECT_NE(build.dockerfile.find("COPY --chmod=4755 [\"recipe-files/3\",\"/d\"]"),
            std::string::npos)
      << build.dockerfile;
}

TEST(RecipeTest, ValidationErrorsNameTheField) {
  ExpectError(json::array(), "recipe", "must be an object");
  ExpectError({{"bogus", 1}}, "recipe.bogus", "unknown field");
  ExpectError({{"base", 1}}, "recipe.base", "must be a string");
  ExpectError({{"base", "Not Valid"}}, "recipe.base", "neither a kiln image");
  ExpectError({{"apt", "curl"}}, "recipe.apt", "must be an array");
  ExpectError({{"apt", {"curl", "git", "a;rm -rf /"}}}, "recipe.apt[2]", "not a package name");
  ExpectError({{"apt", {"curl", 3}}}, "recipe.apt[1]", "must be a string");
  ExpectError({{"pip", {"x y"}}}, "recipe.pip[0]", "not a package name");
  ExpectError({{"pip", {"-e ."}}}, "recipe.pip[0]", "not a package name");
  ExpectError({{"pip", {"a'b"}}}, "recipe.pip[0]", "not a package name");
  ExpectError({{"apt", {"lib*"}}}, "recipe.apt[0]", "not a package name");
  ExpectError({{"npm", {"ok", "$(id)"}}}, "recipe.npm[1]", "not a package name");
  ExpectError({{"npm", {""}}}, "recipe.npm[0]", "not a package name");
  ExpectError({{"commands", {"ok", "  \n"}}}, "recipe.commands[1]", "is empty");
  ExpectError({{"commands", {std::string("a\0b", 3)}}}, "recipe.commands[0]", "NUL");
  ExpectError({{"commands", {{"x"}}}}, "recipe.commands[0]", "must be a string");
  ExpectError({{"files", json::object()}}, "recipe.files", "must be an array");
  ExpectError({{"files", {"x"}}}, "recipe.files[0]", "must be an object");
  json ok_file = {{"path", "/a"}, {"content", "x"}};
  ExpectError({{"files", {ok_file, {{"content", "x"}}}}}, "recipe.files[1].path", "required");
  ExpectError({{"files", {{{"path", "/a"}}}}}, "recipe.files[0].content", "required");
  ExpectError({{"files", {{{"path", "rel"}, {"content", ""}}}}}, "recipe.files[0].path",
              "absolute");
  ExpectError({{"files", {{{"path", "/a/../etc"}, {"content", ""}}}}}, "recipe.files[0].path",
              "'..'");
  ExpectError({{"files", {{{"path", "/a\nb"}, {"content", ""}}}}}, "recipe.files[0].path",
              "control characters");
  ExpectError({{"files", {{{"path", "/a"}, {"content", ""}, {"owner", "x"}}}}},
              "recipe.files[0].owner", "unknown field");
  ExpectError({{"files", {{{"path", "/a"}, {"content", "!!"}, {"encoding", "base64"}}}}},
              "recipe.files[0].content", "not valid base64");
  ExpectError({{"files", {{{"path", "/a"}, {"content", ""}, {"encoding", "hex"}}}}},
              "recipe.files[0].encoding", "\"utf8\" or \"base64\"");
  ExpectError({{"files", {{{"path", "/a"}, {"content", ""}, {"mode", "0789"}}}}},
              "recipe.files[0].mode", "not an octal mode");
  ExpectError({{"files", {{{"path", "/a"}, {"content", ""}, {"mode", 070000}}}}},
              "recipe.files[0].mode", "between 0 and 07777");
  ExpectError({{"files", {{{"path", "/a"}, {"content", ""}, {"mode", -1}}}}},
              "recipe.files[0].mode", "between 0 and 07777");
  ExpectError({{"files", {{{"path", "/a"}, {"content", ""}, {"mode", true}}}}},
              "recipe.files[0].mode", "integer or an octal string");
  ExpectError({{"env", {"A"}}}, "recipe.env", "must be an object");
  ExpectError({{"env", {{"1A", "x"}}}}, "recipe.env.1A", "not a variable name");
  ExpectError({{"env", {{"A-B", "x"}}}}, "recipe.env.A-B", "not a variable name");
  ExpectError({{"env", {{"A", 1}}}}, "recipe.env.A", "must be a string");
  ExpectError({{"env", {{"A", "a\nb"}}}}, "recipe.env.A", "control characters");
  ExpectError({{"workdir", "rel"}}, "recipe.workdir", "absolute");
  ExpectError({{"workdir", 1}}, "recipe.workdir", "must be a string");
}

TEST(RecipeTest, AcceptsKilnImagesAndReferencesAsBase) {
  EXPECT_EQ(Build({{"base", "team/py@3"}}).dockerfile.substr(0, 18), "FROM team/py@3\nUSE");
  EXPECT_EQ(Build({{"base", "ghcr.io/o/app:1"}}).dockerfile.substr(0, 21),
            "FROM ghcr.io/o/app:1\n");
}

TEST(RecipeTest, Limits) {
  json files = json::array();
  for (int i = 0; i < 256; ++i)
    files.push_back({{"path", "/f" + std::to_string(i)}, {"content", "x"}});
  EXPECT_EQ(Build({{"files", files}}).context.size(), 256u);
  files.push_back({{"path", "/last"}, {"content", "x"}});
  ExpectError({{"files", files}}, "recipe.files", "more than 256 files", Code::kPayloadTooLarge);

  const std::string half(512 * 1024, 'a');
  json exact = {{{"path", "/a"}, {"content", half}}, {{"path", "/b"}, {"content", half}}};
  EXPECT_EQ(Build({{"files", exact}}).context.size(), 2u);
  json over = exact;
  over.push_back({{"path", "/c"}, {"content", "x"}});
  ExpectError({{"files", over}}, "recipe.files", "more than 1 MiB", Code::kPayloadTooLarge);
}

}  // namespace
}  // namespace images_recipe_test
}  // namespace kiln::images
