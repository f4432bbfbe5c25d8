// Digests as lowercase hex.
//
// SHA-256 (OpenSSL) where a cryptographic hash matters: API key secrets,
// idempotency keys, file downloads' `x-content-sha256`. XXH3-128 (Debian's
// libxxhash) for catching corruption of large local files (snapshot pages),
// not for authenticity: it runs at memory speed where SHA-256 managed
// ~1.5 GB/s, and a snapshot is hashed on every capture and checked on every
// restore.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace kiln {

// SHA-256 fed piece by piece (a layer while it is read, a COPY's sources).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  void Update(std::string_view data);
  void Update(const void* data, size_t size);
  // The digest as lowercase hex; the object is spent after it.
  std::string HexDigest();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// XXH3-128 fed piece by piece (a snapshot file while it is received).
class Xxh3 {
 public:
  Xxh3();
  ~Xxh3();
  Xxh3(Xxh3&&) noexcept;
  Xxh3& operator=(Xxh3&&) noexcept;
  void Update(std::string_view data);
  // The digest as lowercase hex, as FileXxh3Hex gives it.
  std::string HexDigest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string Sha256Hex(std::string_view data);
// The digest's 32 bytes themselves (a signature that base64-encodes them).
std::string Sha256Bytes(std::string_view data);
// HMAC-SHA256 of `data` under `key`, as lowercase hex (preview tokens).
std::string HmacSha256Hex(std::string_view key, std::string_view data);
// Equal strings, compared in time that does not depend on where they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);
// The digest of a file's contents, read in 1 MiB blocks; "" if unreadable.
std::string FileSha256Hex(const std::string& path);
std::string FileXxh3Hex(const std::string& path);

}  // namespace kiln
