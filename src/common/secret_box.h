// Secrets kilnd must keep and read back (registry passwords), sealed with
// AES-256-GCM under a key in a file of their own (0600, created on first
// use) rather than in the database in plain text: a copy of kiln.db (a
// backup, a support bundle) holds no usable password.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kiln {

class SecretBox {
 public:
  // The key at `path`, made (32 random bytes, mode 0600) if missing.
  // kIoError if it cannot be read or made, or is not 32 bytes.
  static Result<SecretBox> Open(const std::string& path);

  // "enc1:" + hex(nonce, ciphertext, tag).
  std::string Seal(const std::string& plain) const;
  // The plain text of a Seal() result; a text without the "enc1:" prefix
  // (written before sealing existed) as it is; nullopt if it does not open
  // (another key, damaged).
  std::optional<std::string> Unseal(const std::string& sealed) const;
  // A key of its own for `purpose` (HMAC-SHA256 of it under this key, hex):
  // tokens signed with it stay valid across restarts and say nothing of
  // this key.
  std::string Derive(std::string_view purpose) const;

 private:
  explicit SecretBox(std::string key) : key_(std::move(key)) {}
  std::string key_;
};

}  // namespace kiln
