// kiln image build | ls | get | versions | rm | tag | untag | logs | prune |
// pool | registry set|ls|rm
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/args.h"
#include "cli/calls.h"
#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/image_context.h"
#include "cli/json_util.h"
#include "cli/output.h"
#include "cli/progress.h"
#include "cli/url.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// A followed log read waits up to 20 s on the daemon's side.
const RequestOptions kFollowOptions{.timeout = 60s};

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "/v1/images/<ref>" for an id, else the id a resolve answers.
std::string ImageId(Context& ctx, const std::string& ref) {
  if (IsImageId(ref)) return ref;
  json info = ctx.http().Call(Method::kGet, "/v1/images/resolve" + Query().Add("ref", ref).Str(),
                              nullptr, kQueryOptions);
  std::string id = StringField(info, "id");
  if (id.empty()) throw ClientError("bad_response", "the daemon's resolve answer has no id");
  return id;
}

std::string ImageTable(const json& images) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& i : images) {
    if (!i.is_object()) continue;
    std::string tags;
    for (const auto& t : i.value("tags", json::array()))
      if (t.is_string()) tags += (tags.empty() ? "" : ",") + t.get<std::string>();
    rows.push_back({DisplayValue(i.value("id", json())), DisplayValue(i.value("name", json())),
                    DisplayValue(i.value("version", json())), tags.empty() ? "-" : tags,
                    DisplayValue(i.value("state", json())),
                    FormatBytes(i.value("sizeBytes", json())),
                    DisplayValue(i.value("createdAt", json()))});
  }
  return FormatTable({"ID", "NAME", "VERSION", "TAGS", "STATE", "SIZE", "CREATED"}, rows);
}

json ListImages(Context& ctx, const std::optional<std::string>& name) {
  return ListAll(
      ctx,
      [&name](const std::optional<std::string>& cursor) {
        Query q;
        if (name) q.Add("name", *name);
        if (cursor) q.Add("cursor", *cursor);
        return "/v1/images" + q.Str();
      },
      "image");
}

std::string LogTarget(const std::string& id, long long after, bool follow) {
  Query q;
  q.Add("after", std::to_string(after));
  if (follow) q.Add("follow", "true");
  return "/v1/images/" + PercentEncode(id) + "/logs" + q.Str();
}

// Reads the log from `after` until the build ends (follow) or no new line
// comes (not follow), handing each line to `on_line`; the last answer.
json ReadLogs(Context& ctx, const std::string& id, bool follow,
              const std::function<void(const json&)>& on_line) {
  long long after = 0;
  for (;;) {
    json page = ctx.http().Call(Method::kGet, LogTarget(id, after, follow), nullptr,
                                follow ? kFollowOptions : kQueryOptions);
    const json lines = page.value("lines", json::array());
    if (lines.is_array())
      for (const auto& line : lines) on_line(line);
    const long long next = IntField(page, "nextAfter").value_or(after);
    if (BoolField(page, "done")) return page;
    const std::string state = StringField(page, "state");
    if (state == "ready" || state == "failed" || state == "deleted") return page;
    if (!follow && next == after) return page;
    after = next;
  }
}

std::string LineText(const json& line) {
  std::string text = StringField(line, "text");
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

// "[N/M] INSTRUCTION ...": the line the daemon logs as each step begins.
bool StepHeader(const std::string& text, long long* n, long long* m) {
  if (text.size() < 5 || text[0] != '[') return false;
  std::size_t i = 1;
  auto number = [&](long long* out) {
    const std::size_t start = i;
    long long v = 0;
    while (i < text.size() && i - start < 9 && std::isdigit(static_cast<unsigned char>(text[i])))
      v = v * 10 + (text[i++] - '0');
    *out = v;
    return i > start;
  };
  if (!number(n) || i >= text.size() || text[i++] != '/' || !number(m)) return false;
  return i < text.size() && text[i] == ']' && *n > 0 && *m >= *n;
}

int PrintBuildFailure(const Context& ctx, const json& info) {
  if (ctx.json()) {
    PrintJson(info);
  } else {
    std::cerr << "kiln: error: " << BuildFailureMessage(info) << "\n";
  }
  return 1;
}

}  // namespace

bool IsImageId(std::string_view ref) {
  if (ref.size() != 36) return false;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? ref[i] != '-' : !std::isxdigit(static_cast<unsigned char>(ref[i]))) return false;
  }
  return true;
}

