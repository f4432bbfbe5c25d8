// API errors (src/api/errors.h): the standard error body and the mapping of
// agent error codes to HTTP statuses.
#include <gtest/gtest.h>

#include "api/errors.h"
#include "engine/agent_answer.h"

namespace kiln::api {
namespace errors_test {
namespace {

using nlohmann::json;

// An agent's error answer as the API answers it.
ApiError AgentAnswerError(const json& answer) {
  return ApiError(engine::StatusFromAgentError(answer));
}

TEST(ErrorsTest, ErrorBodyShapeWithoutDetails) {
  ApiError e(Code::kNotFound, "sandbox abc not found");
  json b = ErrorBody(e.status(), "req-1");
  ASSERT_TRUE(b.is_object());
  EXPECT_EQ(b.size(), 1u);
  ASSERT_TRUE(b.contains("error"));
  const json& err = b["error"];
  EXPECT_EQ(err, (json{{"code", "not_found"},
                       {"status", 404},
                       {"message", "sandbox abc not found"},
                       {"requestId", "req-1"}}));
  EXPECT_FALSE(err.contains("details"));
  EXPECT_FALSE(err.contains("retryAfterMs"));
  EXPECT_TRUE(err["status"].is_number_integer());
}

TEST(ErrorsTest, ErrorBodyIncludesDetailsAndRetryAfter) {
  Status s = Status(Code::kNoCapacity, "host full", json{{"limit", 8}}).WithRetryAfter(3);
  json err = ErrorBody(s, "req-2")["error"];
  EXPECT_EQ(err["details"], (json{{"limit", 8}}));
  EXPECT_EQ(err["retryAfterMs"], 3000);
  EXPECT_EQ(err["status"], 409);
  EXPECT_EQ(err["code"], "no_capacity");
  EXPECT_EQ(err["requestId"], "req-2");
}

TEST(ErrorsTest, ApiErrorWhatIsTheMessage) {
  ApiError e(Code::kInternal, "boom");
  EXPECT_STREQ(e.what(), "boom");
  EXPECT_TRUE(e.status().details().is_null());
  EXPECT_EQ(e.status().retry_after_s(), 0);
}

TEST(ErrorsTest, NotFound) {
  ApiError e = NotFound("sandbox abc");
  EXPECT_EQ(e.http_status(), 404);
  EXPECT_EQ(CodeName(e.status().code()), "not_found");
  EXPECT_STREQ(e.what(), "sandbox abc not found");
}

TEST(ErrorsTest, InvalidFieldCarriesOneIssue) {
  ApiError e = InvalidField("query.path", "is required");
  EXPECT_EQ(e.http_status(), 400);
  EXPECT_EQ(CodeName(e.status().code()), "invalid_request");
  EXPECT_STREQ(e.what(), "query.path: is required");
  EXPECT_EQ(
      e.status().details(),
      (json{{"issues", json::array({json{{"path", "query.path"}, {"message", "is required"}}})}}));
  json err = ErrorBody(e.status(), "r")["error"];
  EXPECT_EQ(err["details"]["issues"][0]["path"], "query.path");
}

TEST(ErrorsTest, AgentErrorStatusMapping) {
  const std::pair<const char*, int> cases[] = {
      {"file_not_found", 404},    {"not_found", 404},       {"is_a_directory", 409},
      {"not_a_directory", 409},   {"file_exists", 409},     {"directory_not_empty", 409},
      {"not_running", 409},       {"stdin_closed", 409},    {"busy", 409},
      {"permission_denied", 403}, {"invalid_request", 400}, {"insufficient_storage", 507},
      {"agent_timeout", 504},     {"io_error", 500},        {"internal_error", 500},
  };
  for (const auto& [code, status] : cases) {
    ApiError e =
        AgentAnswerError(json{{"error", {{"code", code}, {"message", std::string("m-") + code}}}});
    EXPECT_EQ(e.http_status(), status) << code;
    EXPECT_EQ(CodeName(e.status().code()), code);
    EXPECT_EQ(std::string(e.what()), std::string("m-") + code);
    EXPECT_TRUE(e.status().details().is_null()) << code;
  }
}

TEST(ErrorsTest, AnUnknownAgentCodeIsAnInternalError) {
  ApiError e = AgentAnswerError(json{{"error", {{"code", "made_up"}, {"message", "m"}}}});
  EXPECT_EQ(e.status().code(), Code::kInternal);
  EXPECT_EQ(e.http_status(), 500);
  EXPECT_STREQ(e.what(), "m");
}

TEST(ErrorsTest, EveryCodeHasOneNameAndAStatus) {
  for (int c = static_cast<int>(Code::kOk); c <= static_cast<int>(Code::kInternal); ++c) {
    Code code = static_cast<Code>(c);
    auto name = CodeName(code);
    EXPECT_EQ(CodeFromName(name), code) << name;
    int status = HttpStatus(code);
    if (code == Code::kOk) {
      EXPECT_EQ(status, 200);
    } else {
      EXPECT_GE(status, 400) << name;
    }
  }
}

TEST(ErrorsTest, AgentErrorPathBecomesDetails) {
  ApiError e = AgentAnswerError(
      json{{"error",
            {{"code", "file_not_found"}, {"message", "no such file"}, {"path", "/workspace/x"}}}});
  EXPECT_EQ(e.http_status(), 404);
  EXPECT_EQ(e.status().details(), (json{{"path", "/workspace/x"}}));
  EXPECT_EQ(ErrorBody(e.status(), "r")["error"]["details"]["path"], "/workspace/x");
}

TEST(ErrorsTest, AgentErrorAcceptsTheBareErrorObject) {
  ApiError e = AgentAnswerError(json{{"code", "permission_denied"}, {"message", "nope"}});
  EXPECT_EQ(e.http_status(), 403);
  EXPECT_EQ(CodeName(e.status().code()), "permission_denied");
  EXPECT_STREQ(e.what(), "nope");
}

TEST(ErrorsTest, AgentErrorDefaults) {
  ApiError e = AgentAnswerError(json{{"error", json::object()}});
  EXPECT_EQ(e.http_status(), 500);
  EXPECT_EQ(CodeName(e.status().code()), "internal_error");
  EXPECT_STREQ(e.what(), "the sandbox failed the request");
}

TEST(AgentErrorRegression, NonObjectErrorIsAnInternalError) {
  auto e = AgentAnswerError(json{{"error", "boom"}});
  EXPECT_EQ(e.http_status(), 500);
  EXPECT_EQ(CodeName(e.status().code()), "internal_error");
  auto f = AgentAnswerError(json("just a string"));
  EXPECT_EQ(f.http_status(), 500);
}

TEST(ErrorsTest, AnOlderAgentsNoSpaceIsInsufficientStorage) {
  // Agents before the rename said "no_space"; restored sandboxes may run one.
  ApiError e = AgentAnswerError(json{{"error", {{"code", "no_space"}, {"message", "full"}}}});
  EXPECT_EQ(e.http_status(), 507);
  EXPECT_EQ(CodeName(e.status().code()), "insufficient_storage");
}

}  // namespace
}  // namespace errors_test
}  // namespace kiln::api
