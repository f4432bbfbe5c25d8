// PandaStack's request bodies, read into kiln's own requests with
// FieldReader, so a bad field is named ("body.ttl_seconds: ...") and an
// unknown one refused rather than ignored.
#include "api/errors.h"
#include "api/pandastack/pandastack.h"
#include "api/validate.h"
#include "common/contract.h"

namespace kiln::api::pandastack {

using nlohmann::json;

namespace {

// PandaStack's metadata is kiln's labels, under the labels' bounds.
std::optional<std::map<std::string, std::string>> ReadMetadata(FieldReader& f) {
  return f.StringMap("metadata", contract::kLabelsMax, contract::kLabelKeyMax,
                     contract::kLabelValueMax);
}

}  // namespace

CreateRequest ReadCreate(const json& body, const contract::IntField& lease) {
  FieldReader f(body);
  CreateRequest r;
  control::SandboxSpec& spec = r.spec;
  if (auto t = f.String("template", 256)) {
    if (t->empty()) f.Issue("template", "must name a kiln image, such as \"base\"");
    r.template_name = *t;
  } else if (!f.has("template")) {
    // The client always sends one; a bare REST call must choose too.
    f.Issue("template", "is required: a kiln image, such as \"base\"");
  }
  // The client no longer sends these; a REST caller may, in kiln's bounds.
  spec.shape.vcpu = static_cast<int>(f.Int("cpu", contract::kVcpu));
  spec.shape.memory_mib = static_cast<int>(f.Int("memory_mb", contract::kMemoryMiB));
  spec.shape_given = {f.has("cpu"), f.has("memory_mb"), false};
  spec.timeout_seconds = static_cast<int>(f.Int("ttl_seconds", lease));
  spec.persistent = f.Bool("persistent").value_or(false);
  if (auto m = ReadMetadata(f)) spec.labels = *m;
  if (auto s = f.String("from_snapshot", 64)) {
    if (s->empty()) f.Issue("from_snapshot", "must be a snapshot id");
    spec.snapshot = *s;
  }
  if (f.Raw("volumes")) throw ApiError(Unsupported("POST", std::string(kPrefix) + "/volumes"));
  f.Finish();
  return r;
}

ExecRequest ReadExec(const json& body) {
  FieldReader f(body);
  ExecRequest r;
  auto cmd = f.String("cmd", contract::kCommandMax);
  if (!cmd && !f.has("cmd")) f.Issue("cmd", "is required: a shell command line");
  if (cmd && cmd->empty()) f.Issue("cmd", "must not be empty");
  r.command.command = cmd;
  // kiln's exec timeout bounds, in PandaStack's seconds.
  int64_t max_s = contract::kExecTimeoutMs.max / 1000;
  auto seconds = f.Int("timeout_seconds", 1, max_s);
  r.options.timeout_ms = seconds ? *seconds * 1000 : contract::kExecTimeoutMs.def;
  f.Finish();
  return r;
}

LifecycleChange ReadLifecycle(const json& body, const contract::IntField& lease) {
  FieldReader f(body);
  LifecycleChange c;
  c.ttl_seconds = f.Int("ttl_seconds", 1, lease.max);
  c.persistent = f.Bool("persistent");
  if (!c.ttl_seconds && !c.persistent && !f.has("ttl_seconds") && !f.has("persistent"))
    f.Issue("ttl_seconds", "give ttl_seconds or persistent");
  f.Finish();
  return c;
}

control::SnapshotOptions ReadSnapshot(const json& body) {
  FieldReader f(body);
  control::SnapshotOptions opts;
  if (auto v = f.String("name", contract::kSnapshotNameMax)) opts.name = *v;
  f.Finish();
  return opts;
}

ForkRequest ReadFork(const json& body, bool tree) {
  FieldReader f(body);
  ForkRequest r;
  if (tree) {
    auto count = f.Int("count", contract::kForkCount.min, contract::kForkCount.max);
    if (!count && !f.has("count")) f.Issue("count", "is required");
    r.count = static_cast<int>(count.value_or(1));
  }
  r.metadata = ReadMetadata(f);
  f.Finish();
  return r;
}

}  // namespace kiln::api::pandastack
