// .dockerignore: Docker's matching table, "!" and "**", and parse errors.
#include "images/dockerignore.h"

#include <gtest/gtest.h>

#include <chrono>

namespace kiln::images {
namespace {

struct Case {
  const char* patterns;
  const char* path;
  bool excluded;
};

TEST(DockerIgnoreTest, MatchesLikeDocker) {
  const Case cases[] = {
      {"*.pyc", "a.pyc", true},
      {"*.pyc", "d/a.pyc", false},  // "*" never crosses "/"
      {"**/*.pyc", "a.pyc", true},  // "**/" may be no directory at all
      {"**/*.pyc", "d/e/a.pyc", true},
      {"**/*.pyc", "d/e/a.py", false},
      {"d/**/x", "d/x", true},
      {"d/**/x", "d/a/b/x", true},
      {"d/**/x", "e/a/x", false},
      {"docs/**", "docs/a/b.md", true},
      {"**", "anything/at/all", true},
      {"build", "build", true},
      {"build", "build/x/y.o", true},  // a directory covers what is under it
      {"build", "rebuild", false},
      {"build", "src/build", false},
      {"/build/", "build/x", true},  // cleaned: leading "/" and trailing "/" dropped
      {"./src/../tmp", "tmp/a", true},
      {"a?c", "abc", true},
      {"a?c", "a/c", false},
      {"[a-c]x", "bx", true},
      {"[a-c]x", "dx", false},
      {"[^a-c]x", "dx", true},
      {"[^a-c]x", "ax", false},
      {"\\*x", "*x", true},
      {"\\*x", "ax", false},
      {"*.log\n!keep.log", "keep.log", false},  // "!" re-includes
      {"*.log\n!keep.log", "other.log", true},
      {"!keep.log\n*.log", "keep.log", true},  // the last match wins
      {"build\n!build/keep", "build/keep", false},
      {"build\n!build/keep", "build/other", true},
      {"# comment.txt\ncomment.txt", "comment.txt", true},
      {"#x", "#x", false},  // a comment, not a pattern
      {"  spaced.txt  \r", "spaced.txt", true},
      {"*", "", false},  // the context root is never excluded
      {"", "a", false},
      {"*.md", "/README.md", true},  // a leading "/" in the path is ignored
  };
  for (const Case& c : cases) {
    Result<DockerIgnore> ignore = DockerIgnore::Parse(c.patterns);
    ASSERT_TRUE(ignore.ok()) << c.patterns << ": " << ignore.status().ToString();
    EXPECT_EQ(ignore->Excluded(c.path), c.excluded)
        << "patterns \"" << c.patterns << "\" path \"" << c.path << "\"";
  }
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
}  // namespace kiln::images
