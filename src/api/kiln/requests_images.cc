// kiln's requests (requests.h) for images: POST /v1/images field by field
// into an images::ImageRequest, tags, registry credentials, build contexts
// and the build log's query.
#include "api/context.h"
#include "api/kiln/requests.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

constexpr size_t kMaxDockerfile = 256 * 1024;

images::BuildLimits ReadBuild(FieldReader& parent) {
  images::BuildLimits b;
  const json* raw = parent.Raw("build");
  if (!raw || raw->is_null()) return b;
  if (!raw->is_object()) {
    parent.Issue("build",
                 "must be an object {vcpu, memoryMiB, diskMiB, maxImageMiB, timeoutSeconds}");
    return b;
  }
  FieldReader f(*raw, "body.build");
  b.vcpu = static_cast<int>(f.Int("vcpu", 1, 8).value_or(b.vcpu));
  b.memory_mib = static_cast<int>(f.Int("memoryMiB", 256, 16384).value_or(b.memory_mib));
  b.disk_mib = static_cast<int>(f.Int("diskMiB", 512, 32768).value_or(b.disk_mib));
  b.max_image_mib = static_cast<int>(f.Int("maxImageMiB", 512, 20480).value_or(b.max_image_mib));
  b.timeout_seconds =
      static_cast<int>(f.Int("timeoutSeconds", 60, 3600).value_or(b.timeout_seconds));
  f.Finish();
  return b;
}

}  // namespace

std::optional<images::StartSpec> ReadStart(const json* raw, const std::string& prefix) {
  if (!raw || raw->is_null()) return std::nullopt;
  if (!raw->is_object()) throw InvalidField(prefix, "must be an object or null");
  FieldReader f(*raw, prefix);
  images::StartSpec s;
  if (auto v = f.StringList("argv", 256)) s.argv = *v;
  if (auto v = f.String("command", 64 * 1024)) s.command = *v;
  if (s.argv && s.argv->empty()) f.Issue("argv", "must not be empty");
  if (!s.argv == !s.command) f.Issue("command", "give exactly one of command and argv");
  if (auto v = f.String("cwd", 4096)) s.cwd = *v;
  if (auto v = f.StringMap("env", 256, 256, 64 * 1024)) s.env = *v;
  if (auto v = f.String("readyCommand", 64 * 1024)) s.ready_command = *v;
  if (auto v = f.Int("readyPort", 1, 65535)) s.ready_port = static_cast<int>(*v);
  if (s.ready_command && s.ready_port)
    f.Issue("readyPort", "give at most one of readyCommand and readyPort");
  s.ready_timeout_seconds = static_cast<int>(f.Int("readyTimeoutSeconds", 1, 300).value_or(60));
  f.Finish();
  return s;
}

namespace {

std::optional<Sha256Digest> DigestText(const std::string& text) {
  std::optional<Sha256Digest> d = Sha256Digest::Parse(text);
  return d ? d : Sha256Digest::FromHex(text);
}

// {archive: {sha256, size, chunks}, files}: Runtime's client's context.
std::optional<ChunkedContext> ReadChunkedContext(const json& raw) {
  FieldReader f(raw, "body.context");
  std::optional<ChunkedContext> out;
  const json* archive = f.Raw("archive");
  if (!archive || !archive->is_object()) {
    f.Issue("archive", "is required: {sha256, size, chunks}");
  } else {
    FieldReader a(*archive, "body.context.archive");
    auto sha = a.String("sha256", 80);
    auto size = a.Int("size", 1, static_cast<int64_t>(kMaxContextBytes));
    auto chunks = a.StringList("chunks", 10000);
    std::optional<Sha256Digest> whole = sha ? DigestText(*sha) : std::nullopt;
    if (!sha)
      a.Issue("sha256", "is required");
    else if (!whole)
      a.Issue("sha256", "must be 64 lowercase hex digits");
    if (!size && !a.has("size")) a.Issue("size", "is required");
    if (!chunks) a.Issue("chunks", "is required: the chunks' sha256, in order");
    std::vector<Sha256Digest> parsed;
    for (size_t i = 0; chunks && i < chunks->size(); ++i) {
      if (auto d = DigestText((*chunks)[i]))
        parsed.push_back(*d);
      else
        a.Issue("chunks[" + std::to_string(i) + "]", "must be 64 lowercase hex digits");
    }
    if (chunks && chunks->empty()) a.Issue("chunks", "must name at least one chunk");
    a.Finish();
    if (whole && size && chunks) out = ChunkedContext{*whole, static_cast<uint64_t>(*size), parsed};
  }
  // The client's list of the archive's files: the archive holds them.
  if (const json* files = f.Raw("files"); files && !files->is_array())
    f.Issue("files", "must be an array");
  f.Finish();
  return out;
}

}  // namespace

