// Reading image requests: the body of POST /v1/images, and a `start` object.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "images/manager/image_request.h"

namespace kiln::api {

// A build context's most, compressed (the reference's).
inline constexpr uint64_t kMaxContextBytes = 100ull << 20;

// A context named as Runtime's client names it: the gzipped tar's chunks,
// each uploaded on its own (PUT /v1/images/context/{hex}), in order.
struct ChunkedContext {
  Sha256Digest archive;
  uint64_t size = 0;
  std::vector<Sha256Digest> chunks;
};

// Throws ApiError (400 naming each field, 413 for a Dockerfile over 256 KiB).
// A chunked `context` goes to `chunked` (req.context stays empty until the
// chunks are joined).
images::ImageRequest ReadImageRequest(const nlohmann::json& body, const std::string& owner,
                                      std::optional<ChunkedContext>* chunked);
std::optional<images::StartSpec> ReadStart(const nlohmann::json* raw, const std::string& prefix);

}  // namespace kiln::api
