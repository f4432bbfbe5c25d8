// API keys as the fronts use them: minted, listed and revoked by an admin,
// checked on every request, and the rules that follow a key beyond its own
// requests:
//  - a sandbox is reached by its own credentials (E2B's access tokens, a
//    preview's token or public link) only while the key that made it is
//    live: they die with that key;
//  - the operator's keys are the live admin keys, oldest first (kilnd's
//    local admin key leads), whose images serve every key.
// The fronts reach keys through this service only, never the store
// (store::KeyStore keeps the keys, as SHA-256 hashes). Thread-safe as the
// store is: every call is one query.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/key_store.h"

namespace kiln::control {

class Keys {
 public:
  explicit Keys(store::KeyStore& store) : store_(store) {}

  // A new key and its secret ("kiln_" + 40 hex), shown only now.
  std::pair<store::ApiKey, std::string> Create(const std::string& name, bool admin,
                                               std::optional<int64_t> daily_limit_micros);
  // Every key, oldest first, revoked ones included (for the record).
  std::vector<store::ApiKey> List() const;
  // Revokes `id` (a second revoke keeps the first time) and returns the key
  // as it is now; nullopt if there is no such key.
  std::optional<store::ApiKey> Revoke(const std::string& id);

  // The live key whose secret this is; nullopt if unknown or revoked.
  std::optional<store::ApiKey> Authenticate(const std::string& secret) const;
  // The key `id` while it is live: nullopt once revoked, or if unknown.
  // What a sandbox's own credentials ride on (`id` is its spec.owner).
  std::optional<store::ApiKey> Live(const std::string& id) const;
  // The operator's keys: the live admin keys, oldest first.
  std::vector<store::ApiKey> Operators() const;

 private:
  store::KeyStore& store_;
};

}  // namespace kiln::control
