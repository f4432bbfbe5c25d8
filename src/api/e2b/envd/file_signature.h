// envd's signed file URLs: E2B's download_url and upload_url of a secure
// sandbox give a link to GET (read) or POST (write) /files that carries,
// instead of the sandbox's access token, `signature` = "v1_" + base64
// (unpadded) of SHA-256("path:operation:user:token[:expiration]") and, when
// it expires, `signature_expiration` (Unix seconds). The SDK computes it
// from the token it holds; whoever has the link may use it until then.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::api::e2b {

std::string EnvdFileSignature(std::string_view path, std::string_view operation,
                              std::string_view user, std::string_view token,
                              std::optional<int64_t> expiration);

// What a request's signature says, in envd's words when it is refused.
enum class FileSignature { kValid, kInvalid, kBadExpiration, kExpired };
const char* FileSignatureError(FileSignature result);

// `method` GET or POST (other methods are never signed); `path`, `user`,
// `signature` and `expiration` as the query gave them (user "" for the
// default). The signature is checked before the expiry, so a forger never
// learns whether the expiry was the problem.
FileSignature CheckEnvdFileSignature(std::string_view method, std::string_view path,
                                     std::string_view user, std::string_view signature,
                                     const std::optional<std::string>& expiration,
                                     std::string_view token, int64_t now_s);

}  // namespace kiln::api::e2b
