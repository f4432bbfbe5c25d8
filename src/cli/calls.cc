#include "cli/calls.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "cli/errors.h"
#include "cli/interrupt.h"
#include "cli/json_util.h"
#include "cli/output.h"
#include "cli/requests.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr int kMaxResends = 2;
constexpr auto kInProgressPoll = 500ms;  // the daemon says Retry-After: 1
const RequestOptions kPageOptions{.timeout = 30s};
constexpr int kMaxPages = 10000;  // guards against a cursor that never ends

}  // namespace

json PostOnce(Context& ctx, std::string_view target, const json& body, RequestOptions options) {
  options.headers.emplace_back("Idempotency-Key", NewIdempotencyKey());
  options.idempotent = true;  // with the key, a resend is replayed, not run again
  const auto give_up = std::chrono::steady_clock::now() + options.timeout;
  for (int resends = 0;;) {
    try {
      return ctx.http().Call(Method::kPost, target, &body, options);
    } catch (const ApiError& e) {
      if (e.code != "request_in_progress" || std::chrono::steady_clock::now() > give_up) throw;
    } catch (const ClientError& e) {
      if (e.code != "connection_lost" || ++resends > kMaxResends) throw;
    }
    if (options.interruptible && InterruptRequested()) throw Interrupted(InterruptSignal());
    std::this_thread::sleep_for(kInProgressPoll);
  }
}

json ListAll(Context& ctx, const PageTarget& target, std::string_view noun) {
  json items = json::array();
  std::optional<std::string> cursor;
  for (int page = 0; page < kMaxPages; ++page) {
    json answer = ctx.http().Call(Method::kGet, target(cursor), nullptr, kPageOptions);
    if (!answer.is_object() || !answer.contains("data") || !answer["data"].is_array()) {
      throw ClientError("bad_response",
                        "the daemon's " + std::string(noun) + " list has no \"data\" array");
    }
    for (auto& item : answer["data"]) items.push_back(std::move(item));
    std::string next = StringField(answer, "nextCursor");
    if (next.empty() || next == cursor) break;
    cursor = std::move(next);
  }
  return items;
}

std::uint64_t DownloadToFile(Context& ctx, std::string_view target, const std::string& local,
                             const PartialCheck& finish) {
  const std::string partial = local + ".kiln-partial";
  int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw UsageError("cannot write " + partial + ": " + std::strerror(errno));
  std::uint64_t bytes = 0;
  try {
    ctx.http().Download(target, kTransferOptions, [&](std::string_view chunk) {
      bytes += chunk.size();
      if (!WriteAll(fd, chunk)) throw ClientError("local_error", "cannot write " + partial);
    });
    if (::close(fd) != 0) {
      fd = -1;
      throw ClientError("local_error", "cannot write " + partial + ": " + std::strerror(errno));
    }
    fd = -1;
    if (finish) finish(partial, bytes);
    if (::rename(partial.c_str(), local.c_str()) != 0)
      throw UsageError("cannot write " + local + ": " + std::strerror(errno));
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(partial.c_str());
    throw;
  }
  return bytes;
}

}  // namespace kiln::cli
