// Request patterns several verbs share: creating things exactly once, and
// reading every page of a list.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cli/context.h"

namespace kiln::cli {

// POSTs a request that creates something (a sandbox, a snapshot, copies)
// with a fresh Idempotency-Key. A lost connection, or a 409
// request_in_progress while the daemon still works on a first attempt
// whose answer we lost, is retried with the same key: the daemon then
// replays the first answer instead of creating a second thing.
nlohmann::json PostOnce(Context& ctx, std::string_view target, const nlohmann::json& body,
                        RequestOptions options);

// GETs every page of a list ({"data": [...], "nextCursor"}): `target`
// builds each request from the cursor; `noun` names the list in errors.
using PageTarget = std::function<std::string(const std::optional<std::string>& cursor)>;
nlohmann::json ListAll(Context& ctx, const PageTarget& target, std::string_view noun);

// Bulk transfers (files, snapshot tars): an hour, and Ctrl-C ends them.
// Reads and small changes: half a minute.
inline const RequestOptions kQueryOptions{.timeout = std::chrono::seconds(30)};
inline const RequestOptions kTransferOptions{.timeout = std::chrono::seconds(3600),
                                             .interruptible = true};

// GETs raw bytes into the file `local`, written as `local`.kiln-partial and
// renamed only once whole, so `local` never holds a part: `finish` (if
// given) checks or adjusts the partial file first (its path, the bytes
// got) and may throw. Any failure removes the partial file. Returns the bytes.
using PartialCheck = std::function<void(const std::string& partial, std::uint64_t bytes)>;
std::uint64_t DownloadToFile(Context& ctx, std::string_view target, const std::string& local,
                             const PartialCheck& finish = nullptr);

}  // namespace kiln::cli
