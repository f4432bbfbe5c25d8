#include "api/e2b/envd/file_signature.h"

#include <charconv>

#include "common/base64.h"
#include "common/digest.h"

namespace kiln::api::e2b {

std::string EnvdFileSignature(std::string_view path, std::string_view operation,
                              std::string_view user, std::string_view token,
                              std::optional<int64_t> expiration) {
  std::string raw;
  raw.append(path).append(":").append(operation).append(":").append(user).append(":").append(token);
  if (expiration) raw.append(":").append(std::to_string(*expiration));
  std::string encoded = Base64Encode(Sha256Bytes(raw));
  while (!encoded.empty() && encoded.back() == '=') encoded.pop_back();
  return "v1_" + encoded;
}

const char* FileSignatureError(FileSignature result) {
  switch (result) {
    case FileSignature::kValid:
      return "";
    case FileSignature::kInvalid:
      return "invalid signature";
    case FileSignature::kBadExpiration:
      return "invalid signature_expiration";
    case FileSignature::kExpired:
      return "signature is already expired";
  }
  return "invalid signature";
}

FileSignature CheckEnvdFileSignature(std::string_view method, std::string_view path,
                                     std::string_view user, std::string_view signature,
                                     const std::optional<std::string>& expiration,
                                     std::string_view token, int64_t now_s) {
  std::string_view operation = method == "GET" ? "read" : method == "POST" ? "write" : "";
  if (operation.empty() || token.empty()) return FileSignature::kInvalid;
  std::optional<int64_t> expires;
  if (expiration) {
    int64_t v = 0;
    auto [end, ec] =
        std::from_chars(expiration->data(), expiration->data() + expiration->size(), v);
    if (ec != std::errc() || end != expiration->data() + expiration->size())
      return FileSignature::kBadExpiration;
    expires = v;
  }
  if (!ConstantTimeEquals(signature, EnvdFileSignature(path, operation, user, token, expires)))
    return FileSignature::kInvalid;
  if (expires && *expires < now_s) return FileSignature::kExpired;
  return FileSignature::kValid;
}

}  // namespace kiln::api::e2b
