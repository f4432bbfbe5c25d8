// Request-body validation (src/api/validate.h): every problem is reported
// with its path, all of them at once, as one 400 invalid_request.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "api/errors.h"
#include "api/validate.h"

namespace kiln::api {
namespace validate_test {
namespace {

using nlohmann::json;

// Runs Finish() and returns the error it throws (status 0 if none).
ApiError FinishError(FieldReader& f) {
  try {
    f.Finish();
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(Status::Ok());
}

std::set<std::string> IssuePaths(const ApiError& e) {
  std::set<std::string> out;
  if (!e.status().details().is_object() || !e.status().details().contains("issues")) return out;
  for (const auto& i : e.status().details()["issues"]) out.insert(i.at("path").get<std::string>());
  return out;
}

std::string IssueMessage(const ApiError& e, const std::string& path) {
  for (const auto& i : e.status().details()["issues"])
    if (i.at("path") == path) return i.at("message").get<std::string>();
  return "(no issue for " + path + ")";
}

TEST(ValidateTest, ValidBodyReadsAllFieldsWithoutError) {
  json body = {{"vcpu", 4},   {"memoryMiB", 2048},    {"name", "box-1"},
               {"tty", true}, {"argv", {"ls", "-l"}}, {"env", {{"A", "1"}, {"B_2", ""}}}};
  FieldReader f(body);
  EXPECT_EQ(f.Int("vcpu", 1, 16), 4);
  EXPECT_EQ(f.Int("memoryMiB", 128, 65536), 2048);
  EXPECT_EQ(f.String("name", 64), "box-1");
  EXPECT_EQ(f.Bool("tty"), true);
  EXPECT_EQ(f.StringList("argv", 10), (std::vector<std::string>{"ls", "-l"}));
  auto env = f.StringMap("env", 10, 16, 16);
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->size(), 2u);
  EXPECT_EQ(env->at("A"), "1");
  EXPECT_EQ(env->at("B_2"), "");
  EXPECT_NO_THROW(f.Finish());
}

TEST(ValidateTest, AbsentAndNullFieldsAreNullopt) {
  json body = {{"memoryMiB", nullptr}};
  FieldReader f(body);
  EXPECT_FALSE(f.Int("vcpu", 1, 16).has_value());
  EXPECT_FALSE(f.Int("memoryMiB", 128, 65536).has_value());
  EXPECT_FALSE(f.String("name", 10).has_value());
  EXPECT_FALSE(f.Bool("tty").has_value());
  EXPECT_FALSE(f.StringList("argv", 10).has_value());
  EXPECT_FALSE(f.StringMap("env", 10, 10, 10).has_value());
  EXPECT_NO_THROW(f.Finish());
}

TEST(ValidateTest, EmptyObjectIsFine) {
  json body = json::object();
  FieldReader f(body);
  EXPECT_FALSE(f.Int("vcpu", 1, 16).has_value());
  EXPECT_NO_THROW(f.Finish());
}

TEST(ValidateTest, IntBoundsAreInclusive) {
  json body = {{"lo", 128}, {"hi", 65536}};
  FieldReader f(body);
  EXPECT_EQ(f.Int("lo", 128, 65536), 128);
  EXPECT_EQ(f.Int("hi", 128, 65536), 65536);
  EXPECT_NO_THROW(f.Finish());
}

TEST(ValidateTest, IntOutOfRangeReportsPathAndRange) {
  for (int64_t bad :
       {int64_t{127}, int64_t{65537}, int64_t{0}, int64_t{-1}, INT64_MIN, INT64_MAX}) {
    json body = {{"memoryMiB", bad}};
    FieldReader f(body);
    EXPECT_FALSE(f.Int("memoryMiB", 128, 65536).has_value()) << bad;
    ApiError e = FinishError(f);
    EXPECT_EQ(e.http_status(), 400) << bad;
    EXPECT_EQ(CodeName(e.status().code()), "invalid_request");
    EXPECT_EQ(IssuePaths(e), std::set<std::string>{"body.memoryMiB"}) << bad;
    EXPECT_EQ(IssueMessage(e, "body.memoryMiB"), "must be an integer from 128 to 65536");
    EXPECT_NE(std::string(e.what()).find("body.memoryMiB"), std::string::npos) << e.what();
  }
}

TEST(ValidateTest, HugeUnsignedIntIsOutOfRangeNotWrapped) {
  // 2^64-1 must not wrap to -1 and slip into a range that allows it.
  json body = json::parse(R"({"n": 18446744073709551615, "m": 9223372036854775808})");
  FieldReader f(body);
  EXPECT_FALSE(f.Int("n", -5, 5).has_value());
  EXPECT_FALSE(f.Int("m", INT64_MIN, 0).has_value());
  ApiError e = FinishError(f);
  EXPECT_EQ(IssuePaths(e), (std::set<std::string>{"body.n", "body.m"}));
}

TEST(ValidateTest, IntRejectsWrongTypes) {
  json body = {{"a", "4"}, {"b", 4.5}, {"c", true}, {"d", json::array({4})}, {"e", json::object()},
               {"f", 4.0}};
  FieldReader f(body);
  for (const char* n : {"a", "b", "c", "d", "e", "f"})
    EXPECT_FALSE(f.Int(n, 0, 100).has_value()) << n;
  ApiError e = FinishError(f);
  EXPECT_EQ(IssuePaths(e),
            (std::set<std::string>{"body.a", "body.b", "body.c", "body.d", "body.e", "body.f"}));
}

TEST(ValidateTest, StringTypeAndMaxLength) {
  json body = {{"ok", std::string(64, 'x')}, {"long", std::string(65, 'x')}, {"num", 5}};
  FieldReader f(body);
  EXPECT_EQ(f.String("ok", 64), std::string(64, 'x'));
  EXPECT_FALSE(f.String("long", 64).has_value());
  EXPECT_FALSE(f.String("num", 64).has_value());
  ApiError e = FinishError(f);
  EXPECT_EQ(IssuePaths(e), (std::set<std::string>{"body.long", "body.num"}));
  EXPECT_EQ(IssueMessage(e, "body.long"), "must be at most 64 bytes");
  EXPECT_EQ(IssueMessage(e, "body.num"), "must be a string");
}

TEST(ValidateTest, StringLengthCountsBytesNotCharacters) {
  json body = {{"s", "\xC3\xA9\xC3\xA9"}};  // 2 characters, 4 bytes
  FieldReader f(body);
  EXPECT_FALSE(f.String("s", 3).has_value());
  EXPECT_THROW(f.Finish(), ApiError);
}

TEST(ValidateTest, BoolRejectsNonBooleans) {
  json body = {{"a", 1}, {"b", "true"}, {"c", false}};
  FieldReader f(body);
  EXPECT_FALSE(f.Bool("a").has_value());
  EXPECT_FALSE(f.Bool("b").has_value());
  EXPECT_EQ(f.Bool("c"), false);
  ApiError e = FinishError(f);
  EXPECT_EQ(IssuePaths(e), (std::set<std::string>{"body.a", "body.b"}));
  EXPECT_EQ(IssueMessage(e, "body.a"), "must be true or false");
}

TEST(ValidateTest, StringListItemPath) {
  json body = {{"argv", json::array({"ls", "-l", 3, "x"})}};
  FieldReader f(body);
  EXPECT_FALSE(f.StringList("argv", 10).has_value());
  ApiError e = FinishError(f);
  EXPECT_EQ(IssuePaths(e), std::set<std::string>{"body.argv[2]"});
  EXPECT_EQ(IssueMessage(e, "body.argv[2]"), "must be a string");
}

TEST(ValidateTest, StringListLimitsAndType) {
  json body = {{"many", json::array({"a", "b", "c"})},
               {"three", json::array({"a", "b", "c"})},
               {"notlist", "ls -l"},
               {"empty", json::array()}};
  FieldReader f(body);
  EXPECT_FALSE(f.StringList("many", 2).has_value());
  EXPECT_EQ(f.StringList("three", 3)->size(), 3u);
  EXPECT_FALSE(f.StringList("notlist", 3).has_value());
  auto empty = f.StringList("empty", 3);
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->empty());
  ApiError e = FinishError(f);
  EXPECT_EQ(IssuePaths(e), (std::set<std::string>{"body.many", "body.notlist"}));
  EXPECT_EQ(IssueMessage(e, "body.many"), "must have at most 2 items");
}

TEST(ValidateTest, StringMapLimits) {
  json body = {{"tooMany", {{"a", "1"}, {"b", "2"}, {"c", "3"}}},
               {"longKey", {{"abcdef", "1"}}},
               {"longValue", {{"k", "123456"}}},
               {"nonString", {{"k", 1}}},
               {"emptyKey", {{"", "v"}}},
               {"notMap", json::array({"a=1"})},
               {"atLimit", {{"abcde", "12345"}, {"b", "2"}}}};
  FieldReader f(body);
  EXPECT_FALSE(f.StringMap("tooMany", 2, 5, 5).has_value());
  EXPECT_FALSE(f.StringMap("longKey", 2, 5, 5).has_value());
  EXPECT_FALSE(f.StringMap("longValue", 2, 5, 5).has_value());
  EXPECT_FALSE(f.StringMap("nonString", 2, 5, 5).has_value());
  EXPECT_FALSE(f.StringMap("emptyKey", 2, 5, 5).has_value());
  EXPECT_FALSE(f.StringMap("notMap", 2, 5, 5).has_value());
  auto ok = f.StringMap("atLimit", 2, 5, 5);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->at("abcde"), "12345");
  ApiError e = FinishError(f);
  EXPECT_EQ(IssuePaths(e),
            (std::set<std::string>{"body.tooMany", "body.longKey.abcdef", "body.longValue.k",
                                   "body.nonString.k", "body.emptyKey.", "body.notMap"}));
  EXPECT_EQ(IssueMessage(e, "body.tooMany"), "must have at most 2 entries");
  EXPECT_EQ(IssueMessage(e, "body.longValue.k"), "value must be at most 5 bytes");
}

TEST(ValidateTest, UnknownFieldsAreReported) {
  json body = {{"vcpu", 2}, {"memoryMb", 1024}, {"extra", nullptr}};
  FieldReader f(body);
  EXPECT_EQ(f.Int("vcpu", 1, 16), 2);
  EXPECT_FALSE(f.Int("memoryMiB", 128, 65536).has_value());
  ApiError e = FinishError(f);
  EXPECT_EQ(e.http_status(), 400);
  EXPECT_EQ(IssuePaths(e), (std::set<std::string>{"body.memoryMb", "body.extra"}));
  EXPECT_EQ(IssueMessage(e, "body.memoryMb"), "unknown field");
}

TEST(ValidateTest, RawAcceptsAFieldWithoutReadingIt) {
  json body = {{"stdin", {{"data", "x"}}}, {"ignored", 1}};
  FieldReader f(body);
  const json* raw = f.Raw("stdin");
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ((*raw)["data"], "x");
  EXPECT_EQ(f.Raw("absent"), nullptr);
  ApiError e = FinishError(f);
  EXPECT_EQ(IssuePaths(e), std::set<std::string>{"body.ignored"});
}

TEST(ValidateTest, HasReportsPresence) {
  json body = {{"a", 1}, {"n", nullptr}};
  FieldReader f(body);
  EXPECT_TRUE(f.has("a"));
  EXPECT_TRUE(f.has("n"));
  EXPECT_FALSE(f.has("b"));
  json arr = json::array();
  FieldReader g(arr);
  EXPECT_FALSE(g.has("a"));
}

TEST(ValidateTest, MultipleIssuesCollectedIntoOneError) {
  json body = {{"vcpu", 99},
               {"memoryMiB", "lots"},
               {"name", std::string(100, 'n')},
               {"argv", json::array({"ok", false})},
               {"env", {{"K", 1}}},
               {"bogus", true}};
  FieldReader f(body);
  f.Int("vcpu", 1, 16);
  f.Int("memoryMiB", 128, 65536);
  f.String("name", 64);
  f.StringList("argv", 10);
  f.StringMap("env", 10, 10, 10);
  f.Issue("custom", "a handler's own check");
  ApiError e = FinishError(f);
  EXPECT_EQ(e.http_status(), 400);
  EXPECT_EQ(CodeName(e.status().code()), "invalid_request");
  ASSERT_TRUE(e.status().details().contains("issues"));
  EXPECT_EQ(e.status().details()["issues"].size(), 7u);
  EXPECT_EQ(IssuePaths(e),
            (std::set<std::string>{"body.vcpu", "body.memoryMiB", "body.name", "body.argv[1]",
                                   "body.env.K", "body.custom", "body.bogus"}));
  // The message lists all of them, separated by "; ".
  std::string msg = e.what();
  for (const auto& p : IssuePaths(e))
    EXPECT_NE(msg.find(p + ": "), std::string::npos) << p << " in " << msg;
  EXPECT_EQ(std::count(msg.begin(), msg.end(), ';'), 6);
  // Each issue is exactly {path, message}.
  for (const auto& i : e.status().details()["issues"]) {
    EXPECT_EQ(i.size(), 2u);
    EXPECT_TRUE(i.at("message").is_string());
  }
}

TEST(ValidateTest, NonObjectBodyIsOneIssueAtThePrefix) {
  for (json body : {json::array({1, 2}), json("text"), json(3), json(nullptr), json(true)}) {
    FieldReader f(body);
    EXPECT_FALSE(f.Int("vcpu", 1, 16).has_value());
    EXPECT_FALSE(f.String("name", 10).has_value());
    ApiError e = FinishError(f);
    EXPECT_EQ(e.http_status(), 400) << body.dump();
    EXPECT_EQ(IssuePaths(e), std::set<std::string>{"body"}) << body.dump();
    EXPECT_EQ(IssueMessage(e, "body"), "must be a JSON object");
  }
}

TEST(ValidateTest, CustomPrefixIsUsedInPaths) {
  json body = {{"mode", "x"}, {"what", 1}};
  FieldReader f(body, "query");
  f.Int("mode", 0, 7);
  ApiError e = FinishError(f);
  EXPECT_EQ(IssuePaths(e), (std::set<std::string>{"query.mode", "query.what"}));
}

TEST(ValidateTest, ValidEnvName) {
  for (const char* ok : {"A", "_", "PATH", "my_var", "_x1", "X9_Y", "a"})
    EXPECT_TRUE(ValidEnvName(ok)) << ok;
  for (const char* bad : {"", "1A", "9", "A-B", "A B", "A=B", "A.B", "ÄB", "A\n", "$A", "a/b"})
    EXPECT_FALSE(ValidEnvName(bad)) << bad;
  EXPECT_FALSE(ValidEnvName(std::string("A\0B", 3)));
}

}  // namespace
}  // namespace validate_test
}  // namespace kiln::api
