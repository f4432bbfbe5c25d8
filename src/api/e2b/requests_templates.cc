// E2B's template-build bodies, read with FieldReader: a bad field is named
// ("body.steps[2].args"), an unknown one refused, and what kiln does not
// offer refused as not_supported naming it.
#include "api/e2b/routes.h"
#include "api/e2b/templates.h"
#include "api/errors.h"
#include "api/validate.h"
#include "common/contract.h"

namespace kiln::api::e2b {

using nlohmann::json;

namespace template_fields {
namespace {

constexpr size_t kMaxSteps = 190;          // the Dockerfile they make stays within 200 steps
constexpr size_t kMaxArgs = 256;           // ENV's pairs, flattened
constexpr size_t kMaxArgBytes = 1u << 20;  // a RUN's command, like exec's
constexpr size_t kMaxCommandBytes = 64u << 10;

// "name:tag" -> {name, tag}: a tag follows the last ':' after the last '/'.
std::pair<std::string, std::optional<std::string>> SplitTag(const std::string& ref) {
  size_t colon = ref.rfind(':');
  size_t slash = ref.rfind('/');
  if (colon == std::string::npos || (slash != std::string::npos && colon < slash))
    return {ref, std::nullopt};
  return {ref.substr(0, colon), ref.substr(colon + 1)};
}

std::string KilnTag(const std::string& e2b_tag) {
  return e2b_tag == kDefaultTag ? "latest" : e2b_tag;
}

}  // namespace
}  // namespace template_fields

std::string KilnTemplateRef(const std::string& e2b_name) {
  auto [name, tag] = template_fields::SplitTag(e2b_name);
  if (tag && *tag == kDefaultTag) return name;
  return e2b_name;
}

std::string E2bTag(const std::string& kiln_tag) {
  return kiln_tag == "latest" ? kDefaultTag : kiln_tag;
}

TemplateRequest ReadTemplateRequest(const json& raw_body) {
  using template_fields::KilnTag;
  json body = WithoutNulls(raw_body);
  FieldReader f(body);
  TemplateRequest r;
  auto name = f.String("name", 256);
  if (!name && !f.has("name")) f.Issue("name", "is required: the template's name");
  if (name) {
    auto [n, tag] = template_fields::SplitTag(*name);
    r.name = n;
    if (n.empty()) f.Issue("name", "must name a template");
    if (tag) r.tags.push_back(KilnTag(*tag));
  }
  for (const auto& t : f.StringList("tags", 32).value_or(std::vector<std::string>{})) {
    std::string kiln = KilnTag(t);
    if (std::find(r.tags.begin(), r.tags.end(), kiln) == r.tags.end()) r.tags.push_back(kiln);
  }
  if (auto cpu = f.Int("cpuCount", contract::kVcpu.min, contract::kVcpu.max)) {
    r.shape.vcpu = static_cast<int>(*cpu);
    r.given.vcpu = true;
  }
  if (auto mem = f.Int("memoryMB", contract::kMemoryMiB.min, contract::kMemoryMiB.max)) {
    r.shape.memory_mib = static_cast<int>(*mem);
    r.given.memory = true;
  }
  // kiln's disk is the writable layer's size: free space after the build
  // is about what is asked for.
  if (auto disk = f.Int("minFreeDiskMB", 0, contract::kDiskMiB.max); disk && *disk > 0) {
    r.shape.disk_mib = static_cast<int>(std::max<int64_t>(*disk, contract::kDiskMiB.min));
    r.given.disk = true;
  }
  f.Finish();
  return r;
}

TemplateBuild ReadTemplateBuild(const json& raw_body) {
  json body = WithoutNulls(raw_body);
  FieldReader f(body);
  TemplateBuild b;
  b.from_image = f.String("fromImage", 512);
  b.from_template = f.String("fromTemplate", 256);
  if (b.from_image && b.from_template)
    f.Issue("fromTemplate", "give fromImage or fromTemplate, not both");
  if (b.from_image && b.from_image->empty()) f.Issue("fromImage", "must name an image");
  if (b.from_template && b.from_template->empty()) f.Issue("fromTemplate", "must name a template");
  if (f.Raw("fromImageRegistry"))
    throw ApiError(Code::kNotSupported,
                   "fromImageRegistry (a build's own registry credentials) is not offered by "
                   "kiln: give the key a registry's credentials once with POST "
                   "/v1/images/registries, then build without them",
                   json{{"feature", "fromImageRegistry"}});
  b.force = f.Bool("force").value_or(false);
  b.start_cmd = f.String("startCmd", template_fields::kMaxCommandBytes);
  b.ready_cmd = f.String("readyCmd", template_fields::kMaxCommandBytes);
  if (const json* steps = f.Raw("steps")) {
    if (!steps->is_array()) {
      f.Issue("steps", "must be a list of steps");
    } else if (steps->size() > template_fields::kMaxSteps) {
      f.Issue("steps",
              "must have at most " + std::to_string(template_fields::kMaxSteps) + " steps");
    } else {
      for (size_t i = 0; i < steps->size(); ++i) {
        std::string at = "steps[" + std::to_string(i) + "]";
        json step = WithoutNulls((*steps)[i]);
        FieldReader s(step, "body." + at);
        TemplateStep t;
        t.type = s.String("type", 16).value_or("");
        if (t.type != "RUN" && t.type != "COPY" && t.type != "ENV" && t.type != "WORKDIR" &&
            t.type != "USER")
          s.Issue("type", "must be RUN, COPY, ENV, WORKDIR or USER");
        t.args = s.StringList("args", template_fields::kMaxArgs).value_or(t.args);
        for (size_t a = 0; a < t.args.size(); ++a)
          if (t.args[a].size() > template_fields::kMaxArgBytes)
            s.Issue("args[" + std::to_string(a) + "]", "must be at most 1 MiB");
        t.files_hash = s.String("filesHash", 128);
        t.force = s.Bool("force").value_or(false);
        s.Bool("forceUpload");
        s.Raw("resolveSymlinks");  // the SDK's own: how it made the archive
        s.Raw("gzip");
        s.Finish();
        b.steps.push_back(std::move(t));
      }
    }
  }
  f.Finish();
  return b;
}

}  // namespace kiln::api::e2b
