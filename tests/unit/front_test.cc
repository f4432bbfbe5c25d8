#include "api/front.h"

#include <gtest/gtest.h>

#include "api/errors.h"
#include "fake_exchange.h"
#include "store/db.h"

namespace kiln::api {
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

}  // namespace
}  // namespace kiln::api