std::string BuildFailureMessage(const json& info) {
  const json err = info.value("error", json::object());
  std::string msg = "image " + StringField(info, "name") + " build failed";
  if (auto step = IntField(err, "step")) msg += " at step " + std::to_string(*step);
  if (auto line = IntField(err, "line")) msg += " (Dockerfile line " + std::to_string(*line) + ")";
  if (std::string instr = StringField(err, "instruction"); !instr.empty())
    msg += " [" + instr + "]";
  msg += ": " + StringField(err, "message", "no message");
  if (auto code = IntField(err, "exitCode")) msg += " (exit " + std::to_string(*code) + ")";
  return msg;
}

json ImageBuildBody(const ParsedArgs& args, const std::optional<std::string>& dockerfile,
                    const std::optional<std::string>& context_digest) {
  json body = json::object();
  // -t NAME[:TAG]: one name; every TAG given becomes a tag.
  std::string name;
  json tags = json::array();
  for (const auto& t : args.All("tag")) {
    const auto colon = t.rfind(':');
    const bool has_tag = colon != std::string::npos && t.find('/', colon) == std::string::npos;
    const std::string n = has_tag ? t.substr(0, colon) : t;
    if (n.empty() || (has_tag && colon + 1 == t.size()))
      throw UsageError("-t: bad NAME[:TAG] '" + t + "'");
    if (!name.empty() && n != name)
      throw UsageError("-t: one image name per build ('" + name + "' and '" + n + "')");
    name = n;
    if (has_tag) tags.push_back(t.substr(colon + 1));
  }
  if (name.empty()) throw UsageError("missing -t NAME[:TAG]");
  body["name"] = name;
  if (!tags.empty()) body["tags"] = tags;
  const bool recipe_flags =
      args.Has("from") || args.Has("pip") || args.Has("apt") || args.Has("npm");
  if (dockerfile) {
    if (args.Has("pip") || args.Has("apt") || args.Has("npm") || args.Has("from"))
      throw UsageError(
          "--from, --pip, --apt and --npm make a recipe; they do not go with a Dockerfile");
    body["dockerfile"] = *dockerfile;
    if (context_digest) body["context"] = *context_digest;
    if (args.Has("build-arg")) {
      json build_args = json::object();
      for (const auto& kv : args.All("build-arg")) {
        auto [k, v] = SplitKeyValue("--build-arg", kv);
        build_args[k] = v;
      }
      body["buildArgs"] = build_args;
    }
    if (auto target = args.Get("target")) body["target"] = *target;
  } else if (recipe_flags) {
    if (args.Has("build-arg") || args.Has("target"))
      throw UsageError("--build-arg and --target go with a Dockerfile");
    json recipe = json::object();
    if (auto from = args.Get("from")) recipe["base"] = *from;
    for (const char* key : {"apt", "pip", "npm"})
      if (args.Has(key)) recipe[key] = args.All(key);
    body["recipe"] = recipe;
  } else {
    throw UsageError(
        "nothing to build: give a DIR with a Dockerfile, -f Dockerfile, or "
        "--from/--pip/--apt/--npm");
  }
  if (args.Has("ready-port") && args.Has("ready-command"))
    throw UsageError("--ready-port and --ready-command exclude each other");
  if (auto start = args.Get("start")) {
    json s = {{"command", *start}};
    if (auto port = args.Get("ready-port"))
      s["readyPort"] = ParseInt("--ready-port", *port, 1, 65535);
    if (auto cmd = args.Get("ready-command")) s["readyCommand"] = *cmd;
    body["start"] = s;
  } else if (args.Has("ready-port") || args.Has("ready-command")) {
    throw UsageError("--ready-port and --ready-command need --start");
  }
  if (args.Has("allow-host")) body["network"] = {{"allow", args.All("allow-host")}};
  json build = json::object();
  if (auto v = args.Get("vcpu")) build["vcpu"] = ParseInt("--vcpu", *v, 1, 64);
  if (auto v = args.Get("memory")) build["memoryMiB"] = ParseInt("--memory", *v, 128, 1 << 20);
  if (auto v = args.Get("disk-mib")) build["diskMiB"] = ParseInt("--disk-mib", *v, 1, 1 << 24);
  if (auto v = args.Get("max-image-mib"))
    build["maxImageMiB"] = ParseInt("--max-image-mib", *v, 1, 1 << 24);
  if (auto v = args.Get("timeout")) build["timeoutSeconds"] = ParseInt("--timeout", *v, 1, 86400);
  if (!build.empty()) body["build"] = build;
  if (args.Has("no-cache")) body["cache"] = false;
  return body;
}

