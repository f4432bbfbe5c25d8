#include "cli/calls.h"

#include <chrono>
#include <thread>

#include "cli/errors.h"
#include "cli/interrupt.h"
#include "cli/json_util.h"
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

}  // namespace kiln::cli
