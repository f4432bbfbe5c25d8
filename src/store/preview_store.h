// Previews: a sandbox's ports shared at their own URL, each private (a
// token is needed) or public. A token is `<expiry ms>.<HMAC>` of the
// sandbox, the port and the expiry under the preview's secret: nothing per
// token is stored, and a rotate (a new secret) refuses all earlier ones.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/db.h"

namespace kiln::store {

struct PreviewRecord {
  std::string sandbox_id;
  int port = 0;
  std::string id;  // "pv_" + 24 hex
  bool is_public = false;
  std::string secret;  // HMAC key of its tokens (64 hex)
  int64_t ttl_ms = 0;  // a new token's lifetime
  int64_t created_ms = 0;
};

class PreviewStore {
 public:
  explicit PreviewStore(Db& db) : db_(db) {}

  // Creates the preview of (sandbox, port), or changes its visibility and
  // token lifetime if there is one (its secret kept); the record after.
  PreviewRecord Put(const std::string& sandbox_id, int port, bool is_public, int64_t ttl_ms);
  std::optional<PreviewRecord> Get(const std::string& sandbox_id, int port) const;
  // Oldest port first.
  std::vector<PreviewRecord> List(const std::string& sandbox_id) const;
  // A new secret: every token issued so far is refused. False if none.
  bool Rotate(const std::string& sandbox_id, int port);
  bool Delete(const std::string& sandbox_id, int port);
  // Every preview of a sandbox that ended.
  void DeleteSandbox(const std::string& sandbox_id);

  // A token valid until `expiry_ms`.
  static std::string Token(const PreviewRecord& p, int64_t expiry_ms);
  // Whether `token` is one of p's and has not expired at `now_ms`.
  static bool TokenValid(const PreviewRecord& p, const std::string& token, int64_t now_ms);

 private:
  Db& db_;
};

}  // namespace kiln::store
