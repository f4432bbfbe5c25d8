// API keys: who may call kilnd. Only a key's SHA-256 is stored; its secret
// is shown once, when the key is created. Revoked keys stay listed (for the
// record) but never authenticate again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/db.h"

namespace kiln::store {

struct ApiKey {
  std::string id;  // "key_" + 16 hex
  std::string name;
  bool admin = false;
  std::optional<int64_t> daily_limit_micros;
  int64_t created_ms = 0;
  std::optional<int64_t> revoked_ms;
};

class KeyStore {
 public:
  explicit KeyStore(Db& db);

  // Returns the record and its secret ("kiln_" + 40 hex), shown only now.
  std::pair<ApiKey, std::string> Create(const std::string& name, bool admin,
                                        std::optional<int64_t> daily_limit_micros);
  std::vector<ApiKey> List() const;  // oldest first, revoked included
  std::optional<ApiKey> Get(const std::string& id) const;
  // False if `id` is unknown; revoking a revoked key keeps its first time.
  bool Revoke(const std::string& id);
  // The live key with this secret; null if unknown or revoked. One indexed
  // lookup of the secret's SHA-256, nothing cached: a revoke takes effect
  // on the very next request.
  std::optional<ApiKey> Authenticate(const std::string& secret) const;

  // Zero-configuration local use: makes sure `path` holds the secret of a
  // live admin key, creating key and file (mode 0600, written to path.tmp,
  // then renamed) when the file is missing, unreadable or its key is not a
  // live admin key. Returns that key's id. Throws std::runtime_error if the
  // file cannot be written.
  std::string EnsureLocalAdminKey(const std::string& path);

 private:
  Db& db_;
};

}  // namespace kiln::store
