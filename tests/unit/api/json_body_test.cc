// Request bodies as JSON: blank is {}, and nesting is capped while parsing.
#include "api/json_body.h"

#include <gtest/gtest.h>

#include "api/errors.h"

namespace kiln::api {
namespace json_body_test {
namespace {

using nlohmann::json;

// The "body" issue of an ApiError thrown by ParseJsonBody, or "" if none.
std::string BodyIssue(const std::string& text) {
  try {
    ParseJsonBody(text);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.http_status(), 400);
    EXPECT_EQ(CodeName(e.status().code()), "invalid_request");
    return e.what();
  }
  return "";
}

std::string NestedArrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string NestedObjects(int depth) {
  std::string text;
  for (int i = 0; i < depth; ++i) text += "{\"a\":";
  return text + "1" + std::string(depth, '}');
}

TEST(JsonBodyTest, BlankIsAnEmptyObject) {
  EXPECT_EQ(ParseJsonBody(""), json::object());
  EXPECT_EQ(ParseJsonBody(" \r\n\t"), json::object());
}

TEST(JsonBodyTest, ParsesJson) {
  EXPECT_EQ(ParseJsonBody(R"({"a": [1, "[{"]})"), json({{"a", {1, "[{"}}}));
}

TEST(JsonBodyTest, NotJsonIsAnIssueOfTheBody) {
  EXPECT_NE(BodyIssue("{").find("is not valid JSON"), std::string::npos);
  EXPECT_NE(BodyIssue("[1,]").find("is not valid JSON"), std::string::npos);
}

TEST(JsonBodyTest, NestingUpToTheLimitIsAccepted) {
  EXPECT_EQ(BodyIssue(NestedArrays(kMaxJsonDepth)), "");
  EXPECT_EQ(BodyIssue(NestedObjects(kMaxJsonDepth)), "");
}

TEST(JsonBodyTest, NestingPastTheLimitIsRefused) {
  const std::string expected = "is nested more than 64 deep";
  EXPECT_NE(BodyIssue(NestedArrays(kMaxJsonDepth + 1)).find(expected), std::string::npos);
  EXPECT_NE(BodyIssue(NestedArrays(200000)).find(expected), std::string::npos);
  EXPECT_NE(BodyIssue(NestedObjects(kMaxJsonDepth + 1)).find(expected), std::string::npos);
  // Refused before the end: the unclosed rest is never looked at.
  EXPECT_NE(BodyIssue("{\"a\":" + std::string(100, '[')).find(expected), std::string::npos);
  // Brackets inside strings do not count.
  EXPECT_EQ(BodyIssue("[\"" + std::string(100, '[') + "\"]"), "");
}

TEST(JsonBodyTest, TheIssueNamesTheBodyField) {
  try {
    ParseJsonBody(NestedObjects(kMaxJsonDepth + 1));
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status().details(), json::parse(R"({"issues": [{"path": "body",
        "message": "is nested more than 64 deep"}]})"));
  }
}

}  // namespace
}  // namespace json_body_test
}  // namespace kiln::api
