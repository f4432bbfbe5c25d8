#include "common/digest.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <unistd.h>
#include <xxhash.h>

#include <functional>
#include <memory>
#include <vector>

#include "common/unique_fd.h"

namespace kiln {
namespace {

using DigestCtx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

std::string LowerHex(const unsigned char* bytes, size_t len) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (size_t i = 0; i < len; ++i) {
    out += hex[bytes[i] >> 4];
    out += hex[bytes[i] & 15];
  }
  return out;
}

std::string Finish(EVP_MD_CTX* ctx) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  return LowerHex(md, len);
}

// Feeds a file's contents to `update` in 1 MiB blocks; false if unreadable.
bool ReadBlocks(const std::string& path, const std::function<void(const char*, size_t)>& update) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return false;
  std::vector<char> buf(1 << 20);
  ssize_t n;
  while ((n = ::read(fd.get(), buf.data(), buf.size())) > 0)
    update(buf.data(), static_cast<size_t>(n));
  return n == 0;
}

}  // namespace

struct Sha256::State {
  DigestCtx ctx{EVP_MD_CTX_new(), EVP_MD_CTX_free};
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  EVP_DigestInit_ex(state_->ctx.get(), EVP_sha256(), nullptr);
}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::Update(std::string_view data) { Update(data.data(), data.size()); }
void Sha256::Update(const void* data, size_t size) {
  EVP_DigestUpdate(state_->ctx.get(), data, size);
}
std::string Sha256::HexDigest() { return Finish(state_->ctx.get()); }

std::string Sha256Hex(std::string_view data) {
  DigestCtx ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx.get(), data.data(), data.size());
  return Finish(ctx.get());
}

std::string Sha256Bytes(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(md), len);
}

std::string FileSha256Hex(const std::string& path) {
  DigestCtx ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  if (!ReadBlocks(path, [&](const char* p, size_t n) { EVP_DigestUpdate(ctx.get(), p, n); }))
    return "";
  return Finish(ctx.get());
}

struct Xxh3::State {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> s{XXH3_createState(), XXH3_freeState};
};

Xxh3::Xxh3() : state_(std::make_unique<State>()) { XXH3_128bits_reset(state_->s.get()); }
Xxh3::~Xxh3() = default;
Xxh3::Xxh3(Xxh3&&) noexcept = default;
Xxh3& Xxh3::operator=(Xxh3&&) noexcept = default;
void Xxh3::Update(std::string_view data) {
  XXH3_128bits_update(state_->s.get(), data.data(), data.size());
}
std::string Xxh3::HexDigest() const {
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(state_->s.get()));
  return LowerHex(canon.digest, sizeof canon.digest);
}

std::string FileXxh3Hex(const std::string& path) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                 XXH3_freeState);
  if (!state || XXH3_128bits_reset(state.get()) != XXH_OK) return "";
  if (!ReadBlocks(path, [&](const char* p, size_t n) { XXH3_128bits_update(state.get(), p, n); }))
    return "";
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(state.get()));
  return LowerHex(canon.digest, sizeof canon.digest);
}

std::string HmacSha256Hex(std::string_view key, std::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 15];
  }
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace kiln
