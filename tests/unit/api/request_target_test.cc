// Request targets decoded by Boost.URL: '+' is a space only in the query.
#include "api/request_target.h"

#include <gtest/gtest.h>

#include "api/errors.h"

namespace kiln::api {
namespace request_target_test {
namespace {

using Query = std::vector<std::pair<std::string, std::string>>;

TEST(RequestTargetTest, EncodedPlusInAPathStaysAPlus) {
  EXPECT_EQ(ParseRequestTarget("/v1/sandboxes/a%2Bb").path, "/v1/sandboxes/a+b");
}

TEST(RequestTargetTest, PlusInAPathStaysAPlus) {
  EXPECT_EQ(ParseRequestTarget("/v1/sandboxes/a+b").path, "/v1/sandboxes/a+b");
}

TEST(RequestTargetTest, PlusInAQueryValueIsASpace) {
  RequestTarget t = ParseRequestTarget("/v1/files?path=/tmp/a+b&mode=x%2By");
  EXPECT_EQ(t.path, "/v1/files");
  EXPECT_EQ(t.query, (Query{{"path", "/tmp/a b"}, {"mode", "x+y"}}));
}

TEST(RequestTargetTest, PercentTwentyIsASpaceEverywhere) {
  RequestTarget t = ParseRequestTarget("/a%20b?my%20key=c%20d");
  EXPECT_EQ(t.path, "/a b");
  EXPECT_EQ(t.query, (Query{{"my key", "c d"}}));
}

TEST(RequestTargetTest, QueryKeepsOrderRepeatsAndBareNames) {
  RequestTarget t = ParseRequestTarget("/v1/x?label=a&label=b&follow&empty=");
  EXPECT_EQ(t.query, (Query{{"label", "a"}, {"label", "b"}, {"follow", ""}, {"empty", ""}}));
  EXPECT_TRUE(ParseRequestTarget("/v1/x").query.empty());
}

TEST(RequestTargetTest, EncodedSlashAndUtf8AreDecoded) {
  RequestTarget t = ParseRequestTarget("/v1/x?path=%2Ftmp%2F%C3%A4");
  EXPECT_EQ(t.query, (Query{{"path", "/tmp/\xc3\xa4"}}));
}

TEST(RequestTargetTest, BadEscapesAreInvalidRequests) {
  for (const char* target : {"/v1/%zz", "/v1/x?path=%4", "/v1/x?path=%g1", "/v1/%"}) {
    try {
      ParseRequestTarget(target);
      ADD_FAILURE() << target << " was accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.http_status(), 400) << target;
      EXPECT_EQ(CodeName(e.status().code()), "invalid_request") << target;
      EXPECT_NE(std::string(e.what()).find("malformed HTTP request"), std::string::npos) << target;
    }
  }
}

TEST(RequestTargetTest, OnlyOriginFormIsAccepted) {
  EXPECT_THROW(ParseRequestTarget("*"), ApiError);
  EXPECT_THROW(ParseRequestTarget("http://host/v1/health"), ApiError);
  EXPECT_THROW(ParseRequestTarget(""), ApiError);
}

}  // namespace
}  // namespace request_target_test
}  // namespace kiln::api
