// A request body received into a file, for the routes that take uploads
// (build contexts, template files): read to its end as it comes, never
// held in memory, within a cap.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "api/http_server.h"

namespace kiln::api {

// What an upload past its cap is told.
struct UploadCap {
  uint64_t max_bytes = 0;
  std::string too_large;   // the message, "a build context is at most 100 MiB compressed"
  nlohmann::json details;  // the refusal's details, {"limit": ..., "max": ...}
};

// Streams `ex`'s body into `path` (created or truncated). Throws ApiError:
// kPayloadTooLarge (cap.too_large) as soon as the Content-Length or the
// bytes read pass the cap; kInvalidRequest when the body ends early;
// kNoSpace or kIoError when the disk refuses it (after reading the rest,
// so a client still sending gets the answer). On any throw `path` is gone.
void ReceiveUpload(Exchange& ex, const std::string& path, const UploadCap& cap);

}  // namespace kiln::api
