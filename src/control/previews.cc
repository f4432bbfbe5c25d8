#include "control/previews.h"

#include <utility>

namespace kiln::control {

Previews::Previews(store::PreviewStore& store, const Keys& keys, Options options)
    : store_(store), keys_(keys), options_(std::move(options)) {}

Status Previews::MayShare(bool is_public) const {
  if (is_public && !options_.allow_public)
    return Status(Code::kForbidden,
                  "body.visibility: public previews are off on this kilnd (start it with "
                  "--allow-public-previews); share it privately, with its token");
  return Status();
}

Result<store::PreviewRecord> Previews::Share(const std::string& sandbox_id, int port,
                                             bool is_public, int64_t ttl_ms) {
  if (Status may = MayShare(is_public); !may.ok()) return may;
  store::PreviewRecord p = store_.Put(sandbox_id, port, is_public, ttl_ms);
  // Made public, whoever holds a token now holds nothing more; made
  // private, the connections of those without one end.
  if (!is_public) Cut(sandbox_id, port);
  return p;
}

std::optional<store::PreviewRecord> Previews::Find(const std::string& sandbox_id, int port) const {
  return store_.Get(sandbox_id, port);
}

std::vector<store::PreviewRecord> Previews::List(const std::string& sandbox_id) const {
  return store_.List(sandbox_id);
}

bool Previews::Rotate(const std::string& sandbox_id, int port) {
  if (!store_.Rotate(sandbox_id, port)) return false;
  Cut(sandbox_id, port);
  return true;
}

bool Previews::Revoke(const std::string& sandbox_id, int port) {
  if (!store_.Delete(sandbox_id, port)) return false;
  Cut(sandbox_id, port);
  return true;
}

std::optional<Previews::Entrance> Previews::Enter(const std::string& sandbox_id,
                                                  const std::string& owner, int port) const {
  auto key = keys_.Live(owner);
  if (!key) return std::nullopt;
  auto p = store_.Get(sandbox_id, port);
  if (!p) return std::nullopt;
  return Entrance{std::move(*p), std::move(*key)};
}

std::string Previews::Token(const store::PreviewRecord& p, int64_t expiry_ms) {
  return store::PreviewStore::Token(p, expiry_ms);
}

bool Previews::TokenValid(const store::PreviewRecord& p, const std::string& token, int64_t now_ms) {
  return store::PreviewStore::TokenValid(p, token, now_ms);
}

std::string Previews::PickToken(const store::PreviewRecord& p,
                                const std::vector<std::string>& offered, int64_t now_ms) {
  for (const std::string& token : offered)
    if (TokenValid(p, token, now_ms)) return token;
  return offered.empty() ? "" : offered.front();
}

void Previews::Cut(const std::string& sandbox_id, int port) const {
  if (options_.cut) options_.cut(sandbox_id, port);
}

}  // namespace kiln::control
