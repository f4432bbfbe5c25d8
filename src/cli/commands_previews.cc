// kiln sandbox preview / previews / preview-rotate / unshare: a port shared
// at its own host name (POST/GET/DELETE /v1/sandboxes/{id}/previews).
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/calls.h"
#include "cli/commands.h"
#include "cli/json_util.h"
#include "cli/output.h"
#include "cli/url.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;

std::string PortArg(const ParsedArgs& args) {
  return std::to_string(ParseInt("PORT", args.positionals.at(1), 1, 65535));
}

std::string PreviewText(const json& p) {
  return FormatFields(p, {"url", "urlWithToken", "visibility", "tokenExpiresAt", "port", "id"});
}

}  // namespace

int CmdSandboxPreview(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  json body = {{"port", ParseInt("PORT", args.positionals.at(1), 1, 65535)}};
  if (args.Has("public")) body["visibility"] = "public";
  if (auto ttl = args.Get("ttl")) body["ttlSeconds"] = ParseInt("--ttl", *ttl, 60, 604800);
  json p = PostOnce(ctx, SandboxTarget(id, "/previews"), body, kQueryOptions);
  return PrintAnswer(ctx, p, PreviewText(p));
}

int CmdSandboxPreviews(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  json answer =
      ctx.http().Call(Method::kGet, SandboxTarget(id, "/previews"), nullptr, kQueryOptions);
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : answer.value("data", json::array())) {
    rows.push_back(
        {DisplayValue(p.value("port", json())), DisplayValue(p.value("visibility", json())),
         DisplayValue(p.value("url", json())), DisplayValue(p.value("tokenExpiresAt", json()))});
  }
  return PrintAnswer(ctx, answer,
                     FormatTable({"PORT", "VISIBILITY", "URL", "TOKEN EXPIRES"}, rows));
}

int CmdSandboxPreviewRotate(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json empty = json::object();
  json p =
      ctx.http().Call(Method::kPost, SandboxTarget(id, "/previews/" + PortArg(args) + ":rotate"),
                      &empty, kQueryOptions);
  return PrintAnswer(ctx, p, PreviewText(p));
}

int CmdSandboxUnshare(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  json answer = ctx.http().Call(Method::kDelete, SandboxTarget(id, "/previews/" + PortArg(args)),
                                nullptr, kQueryOptions);
  return PrintAnswer(ctx, answer, PortArg(args) + "\n");
}

}  // namespace kiln::cli
