// SandboxFusion's run_code body, read with FieldReader: a bad field is named
// ("body.run_timeout: ..."), an unknown one refused. Defaults are
// SandboxFusion's (RunCodeRequest in sandbox/server/sandbox_api.py).
#include <cmath>
#include <cstdio>

#include "api/sandboxfusion/sandboxfusion.h"
#include "api/validate.h"
#include "common/base64.h"

namespace kiln::api::sandboxfusion {

using nlohmann::json;

namespace {

constexpr size_t kRunCodeMax = 4u << 20;
constexpr size_t kMaxCells = 1000;
constexpr size_t kStdinMax = 8u << 20;
constexpr size_t kPathMax = 1024;

// A timeout in seconds: a number in (0, kMaxTimeoutSeconds]; `def` if absent.
double Seconds(FieldReader& f, const std::string& name, double def, const json* taken = nullptr) {
  const json* v = taken ? taken : f.Raw(name);
  if (!v || v->is_null()) return def;
  if (!v->is_number() || v->is_boolean()) {
    f.Issue(name, "must be a number of seconds");
    return def;
  }
  double s = v->get<double>();
  if (!std::isfinite(s) || s <= 0 || s > kMaxTimeoutSeconds) {
    char max[32];
    std::snprintf(max, sizeof max, "%g", kMaxTimeoutSeconds);
    f.Issue(name, std::string("must be more than 0 and at most ") + max +
                      " seconds (kiln's limit for one step)");
    return def;
  }
  return s;
}

// memory_limit_MB: an integer number of MB, at most kiln's memory limit;
// -1 or less (SandboxFusion's default) for none; `def` if absent.
int64_t MemoryLimit(FieldReader& f, int64_t def) {
  const json* m = f.Raw("memory_limit_MB");
  if (!m || m->is_null()) return def;
  if (!m->is_number_integer()) {
    f.Issue("memory_limit_MB", "must be an integer number of MB (-1: no limit)");
    return def;
  }
  int64_t mb = m->get<int64_t>();
  if (mb > contract::kMemoryMiB.max) {
    f.Issue("memory_limit_MB",
            "must be at most " + std::to_string(contract::kMemoryMiB.max) + " (kiln's limit)");
    return def;
  }
  return mb;
}

// A path the program may name: relative to kWorkDir (or absolute), no "..".
bool GoodPath(const std::string& p) {
  if (p.empty() || p.size() > kPathMax) return false;
  for (char c : p)
    if (static_cast<unsigned char>(c) < 0x20) return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    if (p.compare(start, end - start, "..") == 0) return false;
    start = end + 1;
  }
  return p.back() != '/';
}

// `files`: path -> base64 (null skipped), decoded.
void ReadFiles(FieldReader& f, std::vector<std::pair<std::string, std::string>>* files_out) {
  if (const json* files = f.Raw("files"); files && !files->is_null()) {
    if (!files->is_object()) {
      f.Issue("files", "must be an object from a path to its base64 content");
    } else if (files->size() > kMaxFiles) {
      f.Issue("files", "must name at most " + std::to_string(kMaxFiles) + " files");
    } else {
      uint64_t total = 0;
      for (const auto& [path, content] : files->items()) {
        std::string field = "files." + path;
        // SandboxFusion skips a null content, and a path naming IGNORE_THIS_FILE.
        if (content.is_null() || path.find("IGNORE_THIS_FILE") != std::string::npos) continue;
        if (!GoodPath(path)) {
          f.Issue(field, "must be a file path without '..'");
          continue;
        }
        if (!content.is_string()) {
          f.Issue(field, "must be base64 text or null");
          continue;
        }
        auto bytes = Base64Decode(content.get_ref<const std::string&>());
        if (!bytes) {
          f.Issue(field, "is not valid base64");
          continue;
        }
        total += bytes->size();
        files_out->emplace_back(path, std::move(*bytes));
      }
      if (total > kMaxFileBytes) f.Issue("files", "must hold at most 12 MiB in all");
    }
  }
}

// `fetch_files`: paths to read back.
void ReadFetchFiles(FieldReader& f, std::vector<std::string>* fetch_out) {
  if (const json* fetch = f.Raw("fetch_files"); fetch && !fetch->is_null()) {
    if (!fetch->is_array() || fetch->size() > kMaxFiles) {
      f.Issue("fetch_files", "must be a list of at most " + std::to_string(kMaxFiles) + " paths");
    } else {
      for (size_t i = 0; i < fetch->size(); ++i) {
        const json& p = (*fetch)[i];
        if (!p.is_string() || !GoodPath(p.get_ref<const std::string&>()))
          f.Issue("fetch_files[" + std::to_string(i) + "]", "must be a file path without '..'");
        else
          fetch_out->push_back(p.get<std::string>());
      }
    }
  }
}

}  // namespace

