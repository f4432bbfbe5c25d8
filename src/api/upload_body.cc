#include "api/upload_body.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "api/errors.h"

namespace kiln::api {

void ReceiveUpload(Exchange& ex, const std::string& path, const UploadCap& cap) {
  auto too_large = [&] { return ApiError(Code::kPayloadTooLarge, cap.too_large, cap.details); };
  if (auto n = ex.content_length(); n && *n > cap.max_bytes) throw too_large();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::string piece;
  uint64_t total = 0;
  int write_errno = 0;
  while (ex.ReadBodyChunk(&piece)) {
    total += piece.size();
    if (total > cap.max_bytes) {
      out.close();
      std::filesystem::remove(path);
      throw too_large();
    }
    // After a failed write the rest of the body is still read (and
    // dropped), so the answer reaches a client that is still sending.
    if (out && !out.write(piece.data(), static_cast<std::streamsize>(piece.size())))
      write_errno = errno;
  }
  if (out && !out.flush()) write_errno = errno;
  if (ex.body_error() || !out) {
    out.close();
    std::filesystem::remove(path);
    if (ex.body_error()) throw ApiError(Code::kInvalidRequest, "body: the upload ended early");
    bool full = write_errno == ENOSPC || write_errno == EDQUOT;
    throw ApiError(full ? Code::kNoSpace : Code::kIoError,
                   std::string(full ? "no space left on the state disk for the upload"
                                    : "cannot store the upload") +
                       " (" + std::strerror(write_errno) + ")");
  }
}

}  // namespace kiln::api