int CmdImageBuild(Context& ctx, const ParsedArgs& args) {
  const std::optional<std::string> dir =
      args.positionals.empty() ? std::nullopt : std::optional(args.positionals[0]);
  std::optional<std::string> dockerfile;
  if (auto file = args.Get("file")) {
    dockerfile = ReadText(*file);
  } else if (dir && std::filesystem::is_regular_file(std::filesystem::path(*dir) / "Dockerfile")) {
    dockerfile = ReadText((std::filesystem::path(*dir) / "Dockerfile").string());
  } else if (dir && !args.Has("from") && !args.Has("pip") && !args.Has("apt") && !args.Has("npm")) {
    throw UsageError(*dir + " has no Dockerfile (give -f FILE)");
  }
  std::optional<std::string> digest;
  if (dockerfile) ImageBuildBody(args, dockerfile, std::nullopt);  // usage errors before packing
  if (dockerfile && dir) {
    Progress progress("packing " + *dir, ctx.progress());
    Result<PackedContext> packed = PackContext(*dir);
    if (!packed.ok()) throw UsageError(packed.status().message());
    const json ask = {{"digests", json::array({packed->digest})}};
    json missing =
        ctx.http().Call(Method::kPost, "/v1/images/context/missing", &ask, kQueryOptions);
    bool need = false;
    for (const auto& m : missing.value("missing", json::array()))
      need = need || m == packed->digest;
    if (need) {
      RequestOptions up{.timeout = 600s};
      up.headers.emplace_back("Content-Type", "application/gzip");
      ctx.http().Upload(Method::kPut, "/v1/images/context/" + packed->digest,
                        std::move(packed->bytes), up);
    }
    digest = packed->digest;
  }
  const json body = ImageBuildBody(args, dockerfile, digest);
  json info = PostOnce(ctx, "/v1/images", body, RequestOptions{.timeout = 120s});
  const std::string id = StringField(info, "id");
  if (id.empty()) throw ClientError("bad_response", "the daemon's answer has no image id");
  long long total = IntField(info, "stepsTotal").value_or(0);
  std::unique_ptr<Progress> progress;
  long long step = 0;
  ReadLogs(ctx, id, /*follow=*/true, [&](const json& line) {
    progress.reset();  // erase the progress line before output
    const std::string text = LineText(line);
    if (ctx.json()) {
      WriteAll(STDERR_FILENO, text);
    } else if (!ctx.quiet()) {
      PrintOut(text);
    }
    if (auto s = IntField(line, "step")) step = *s;
    // The daemon answers stepsTotal 0 until the build ends; its "[N/M] ..."
    // step lines carry the total.
    if (long long n = 0, m = 0; StepHeader(StringField(line, "text"), &n, &m)) {
      step = n;
      total = m;
    }
    if (step > 0) {
      progress = std::make_unique<Progress>(
          "step " + std::to_string(step) + (total > 0 ? "/" + std::to_string(total) : ""),
          ctx.progress());
    }
  });
  progress.reset();
  info = ctx.http().Call(Method::kGet, "/v1/images/" + PercentEncode(id), nullptr, kQueryOptions);
  if (StringField(info, "state") == "failed") return PrintBuildFailure(ctx, info);
  total = IntField(info, "stepsTotal").value_or(total);
  const auto version = IntField(info, "version");
  return PrintAnswer(ctx, info,
                     id + " " + StringField(info, "name") + ":" +
                         (version ? std::to_string(*version) : std::string("?")) + "\n");
}

int CmdImageLs(Context& ctx, const ParsedArgs& args) {
  json images = ListImages(ctx, args.Get("name"));
  if (ctx.json()) {
    PrintJson({{"data", std::move(images)}, {"nextCursor", nullptr}});
    return 0;
  }
  PrintOut(ImageTable(images));
  return 0;
}

int CmdImageVersions(Context& ctx, const ParsedArgs& args) {
  json images = ListImages(ctx, args.positionals.at(0));
  if (ctx.json()) {
    PrintJson({{"data", std::move(images)}, {"nextCursor", nullptr}});
    return 0;
  }
  PrintOut(ImageTable(images));
  return 0;
}

int CmdImageGet(Context& ctx, const ParsedArgs& args) {
  const std::string& ref = args.positionals.at(0);
  json info = IsImageId(ref) ? ctx.http().Call(Method::kGet, "/v1/images/" + PercentEncode(ref),
                                               nullptr, kQueryOptions)
                             : ctx.http().Call(Method::kGet,
                                               "/v1/images/resolve" + Query().Add("ref", ref).Str(),
                                               nullptr, kQueryOptions);
  if (ctx.json()) {
    PrintJson(info);
    return 0;
  }
  static const std::vector<std::string> kOrder = {
      "id",    "name",   "version",   "tags",      "state",   "source",
      "ref",   "digest", "sizeBytes", "labels",    "config",  "start",
      "build", "pool",   "error",     "createdAt", "readyAt", "endedAt"};
  PrintOut(FormatFields(info, kOrder));
  return 0;
}