ReadResult ReadRunCode(const json& body) {
  FieldReader f(body);
  ReadResult out;
  RunCodeRequest& r = out.request;
  if (auto code = f.String("code", kRunCodeMax)) {
    r.code = *code;
  } else if (!f.has("code")) {
    f.Issue("code", "is required: the program's source");
  }
  if (auto lang = f.String("language", 64)) {
    r.language = FindLanguage(*lang);
    if (!r.language) out.unknown_language = *lang;
  } else if (!f.has("language")) {
    f.Issue("language", "is required: one of SandboxFusion's languages, such as \"python\"");
  }
  r.compile_timeout = Seconds(f, "compile_timeout", 10);
  r.run_timeout = Seconds(f, "run_timeout", 10);
  r.memory_limit_mb = MemoryLimit(f, r.memory_limit_mb);
  if (const json* s = f.Raw("stdin"); s && !s->is_null()) {
    if (!s->is_string())
      f.Issue("stdin", "must be a string or null");
    else if (s->get_ref<const std::string&>().size() > kStdinMax)
      f.Issue("stdin", "must be at most 8 MiB");
    else
      r.stdin_data = s->get<std::string>();
  }
  ReadFiles(f, &r.files);
  ReadFetchFiles(f, &r.fetch_files);
  f.Finish();
  return out;
}

RunJupyterRequest ReadRunJupyter(const json& body) {
  FieldReader f(body);
  RunJupyterRequest r;
  const json* cells = f.Raw("cells");
  if (!cells || cells->is_null()) {
    f.Issue("cells", "is required: a list of code blocks");
  } else if (!cells->is_array() || cells->size() > kMaxCells) {
    f.Issue("cells", "must be a list of at most " + std::to_string(kMaxCells) + " code blocks");
  } else {
    size_t total = 0;
    for (size_t i = 0; i < cells->size(); ++i) {
      const json& c = (*cells)[i];
      if (!c.is_string()) {
        f.Issue("cells[" + std::to_string(i) + "]", "must be a string");
        continue;
      }
      total += c.get_ref<const std::string&>().size();
      r.cells.push_back(c.get<std::string>());
    }
    if (total > kRunCodeMax) f.Issue("cells", "must hold at most 4 MiB of code in all");
  }
  // cell_timeout 0 is none, as SandboxFusion's.
  if (const json* c = f.Raw("cell_timeout"); c && !c->is_null()) {
    bool zero = c->is_number() && !c->is_boolean() && c->get<double>() == 0;
    r.cell_timeout = zero ? 0 : Seconds(f, "cell_timeout", 0, c);
  }
  r.total_timeout = Seconds(f, "total_timeout", 45);
  r.memory_limit_mb = MemoryLimit(f, r.memory_limit_mb);
  if (auto k = f.String("kernel", 64); k && *k != "python3")
    f.Issue("kernel", "must be \"python3\", the only kernel SandboxFusion names");
  ReadFiles(f, &r.files);
  ReadFetchFiles(f, &r.fetch_files);
  f.Finish();
  return r;
}

}  // namespace kiln::api::sandboxfusion
