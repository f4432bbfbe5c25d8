#include "store/idempotency_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace kiln::store {
namespace idempotency_store_test {
namespace {

using Begin = IdempotencyStore::Begin;

constexpr int64_t kTtl = 24LL * 3600 * 1000;

class IdempotencyStoreTest : public ::testing::Test {
 protected:
  Db db_{":memory:"};
  int64_t now_ = 1'700'000'000'000;
  IdempotencyStore store_{db_, kTtl, [this] { return now_; }};
  int status_ = 0;
  std::string body_;

  Begin Start(const std::string& key, const std::string& idem, const std::string& fp) {
    return store_.Start(key, idem, fp, &status_, &body_);
  }
};

TEST_F(IdempotencyStoreTest, NewThenReplay) {
  EXPECT_EQ(Start("k1", "i1", "fp"), Begin::kNew);
  store_.Complete("k1", "i1", 201, R"({"id":"sb-1"})");
  EXPECT_EQ(Start("k1", "i1", "fp"), Begin::kReplay);
  EXPECT_EQ(status_, 201);
  EXPECT_EQ(body_, R"({"id":"sb-1"})");
  // Keys are per API key.
  EXPECT_EQ(Start("k2", "i1", "fp"), Begin::kNew);
}

TEST_F(IdempotencyStoreTest, AKeyKeepsABoundedNumberOfAnswers) {
  auto stored = [&](const std::string& key) {
    return db_.QueryOne(
        "SELECT COUNT(*), COALESCE(SUM(LENGTH(body)), 0) FROM idempotency "
        "WHERE key_id = ?",
        {key});
  };
  // Past the byte cap the oldest answers go, so the key's total stays near it.
  std::string big(4 << 20, 'x');
  for (int i = 0; i < 40; ++i) {
    ++now_;
    ASSERT_EQ(Start("k1", "big-" + std::to_string(i), "fp"), Begin::kNew);
    store_.Complete("k1", "big-" + std::to_string(i), 200, big);
  }
  EXPECT_LE(stored("k1")->Int(1),
            IdempotencyStore::kMaxBytesPerKey + static_cast<int64_t>(big.size()));
  EXPECT_EQ(Start("k1", "big-0", "fp"), Begin::kNew);  // the oldest: gone, runs anew
  EXPECT_EQ(Start("k1", "big-39", "fp"), Begin::kReplay);
  // Another key's answers are untouched.
  ASSERT_EQ(Start("k2", "mine", "fp"), Begin::kNew);
  store_.Complete("k2", "mine", 200, "{}");
  ++now_;
  ASSERT_EQ(Start("k1", "more", "fp"), Begin::kNew);
  EXPECT_EQ(Start("k2", "mine", "fp"), Begin::kReplay);
}

TEST_F(IdempotencyStoreTest, Mismatch) {
  EXPECT_EQ(Start("k1", "i1", "fp-a"), Begin::kNew);
  EXPECT_EQ(Start("k1", "i1", "fp-b"), Begin::kMismatch);
  store_.Complete("k1", "i1", 200, "{}");
  EXPECT_EQ(Start("k1", "i1", "fp-b"), Begin::kMismatch);
}

TEST_F(IdempotencyStoreTest, InProgressThenAbandon) {
  EXPECT_EQ(Start("k1", "i1", "fp"), Begin::kNew);
  EXPECT_EQ(Start("k1", "i1", "fp"), Begin::kInProgress);
  store_.Abandon("k1", "i1");
  EXPECT_EQ(Start("k1", "i1", "fp"), Begin::kNew);
  store_.Complete("k1", "i1", 200, "done");
  store_.Abandon("k1", "i1");  // a stored answer stays
  EXPECT_EQ(Start("k1", "i1", "fp"), Begin::kReplay);
  EXPECT_EQ(body_, "done");
}

TEST_F(IdempotencyStoreTest, Expiry) {
  EXPECT_EQ(Start("k1", "i1", "fp"), Begin::kNew);
  store_.Complete("k1", "i1", 200, "old");
  now_ += kTtl - 1;
  EXPECT_EQ(Start("k1", "i1", "fp"), Begin::kReplay);
  now_ += 1;
  // Expired entries are absent, even for another fingerprint.
  EXPECT_EQ(Start("k1", "i1", "fp-other"), Begin::kNew);
  store_.Complete("k1", "i1", 202, "new");
  EXPECT_EQ(Start("k1", "i1", "fp-other"), Begin::kReplay);
  EXPECT_EQ(status_, 202);
}

TEST_F(IdempotencyStoreTest, DeleteExpired) {
  EXPECT_EQ(Start("k1", "old", "fp"), Begin::kNew);
  store_.Complete("k1", "old", 200, "x");
  now_ += 1000;
  EXPECT_EQ(Start("k1", "young", "fp"), Begin::kNew);
  store_.Complete("k1", "young", 200, "y");
  store_.DeleteExpired(now_ - 1000 + kTtl);
  EXPECT_EQ(db_.Query("SELECT idem_key FROM idempotency").size(), 1u);
  EXPECT_EQ(Start("k1", "young", "fp"), Begin::kReplay);
}

TEST_F(IdempotencyStoreTest, RestartDropsInProgress) {
  EXPECT_EQ(Start("k1", "running", "fp"), Begin::kNew);
  EXPECT_EQ(Start("k1", "done", "fp"), Begin::kNew);
  store_.Complete("k1", "done", 200, "ok");
  IdempotencyStore restarted(db_, kTtl, [this] { return now_; });
  EXPECT_EQ(restarted.Start("k1", "running", "fp", &status_, &body_), Begin::kNew);
  EXPECT_EQ(restarted.Start("k1", "done", "fp", &status_, &body_), Begin::kReplay);
}

TEST_F(IdempotencyStoreTest, Fingerprint) {
  std::string a = IdempotencyStore::Fingerprint("POST", "/v1/sandboxes", "{}");
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a, IdempotencyStore::Fingerprint("POST", "/v1/sandboxes", "{}"));
  EXPECT_NE(a, IdempotencyStore::Fingerprint("PUT", "/v1/sandboxes", "{}"));
  EXPECT_NE(IdempotencyStore::Fingerprint("POST", "/a", "b"),
            IdempotencyStore::Fingerprint("POST", "/ab", ""));
}

TEST(IdempotencyStoreConcurrencyTest, OneNewAmongRacers) {
  for (int round = 0; round < 20; ++round) {
    Db db(":memory:");
    IdempotencyStore store(db);
    std::atomic<int> news{0}, in_progress{0}, ready{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&] {
        ready++;
        while (ready.load() < 8) std::this_thread::yield();
        int status = 0;
        std::string body;
        switch (store.Start("k", "same", "fp", &status, &body)) {
          case IdempotencyStore::Begin::kNew:
            news++;
            break;
          case IdempotencyStore::Begin::kInProgress:
            in_progress++;
            break;
          default:
            break;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(news.load(), 1);
    EXPECT_EQ(in_progress.load(), 7);
  }
}

}  // namespace
}  // namespace idempotency_store_test
}  // namespace kiln::store
