// Upload links: a URL that carries its own credential, for a client that
// sends a file without its API key (E2B's SDK PUTs a template's files to a
// presigned URL from a fresh HTTP client). A link names the key it was
// made for, what it uploads and when it expires; its signature is an
// HMAC-SHA256 of those under a key of kilnd's (SecretBox::Derive), so it
// lets in exactly that upload until it expires, and nothing else.
// Thread-safe (const).
#pragma once

#include <cstdint>
#include <string>

namespace kiln::images {

class UploadLinks {
 public:
  static constexpr int64_t kTtlMs = 3600 * 1000;  // a link's lifetime

  explicit UploadLinks(std::string signing_key) : key_(std::move(signing_key)) {}

  // The signature of a link for `owner` (a key id) to upload `what` (a
  // file's hash) to `scope` (a template), valid until `expires_ms`.
  std::string Sign(const std::string& owner, const std::string& scope, const std::string& what,
                   int64_t expires_ms) const;
  // Whether `signature` is that signature, and `expires_ms` is ahead of
  // `now_ms` by at most one lifetime. An empty signing key signs nothing.
  bool Check(const std::string& owner, const std::string& scope, const std::string& what,
             int64_t expires_ms, const std::string& signature, int64_t now_ms) const;

 private:
  std::string key_;
};

}  // namespace kiln::images
