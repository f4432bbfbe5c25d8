// .dockerignore: Docker's matching table, "!" and "**", and parse errors.
#include "images/context/dockerignore.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include <nlohmann/json.hpp>

namespace kiln::images {
namespace images_dockerignore_test {
namespace {

// One table for the three matchers (this one, the Python and the TypeScript
// SDK's): tests/data/dockerignore_cases.json.
TEST(DockerIgnoreTest, MatchesLikeDocker) {
  std::ifstream in(std::string(KILN_TEST_DATA_DIR) + "/dockerignore_cases.json");
  ASSERT_TRUE(in) << "tests/data/dockerignore_cases.json";
  nlohmann::json table = nlohmann::json::parse(in);
  ASSERT_GE(table["cases"].size(), 30u);
  for (const auto& c : table["cases"]) {
    const std::string patterns = c["patterns"], path = c["path"];
    Result<DockerIgnore> ignore = DockerIgnore::Parse(patterns);
    ASSERT_TRUE(ignore.ok()) << patterns << ": " << ignore.status().ToString();
    EXPECT_EQ(ignore->Excluded(path), c["excluded"].get<bool>())
        << "patterns \"" << patterns << "\" path \"" << path << "\"";
  }
  // The context root is never excluded.
  EXPECT_FALSE(DockerIgnore::Parse("*")->Excluded(""));
  EXPECT_TRUE(DockerIgnore::Parse("*.md")->Excluded("/README.md"));  // a leading "/" is ignored
}

TEST(DockerIgnoreTest, HasExceptions) {
  EXPECT_FALSE(DockerIgnore::Parse("a\nb")->HasExceptions());
  EXPECT_TRUE(DockerIgnore::Parse("a\n!a/b")->HasExceptions());
}

TEST(DockerIgnoreTest, BadPatternsNameTheLine) {
  const struct {
    const char* text;
    int line;
  } cases[] = {{"ok\n[abc", 2}, {"a\nb\n!", 3}, {"trailing\\", 1}, {"x\n\n[]", 3}, {"[a-]", 1}};
  for (const auto& c : cases) {
    Result<DockerIgnore> ignore = DockerIgnore::Parse(c.text);
    ASSERT_FALSE(ignore.ok()) << c.text;
    EXPECT_EQ(ignore.status().code(), Code::kInvalidRequest);
    std::string prefix = ".dockerignore line " + std::to_string(c.line) + ": bad pattern";
    EXPECT_EQ(ignore.status().message().rfind(prefix, 0), 0u) << ignore.status().message();
    EXPECT_EQ(ignore.status().details()["line"], c.line);
  }
}

TEST(DockerIgnoreTest, GlobMatchEdges) {
  EXPECT_TRUE(GlobMatch("a/*/c", "a/b/c"));
  EXPECT_FALSE(GlobMatch("a/*/c", "a/b/d/c"));
  EXPECT_TRUE(GlobMatch("a/**/c", "a/b/d/c"));
  EXPECT_TRUE(GlobMatch("?", "é"));  // one character, not one byte
  EXPECT_FALSE(GlobMatch("[abc", "a"));
  EXPECT_TRUE(ValidGlob("[\\]]"));
  EXPECT_TRUE(GlobMatch("[\\]]", "]"));
  EXPECT_FALSE(ValidGlob("[abc"));
}

// Patterns arrive with contexts from API users: no exponential backtracking.
TEST(DockerIgnoreTest, HostilePatternStaysFast) {
  std::string pattern;
  for (int i = 0; i < 30; ++i) pattern += "*a";
  pattern += "b\n**/**/**/**/**/**/**/**/z";
  Result<DockerIgnore> ignore = DockerIgnore::Parse(pattern);
  ASSERT_TRUE(ignore.ok());
  std::string path(200, 'a');
  std::string deep;
  for (int i = 0; i < 60; ++i) deep += "d/";
  deep += "y";
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(ignore->Excluded(path));
  EXPECT_FALSE(ignore->Excluded(deep));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace images_dockerignore_test
}  // namespace kiln::images
