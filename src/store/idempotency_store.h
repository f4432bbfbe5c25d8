// Answers of non-GET requests, remembered by (API key, Idempotency-Key) so a
// client that retries after a lost response gets the first answer instead of
// a second sandbox. An entry lives `ttl_ms` from its first request; older
// ones are treated as absent.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "store/db.h"

namespace kiln::store {

class IdempotencyStore {
 public:
  // What one API key may keep stored: past either, its oldest answers go
  // (a retry of one of those runs again, as after the ttl).
  static constexpr int64_t kMaxEntriesPerKey = 10000;
  static constexpr int64_t kMaxBytesPerKey = 64ll << 20;

  // Entries still in progress are dropped: they belong to a previous run of
  // the daemon and will never complete, and keeping them would answer every
  // retry with kInProgress until they expire.
  // `now` is the clock (Unix ms); tests substitute their own.
  explicit IdempotencyStore(Db& db, int64_t ttl_ms = 24LL * 3600 * 1000,
                            std::function<int64_t()> now = nullptr);

  // SHA-256 hex of method, path and body, separated so that no two
  // different requests concatenate to the same bytes.
  static std::string Fingerprint(const std::string& method, const std::string& path,
                                 const std::string& body);

  enum class Begin { kNew, kReplay, kMismatch, kInProgress };
  // kNew: the caller runs the request, then calls Complete or Abandon.
  // kReplay: *status and *body hold the stored answer. kMismatch: the key was
  // used for a request with another fingerprint. kInProgress: the first
  // request with that key is still running. Atomic: of concurrent calls with
  // one key, exactly one gets kNew.
  Begin Start(const std::string& key_id, const std::string& idem_key,
              const std::string& fingerprint, int* status, std::string* body);
  // Stores the answer of a request that got kNew.
  void Complete(const std::string& key_id, const std::string& idem_key, int status,
                const std::string& body);
  // Forgets a request that got kNew without storing an answer (e.g. it was a
  // 5xx or streamed), so a retry runs anew.
  void Abandon(const std::string& key_id, const std::string& idem_key);
  // Removes entries that have outlived the ttl at `now_ms`.
  void DeleteExpired(int64_t now_ms);

 private:
  Db& db_;
  int64_t ttl_ms_;
  std::function<int64_t()> now_;
};

}  // namespace kiln::store
