#include "images/manager/upload_links.h"

#include "common/digest.h"

namespace kiln::images {

std::string UploadLinks::Sign(const std::string& owner, const std::string& scope,
                              const std::string& what, int64_t expires_ms) const {
  // Fields joined by a byte none of them may hold (Check refuses it), so
  // no two field lists sign alike.
  return HmacSha256Hex(
      key_, "upload\n" + owner + "\n" + scope + "\n" + what + "\n" + std::to_string(expires_ms));
}

bool UploadLinks::Check(const std::string& owner, const std::string& scope, const std::string& what,
                        int64_t expires_ms, const std::string& signature, int64_t now_ms) const {
  if (key_.empty() || expires_ms <= now_ms || expires_ms - now_ms > kTtlMs) return false;
  for (const std::string* field : {&owner, &scope, &what})
    if (field->empty() || field->find('\n') != std::string::npos) return false;
  return ConstantTimeEquals(Sign(owner, scope, what, expires_ms), signature);
}

}  // namespace kiln::images