images::ImageRequest ReadImageRequest(const json& body, const std::string& owner,
                                      std::optional<ChunkedContext>* chunked) {
  FieldReader f(body);
  images::ImageRequest req;
  req.owner = owner;
  const json* recipe = f.Raw("recipe");
  if (const json* d =
          body.is_object() && body.contains("dockerfile") ? &body["dockerfile"] : nullptr;
      d && d->is_string() && d->get_ref<const std::string&>().size() > kMaxDockerfile)
    throw ApiError(Code::kPayloadTooLarge, "body.dockerfile: larger than 256 KiB",
                   json{{"limit", "dockerfileBytes"}, {"max", kMaxDockerfile}});
  auto dockerfile = f.String("dockerfile", kMaxDockerfile);
  auto image = f.String("image", 1024);
  int sources = (recipe && !recipe->is_null()) + dockerfile.has_value() + image.has_value();
  if (sources != 1) f.Issue("recipe", "give exactly one source: recipe, dockerfile or image");
  if (auto v = f.String("name", 128)) req.name = *v;
  if (recipe && !recipe->is_null()) {
    if (!recipe->is_object()) f.Issue("recipe", "must be an object");
    req.source = images::ImageSource::kRecipe;
    req.recipe = *recipe;
  } else if (dockerfile) {
    req.source = images::ImageSource::kDockerfile;
    req.dockerfile = *dockerfile;
  } else if (image) {
    req.source = images::ImageSource::kImage;
    Result<images::ImageRef> ref = images::ParseImageRef(*image);
    if (!ref.ok()) {
      f.Issue("image", ref.status().message());
    } else {
      req.image_ref = *ref;
      // Unnamed, a pull is named after its repository's last component.
      if (req.name.empty()) req.name = ref->path.substr(ref->path.rfind('/') + 1);
    }
  }
  const json* context = f.Raw("context");
  if (context && !context->is_null()) {
    if (!dockerfile) f.Issue("context", "only goes with dockerfile");
    if (context->is_string()) {
      std::optional<Sha256Digest> d = DigestText(context->get<std::string>());
      if (!d) f.Issue("context", "must be \"sha256:<64 hex>\" of an uploaded context");
      req.context = d;
    } else if (context->is_object()) {
      *chunked = ReadChunkedContext(*context);
    } else {
      f.Issue("context", "must be \"sha256:<hex>\" or {archive: {sha256, size, chunks}}");
    }
  }
  if (const json* files = f.Raw("files"); files && !files->is_null()) {
    if (!dockerfile)
      f.Issue("files", "only goes with dockerfile (a recipe has recipe.files)");
    else if (context && !context->is_null())
      f.Issue("files", "give a context or files, not both");
    else {
      Result<std::vector<images::RecipeFile>> parsed = images::InlineContextFiles(*files);
      if (!parsed.ok()) {
        if (parsed.status().code() == Code::kPayloadTooLarge) throw ApiError(parsed.status());
        std::string field = parsed.status().details().value("field", std::string("files"));
        std::string message = parsed.status().message();
        if (message.rfind(field + ": ", 0) == 0) message.erase(0, field.size() + 2);
        f.Issue(field, message);
      } else {
        req.files = std::move(*parsed);
      }
    }
  }
  if (auto v = f.StringMap("buildArgs", 256, 256, 64 * 1024)) req.build_args = *v;
  if (auto v = f.String("target", 128)) req.target = *v;
  if (auto v = f.String("dockerignore", 256 * 1024)) req.dockerignore = *v;
  if (!dockerfile) {
    for (const char* only : {"buildArgs", "target", "dockerignore"})
      if (body.is_object() && body.contains(only)) f.Issue(only, "only goes with dockerfile");
  }
  if (auto v = f.StringList("tags", 32)) req.tags = *v;
  if (auto v = ReadLabels(f)) req.labels = *v;
  if (auto v = f.StringMap("env", 256, 256, 64 * 1024)) req.env = *v;
  for (const auto& [k, _] : req.env)
    if (!ValidEnvName(k)) f.Issue("env." + k, "is not a valid variable name");
  req.sudo = f.Bool("sudo").value_or(true);
  req.build = ReadBuild(f);
  if (const json* start = f.Raw("start"); start && !start->is_null())
    req.start = ReadStart(start, "body.start");
  if (auto v = f.Bool("cache")) req.cache = *v;
  if (auto policy = ReadNetworkField(f)) {
    req.network = *policy;
    // A build names the hosts its steps may reach: naming some is turning
    // the internet on for them alone, unless it says otherwise.
    const json& raw = body["network"];
    if (!raw.contains("internet") && !policy->allow.empty()) req.network.internet = true;
  }
  f.Raw("region");  // one host: accepted, meaningless
  f.Finish();
  return req;
}

