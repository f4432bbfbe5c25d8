#include "control/keys.h"

namespace kiln::control {

std::pair<store::ApiKey, std::string> Keys::Create(const std::string& name, bool admin,
                                                   std::optional<int64_t> daily_limit_micros) {
  return store_.Create(name, admin, daily_limit_micros);
}

std::vector<store::ApiKey> Keys::List() const { return store_.List(); }

std::optional<store::ApiKey> Keys::Revoke(const std::string& id) {
  if (!store_.Revoke(id)) return std::nullopt;
  return store_.Get(id);
}

std::optional<store::ApiKey> Keys::Authenticate(const std::string& secret) const {
  return store_.Authenticate(secret);
}

std::optional<store::ApiKey> Keys::Live(const std::string& id) const {
  auto key = store_.Get(id);
  if (!key || key->revoked_ms) return std::nullopt;
  return key;
}

std::vector<store::ApiKey> Keys::Operators() const {
  std::vector<store::ApiKey> out;
  for (store::ApiKey& key : store_.List())
    if (key.admin && !key.revoked_ms) out.push_back(std::move(key));
  return out;
}

}  // namespace kiln::control
