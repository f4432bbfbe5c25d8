#include "api/front.h"

#include <gtest/gtest.h>

#include "api/errors.h"
#include "fakes/fake_exchange.h"
#include "store/db.h"

namespace kiln::api {
namespace front_test {
namespace {

using Begin = store::IdempotencyStore::Begin;

// An exchange that records what the idempotency store said about its key at
// the moment the answer went out.
class ProbeExchange : public testutil::FakeExchange {
 public:
  ProbeExchange(store::IdempotencyStore& idem, std::string key_id)
      : FakeExchange("POST", "/v1/things"), idem_(idem), key_id_(std::move(key_id)) {}
  void SendJson(int status, const json& body) override {
    FakeExchange::SendJson(status, body);
    int s = 0;
    std::string stored;
    at_answer = idem_.Start(key_id_, "idem-1", "probe", &s, &stored);
  }
  Begin at_answer = Begin::kNew;

 private:
  store::IdempotencyStore& idem_;
  std::string key_id_;
};

class FrontTest : public ::testing::Test {
 protected:
  store::Db db_{":memory:"};
  store::KeyStore keys_{db_};
  store::IdempotencyStore idem_{db_};
  Router router_;
  std::pair<store::ApiKey, std::string> key_ = keys_.Create("t", false, std::nullopt);

  ProbeExchange Request() {
    ProbeExchange ex(idem_, key_.first.id);
    ex.headers_ = {{"Authorization", "Bearer " + key_.second}, {"Idempotency-Key", "idem-1"}};
    return ex;
  }
};

// A retryable refusal (no_capacity) is forgotten before the client can read
// it: a client that retries at once must not get request_in_progress.
TEST_F(FrontTest, RetryableRefusalIsAbandonedBeforeTheAnswerGoesOut) {
  router_.Add("POST", "/v1/things", [](Exchange&) {
    ApiError e(Status(Code::kNoCapacity, "full").WithRetryAfter(1));
    throw e;
  });
  ApiFront front(router_, keys_, idem_);
  auto ex = Request();
  front.Handle(ex);
  EXPECT_EQ(ex.status_, 409);
  // Start() saw no record in progress: the key was already abandoned. (It
  // then began a record of its own, with another fingerprint.)
  EXPECT_EQ(ex.at_answer, Begin::kNew);
}

// A final answer is stored before it goes out: a retry replays it.
TEST_F(FrontTest, FinalAnswerIsStoredBeforeTheAnswerGoesOut) {
  router_.Add("POST", "/v1/things", [](Exchange& ex) {
    ex.SendJson(201, nlohmann::json{{"id", "t-1"}});
  });
  ApiFront front(router_, keys_, idem_);
  auto ex = Request();
  front.Handle(ex);
  EXPECT_EQ(ex.status_, 201);
  EXPECT_EQ(ex.at_answer, Begin::kMismatch);  // stored, under the request's own fingerprint
}

// Over its rate a key gets 429 rate_limited with Retry-After and a message
// naming the limit; another key and admin keys go on.
TEST_F(FrontTest, RateLimitsEachKeyButNotAdmins) {
  router_.Add("GET", "/v1/things",
              [](Exchange& ex) { ex.SendJson(200, nlohmann::json::object()); });
  int64_t now = 0;
  RateLimiter limiter({/*rate=*/1, /*burst=*/2}, [&now] { return now; });
  ApiFront front(router_, keys_, idem_, &limiter);
  auto other = keys_.Create("other", false, std::nullopt);
  auto admin = keys_.Create("admin", true, std::nullopt);
  auto get = [&](const std::string& token) {
    testutil::FakeExchange ex("GET", "/v1/things");
    ex.headers_ = {{"Authorization", "Bearer " + token}};
    front.Handle(ex);
    return ex;
  };
  EXPECT_EQ(get(key_.second).status_, 200);
  EXPECT_EQ(get(key_.second).status_, 200);
  auto refused = get(key_.second);
  EXPECT_EQ(refused.status_, 429);
  EXPECT_EQ(refused.body_["error"]["code"], "rate_limited");
  std::string message = refused.body_["error"]["message"];
  EXPECT_NE(message.find("1 requests/s (burst 2)"), std::string::npos) << message;
  EXPECT_NE(message.find(key_.first.id), std::string::npos) << message;
  EXPECT_EQ(refused.body_["error"]["retryAfterMs"], 1000);
  bool retry_after = false;
  for (const auto& [k, v] : refused.extra_headers) retry_after |= k == "Retry-After" && v == "1";
  EXPECT_TRUE(retry_after);
  EXPECT_EQ(get(other.second).status_, 200);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(get(admin.second).status_, 200);
  now += 1000;
  EXPECT_EQ(get(key_.second).status_, 200);
}

// Without a valid key the caller's address pays: wrong keys run out too.
TEST_F(FrontTest, WrongKeysSpendTheAddresssBucket) {
  int64_t now = 0;
  RateLimiter limiter({1, 1}, [&now] { return now; });
  ApiFront front(router_, keys_, idem_, &limiter);
  testutil::FakeExchange first("GET", "/v1/things");
  first.headers_ = {{"Authorization", "Bearer wrong-1"}};
  front.Handle(first);
  EXPECT_EQ(first.status_, 401);
  testutil::FakeExchange second("GET", "/v1/things");
  second.headers_ = {{"Authorization", "Bearer wrong-2"}};
  front.Handle(second);
  EXPECT_EQ(second.status_, 429);
  EXPECT_EQ(second.body_["error"]["code"], "rate_limited");
}

}  // namespace
}  // namespace front_test
}  // namespace kiln::api