namespace {

// A body of one required string member, `name`.
std::string ReadOneString(const json& body, const std::string& name, size_t max_len) {
  FieldReader f(body);
  auto value = f.String(name, max_len);
  if (!value) f.Issue(name, "is required");
  f.Finish();
  return *value;
}

}  // namespace

std::string ReadTag(const json& body) { return ReadOneString(body, "tag", 128); }

store::RegistryCredential ReadRegistry(const json& body) {
  FieldReader f(body);
  store::RegistryCredential c;
  auto registry = f.String("registry", 255);
  auto username = f.String("username", 255);
  auto password = f.String("password", 8192);
  if (!registry || registry->empty()) f.Issue("registry", "is required (host[:port])");
  if (!username) f.Issue("username", "is required");
  if (!password) f.Issue("password", "is required");
  f.Finish();
  c.registry = *registry;
  c.username = *username;
  c.password = *password;
  if (c.registry.find('/') != std::string::npos)
    throw InvalidField("body.registry", "is a host[:port], without a scheme or path");
  return c;
}

std::string ReadRegistryDelete(const json& body) { return ReadOneString(body, "registry", 255); }

DigestsAsked ReadDigestsAsked(const json& body) {
  FieldReader f(body);
  DigestsAsked asked;
  auto digests = f.StringList("digests", 1000);
  if (!digests) f.Issue("digests", "is required: [\"sha256:<hex>\", ...]");
  for (size_t i = 0; digests && i < digests->size(); ++i) {
    std::optional<Sha256Digest> d = DigestText((*digests)[i]);
    if (!d) {
      f.Issue("digests[" + std::to_string(i) + "]", "must be \"sha256:<64 lowercase hex>\"");
    } else {
      asked.digests.push_back(*d);
      asked.spelled.emplace(*d, (*digests)[i]);
    }
  }
  f.Finish();
  return asked;
}

Sha256Digest ReadContextDigest(Exchange& ex, bool chunk) {
  std::optional<Sha256Digest> digest = Sha256Digest::FromHex(ex.params["digest"]);
  if (!digest)
    throw InvalidField("path.digest",
                       chunk ? "must be 64 lowercase hex digits (the body's sha256)"
                             : "must be sha256:<64 lowercase hex> (the body's sha256)");
  return *digest;
}

ImageLogQuery ReadImageLogQuery(Exchange& ex) {
  ImageLogQuery q;
  q.after = QueryInt(ex, "after", 0, INT64_MAX, 0);
  q.limit = QueryInt(ex, "limit", 1, 10000, 1000);
  auto follow = ex.Query("follow");
  q.follow = follow && (*follow == "true" || *follow == "1");
  return q;
}

}  // namespace kiln::api::v1
