#include "common/secret_box.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "common/digest.h"
#include "common/unique_fd.h"

namespace kiln {

namespace {

constexpr size_t kKeyBytes = 32, kNonceBytes = 12, kTagBytes = 16;
constexpr std::string_view kPrefix = "enc1:";

using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

std::optional<std::string> Unhex(std::string_view hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (hex.size() % 2) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi << 4 | lo);
  }
  return out;
}

}  // namespace

Result<SecretBox> SecretBox::Open(const std::string& path) {
  auto fail = [&](const std::string& what) {
    return Status(Code::kIoError, what + " " + path + ": " + std::strerror(errno));
  };
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd && errno == ENOENT) {
    std::string key(kKeyBytes, '\0');
    if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), kKeyBytes) != 1)
      return Status(Code::kInternal, "no random bytes for the secrets key");
    std::string tmp = path + ".tmp";
    ::unlink(tmp.c_str());
    UniqueFd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!out || !WriteAll(out.get(), key) || ::fsync(out.get()) != 0) return fail("cannot write");
    out.reset();
    if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("cannot place");
    fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  }
  if (!fd) return fail("cannot open");
  std::string key(kKeyBytes + 1, '\0');
  ssize_t n = ::read(fd.get(), key.data(), key.size());
  if (n != static_cast<ssize_t>(kKeyBytes))
    return Status(Code::kIoError,
                  "the secrets key " + path + " is not " + std::to_string(kKeyBytes) + " bytes");
  key.resize(kKeyBytes);
  return SecretBox(std::move(key));
}

std::string SecretBox::Seal(const std::string& plain) const {
  unsigned char nonce[kNonceBytes];
  RAND_bytes(nonce, kNonceBytes);
  std::string out(reinterpret_cast<char*>(nonce), kNonceBytes);
  out.resize(kNonceBytes + plain.size() + kTagBytes);
  auto* cipher = reinterpret_cast<unsigned char*>(out.data() + kNonceBytes);
  CipherCtx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int len = 0, fin = 0;
  EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr,
                     reinterpret_cast<const unsigned char*>(key_.data()), nonce);
  EVP_EncryptUpdate(ctx.get(), cipher, &len, reinterpret_cast<const unsigned char*>(plain.data()),
                    static_cast<int>(plain.size()));
  EVP_EncryptFinal_ex(ctx.get(), cipher + len, &fin);
  EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, cipher + plain.size());
  return std::string(kPrefix) + Hex(out);
}

std::optional<std::string> SecretBox::Unseal(const std::string& sealed) const {
  if (!sealed.starts_with(kPrefix)) return sealed;  // stored before sealing
  std::optional<std::string> raw = Unhex(std::string_view(sealed).substr(kPrefix.size()));
  if (!raw || raw->size() < kNonceBytes + kTagBytes) return std::nullopt;
  size_t n = raw->size() - kNonceBytes - kTagBytes;
  auto* bytes = reinterpret_cast<unsigned char*>(raw->data());
  std::string plain(n, '\0');
  CipherCtx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int len = 0, fin = 0;
  EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr,
                     reinterpret_cast<const unsigned char*>(key_.data()), bytes);
  EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()), &len,
                    bytes + kNonceBytes, static_cast<int>(n));
  EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, bytes + kNonceBytes + n);
  if (EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()) + len, &fin) !=
      1)
    return std::nullopt;
  return plain;
}

std::string SecretBox::Derive(std::string_view purpose) const {
  return HmacSha256Hex(key_, purpose);
}

}  // namespace kiln
