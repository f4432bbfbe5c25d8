// kiln keys create | ls | revoke
#include <unistd.h>

#include <chrono>

#include "cli/calls.h"
#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/json_util.h"
#include "cli/output.h"
#include "cli/requests.h"
#include "cli/url.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// A resent create would mint a second key whose secret nobody sees.
const RequestOptions kCreateOptions{.timeout = 30s, .idempotent = false};

}  // namespace

int CmdKeysCreate(Context& ctx, const ParsedArgs& args) {
  const json body = KeyCreateBody(args);
  json key = ctx.http().Call(Method::kPost, "/v1/keys", &body, kCreateOptions);
  const std::string id = StringField(key, "id");
  const std::string secret = StringField(key, "secret");
  if (id.empty() || secret.empty()) {
    throw ClientError("bad_response", "the daemon's answer has no key id or secret");
  }
  if (ctx.json()) {
    PrintJson(key);
    return 0;
  }
  PrintOut(FormatKeyValues({{"id", id}, {"secret", secret}}));
  // On stderr, so `kiln keys create | …` pipes just the two lines above.
  WriteAll(STDERR_FILENO, "kiln: the secret is shown only this once; store it now\n");
  return 0;
}

int CmdKeysLs(Context& ctx, const ParsedArgs&) {
  json answer = ctx.http().Call(Method::kGet, "/v1/keys", nullptr, kQueryOptions);
  if (!answer.is_object() || !answer.contains("data") || !answer["data"].is_array()) {
    throw ClientError("bad_response", "the daemon's key list has no \"data\" array");
  }
  if (ctx.json()) {
    PrintJson(answer);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& k : answer["data"]) {
    if (!k.is_object()) continue;
    rows.push_back(
        {DisplayValue(k.value("id", json())), DisplayValue(k.value("name", json())),
         BoolField(k, "admin") ? "yes" : "no", DisplayValue(k.value("dailyLimitMicros", json())),
         DisplayValue(k.value("createdAt", json())), DisplayValue(k.value("revokedAt", json()))});
  }
  PrintOut(FormatTable({"ID", "NAME", "ADMIN", "DAILY_LIMIT_MICROS", "CREATED", "REVOKED"}, rows));
  return 0;
}

int CmdKeysRevoke(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json empty = json::object();
  json key = ctx.http().Call(Method::kPost, KeyTarget(id, ":revoke"), &empty, kQueryOptions);
  return PrintAnswer(ctx, key, id + "\n");
}

}  // namespace kiln::cli
