// kiln keys create | ls | revoke
#include <unistd.h>

#include <chrono>

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
const RequestOptions kQueryOptions{.timeout = 30s};

}  // namespace

int cmd_keys_create(Context& ctx, const ParsedArgs& args) {
  const json body = key_create_body(args);
  json key = ctx.http().call(Method::kPost, "/v1/keys", &body, kCreateOptions);
  const std::string id = string_field(key, "id");
  const std::string secret = string_field(key, "secret");
  if (id.empty() || secret.empty()) {
    throw ClientError("bad_response", "the daemon's answer has no key id or secret");
  }
  if (ctx.json()) {
    print_json(key);
    return 0;
  }
  print_out(format_key_values({{"id", id}, {"secret", secret}}));
  // On stderr, so `kiln keys create | …` pipes just the two lines above.
  write_all(STDERR_FILENO, "kiln: the secret is shown only this once; store it now\n");
  return 0;
}

int cmd_keys_ls(Context& ctx, const ParsedArgs&) {
  json answer = ctx.http().call(Method::kGet, "/v1/keys", nullptr, kQueryOptions);
  if (!answer.is_object() || !answer.contains("data") || !answer["data"].is_array()) {
    throw ClientError("bad_response", "the daemon's key list has no \"data\" array");
  }
  if (ctx.json()) {
    print_json(answer);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& k : answer["data"]) {
    if (!k.is_object()) continue;
    rows.push_back(
        {display_value(k.value("id", json())), display_value(k.value("name", json())),
         bool_field(k, "admin") ? "yes" : "no", display_value(k.value("dailyLimitMicros", json())),
         display_value(k.value("createdAt", json())), display_value(k.value("revokedAt", json()))});
  }
  print_out(
      format_table({"ID", "NAME", "ADMIN", "DAILY_LIMIT_MICROS", "CREATED", "REVOKED"}, rows));
  return 0;
}

int cmd_keys_revoke(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json empty = json::object();
  json key = ctx.http().call(Method::kPost, key_target(id, ":revoke"), &empty, kQueryOptions);
  return print_answer(ctx, key, id + "\n");
}

}  // namespace kiln::cli
