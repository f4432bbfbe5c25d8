// Previews: a sandbox's ports shared at their own host name, each private
// (a visitor needs its token) or public. store::PreviewStore keeps the
// records and their secrets; this service holds the rules around them, so
// that no front reads the store or checks a token itself:
//  - public previews only where kilnd allows them (--allow-public-previews);
//  - when who may reach a port narrows (a preview made private, rotated or
//    deleted), the open connections into that port end;
//  - a preview lets nobody in once the key that made its sandbox is
//    revoked: its tokens and public link die with that key.
// Thread-safe: the store's calls are single queries, the cut is the
// caller's (kilnd's relay registry locks).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "control/keys.h"
#include "store/preview_store.h"

namespace kiln::control {

class Previews {
 public:
  struct Options {
    bool allow_public = false;  // --allow-public-previews
    // Ends the open connections into a sandbox's port (kilnd cuts the
    // port's relays); unset: there are none to end.
    std::function<void(const std::string& sandbox_id, int port)> cut;
  };
  Previews(store::PreviewStore& store, const Keys& keys, Options options);

  // kForbidden if `is_public` and public previews are off here. Share
  // checks it too; a front that must refuse before reading the rest of its
  // request asks first.
  Status MayShare(bool is_public) const;
  // Shares `port` of `sandbox_id`, or changes its preview's visibility and
  // token lifetime (its secret, so its tokens, kept); the record after. A
  // private preview ends the open connections into the port: whoever
  // reaches it from now on shows a token. kForbidden as MayShare.
  Result<store::PreviewRecord> Share(const std::string& sandbox_id, int port, bool is_public,
                                     int64_t ttl_ms);
  std::optional<store::PreviewRecord> Find(const std::string& sandbox_id, int port) const;
  // Oldest port first.
  std::vector<store::PreviewRecord> List(const std::string& sandbox_id) const;
  // A new secret: every token issued so far is refused and the port's
  // open connections end. False if the port has no preview.
  bool Rotate(const std::string& sandbox_id, int port);
  // Ends the preview and the port's open connections. False if none.
  bool Revoke(const std::string& sandbox_id, int port);

  // How a visitor without a kiln key reaches `port` of a sandbox that
  // `owner` (its spec.owner) made: its preview, and the owner's key, whom
  // the visit is charged to. nullopt if the port has no preview, or once
  // the owner's key is revoked.
  struct Entrance {
    store::PreviewRecord preview;
    store::ApiKey owner;
  };
  std::optional<Entrance> Enter(const std::string& sandbox_id, const std::string& owner,
                                int port) const;

  // A token of `p` valid until `expiry_ms`.
  static std::string Token(const store::PreviewRecord& p, int64_t expiry_ms);
  // Whether `token` is one of p's current ones and unexpired at `now_ms`.
  static bool TokenValid(const store::PreviewRecord& p, const std::string& token, int64_t now_ms);
  // Of several tokens a visitor offers in one place (the values of one
  // cookie: a page of another preview, the same site, may plant one of
  // that name beside the visitor's), one valid at `now_ms`, else the first
  // (to be refused as wrong); "" if none is offered.
  static std::string PickToken(const store::PreviewRecord& p,
                               const std::vector<std::string>& offered, int64_t now_ms);

 private:
  void Cut(const std::string& sandbox_id, int port) const;

  store::PreviewStore& store_;
  const Keys& keys_;
  Options options_;
};

}  // namespace kiln::control