namespace {

int PostToImage(Context& ctx, const std::string& ref, std::string_view verb, const json& body,
                const std::function<std::string(const json&)>& text) {
  const std::string id = ImageId(ctx, ref);
  json answer =
      ctx.http().Call(Method::kPost, "/v1/images/" + PercentEncode(id) + std::string(verb), &body,
                      RequestOptions{.timeout = 120s});
  return PrintAnswer(ctx, answer, text(answer));
}

std::string TagsLine(const json& info) {
  std::string out = StringField(info, "id");
  for (const auto& t : info.value("tags", json::array()))
    if (t.is_string()) out += " " + t.get<std::string>();
  return out + "\n";
}

}  // namespace

int CmdImageRm(Context& ctx, const ParsedArgs& args) {
  return PostToImage(ctx, args.positionals.at(0), ":delete", json::object(),
                     [](const json& a) { return StringField(a, "id") + "\n"; });
}

int CmdImageTag(Context& ctx, const ParsedArgs& args) {
  return PostToImage(ctx, args.positionals.at(0), ":tag", {{"tag", args.positionals.at(1)}},
                     TagsLine);
}

int CmdImageUntag(Context& ctx, const ParsedArgs& args) {
  return PostToImage(ctx, args.positionals.at(0), ":untag", {{"tag", args.positionals.at(1)}},
                     TagsLine);
}

int CmdImagePool(Context& ctx, const ParsedArgs& args) {
  const auto size = ParseInt("SIZE", args.positionals.at(1), 0, 1000);
  return PostToImage(ctx, args.positionals.at(0), ":pool", {{"size", size}}, [](const json& a) {
    return "size " + DisplayValue(a.value("size", json())) + " ready " +
           DisplayValue(a.value("ready", json())) + "\n";
  });
}

int CmdImageLogs(Context& ctx, const ParsedArgs& args) {
  const std::string id = ImageId(ctx, args.positionals.at(0));
  json all = json::array();
  ReadLogs(ctx, id, args.Has("follow"), [&](const json& line) {
    if (ctx.json()) {
      PrintJson(line);
    } else {
      PrintOut(LineText(line));
    }
  });
  return 0;
}

int CmdImagePrune(Context& ctx, const ParsedArgs&) {
  const json empty = json::object();
  json answer =
      ctx.http().Call(Method::kPost, "/v1/images:prune", &empty, RequestOptions{.timeout = 600s});
  return PrintAnswer(ctx, answer,
                     FormatFields(answer, {"layersRemoved", "cacheEntriesRemoved", "bytesFreed"}));
}

int CmdImageRegistry(Context& ctx, const ParsedArgs& args) {
  const std::string& action = args.positionals.at(0);
  const std::optional<std::string> registry =
      args.positionals.size() > 1 ? std::optional(args.positionals[1]) : std::nullopt;
  if (action == "ls" || action == "list") {
    if (registry) throw UsageError("registry ls takes no REGISTRY");
    json answer = ctx.http().Call(Method::kGet, "/v1/images/registries", nullptr, kQueryOptions);
    if (ctx.json()) {
      PrintJson(answer);
      return 0;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : answer.value("data", json::array()))
      rows.push_back({DisplayValue(r.value("registry", json())),
                      DisplayValue(r.value("username", json())),
                      DisplayValue(r.value("createdAt", json()))});
    PrintOut(FormatTable({"REGISTRY", "USERNAME", "CREATED"}, rows));
    return 0;
  }
  if (!registry) throw UsageError("registry " + action + " needs the REGISTRY");
  if (action == "set") {
    const auto username = args.Get("username");
    if (!username) throw UsageError("registry set needs --username U");
    if (!args.Has("password-stdin"))
      throw UsageError("registry set needs --password-stdin (the password on stdin)");
    std::string password;
    std::getline(std::cin, password);
    if (!password.empty() && password.back() == '\r') password.pop_back();
    if (password.empty()) throw UsageError("--password-stdin: no password on stdin");
    const json body = {{"registry", *registry}, {"username", *username}, {"password", password}};
    json answer = ctx.http().Call(Method::kPost, "/v1/images/registries", &body, kQueryOptions);
    return PrintAnswer(ctx, answer, *registry + "\n");
  }
  if (action == "rm" || action == "delete") {
    const json body = {{"registry", *registry}};
    json answer =
        ctx.http().Call(Method::kPost, "/v1/images/registries:delete", &body, kQueryOptions);
    return PrintAnswer(ctx, answer, *registry + "\n");
  }
  throw UsageError("registry: unknown action '" + action + "' (set, ls, rm)");
}

}  // namespace kiln::cli
