#include "images/parse/recipe.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

#include "common/base64.h"
#include "images/parse/image_ref.h"

namespace kiln::images {
namespace {

using nlohmann::json;

Status FieldError(const std::string& field, const std::string& message,
                  Code code = Code::kInvalidRequest) {
  return Status(code, field + ": " + message, {{"field", field}});
}

std::string Index(const std::string& field, size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

bool ValidPackage(const std::string& name) {
  if (name.empty() || !std::isalnum(static_cast<unsigned char>(name[0]))) return false;
  static constexpr std::string_view kExtra = ".+_:=<>~!,[]-";
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || kExtra.find(c) != std::string_view::npos;
  });
}

bool HasControl(const std::string& s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

// Escapes what the Dockerfile's word processing would read: quotes, '$', the
// escape char and whitespace all become literal.
std::string EscapeWord(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '$' || c == '\'' || c == '"' || c == ' ' || c == '\t') out += '\\';
    out += c;
  }
  return out;
}

// A string list field: absent is empty.
Result<std::vector<std::string>> Strings(const json& recipe, const std::string& key) {
  const std::string field = "recipe." + key;
  std::vector<std::string> out;
  if (!recipe.contains(key)) return out;
  const json& list = recipe[key];
  if (!list.is_array()) return FieldError(field, "must be an array of strings");
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) return FieldError(Index(field, i), "must be a string");
    out.push_back(list[i].get<std::string>());
  }
  return out;
}

Result<std::vector<std::string>> Packages(const json& recipe, const std::string& key) {
  auto names = Strings(recipe, key);
  if (!names.ok()) return names.status();
  for (size_t i = 0; i < names->size(); ++i) {
    if (!ValidPackage((*names)[i])) {
      return FieldError(Index("recipe." + key, i),
                        "'" + (*names)[i] +
                            "' is not a package name: a letter or digit, then letters, digits "
                            "and . + _ : = < > ~ ! , [ ] -");
    }
  }
  return names;
}

std::string QuotedList(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += " '" + n + "'";
  return out;
}

Result<uint32_t> Mode(const json& mode, const std::string& field) {
  if (mode.is_number_integer()) {
    int64_t v = mode.get<int64_t>();
    if (v < 0 || v > 07777) return FieldError(field, "must be a mode between 0 and 07777");
    return static_cast<uint32_t>(v);
  }
  if (mode.is_string()) {
    std::string s = mode.get<std::string>();
    bool octal = !s.empty() && s.size() <= 5 &&
                 std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '7'; });
    if (octal) {
      uint32_t v = static_cast<uint32_t>(std::stoul(s, nullptr, 8));
      if (v <= 07777) return v;
    }
    return FieldError(field, "'" + s + "' is not an octal mode like \"0755\"");
  }
  return FieldError(field, "must be an integer or an octal string like \"0755\"");
}

Status CheckPath(const std::string& path, const std::string& field) {
  if (path.empty() || path[0] != '/') return FieldError(field, "must be an absolute path");
  if (HasControl(path)) return FieldError(field, "must not contain control characters");
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (path.substr(start, slash == std::string::npos ? std::string::npos : slash - start) ==
        "..") {
      return FieldError(field, "must not contain '..'");
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return Status::Ok();
}

Result<RecipeFile> File(const json& entry, size_t i, size_t* total_bytes,
                        const std::string& list = "recipe.files") {
  const std::string field = Index(list, i);
  if (!entry.is_object()) return FieldError(field, "must be an object {path, content}");
  for (const auto& [key, value] : entry.items()) {
    if (key != "path" && key != "content" && key != "encoding" && key != "mode") {
      return FieldError(field + "." + key, "unknown field");
    }
  }
  if (!entry.contains("path") || !entry["path"].is_string()) {
    return FieldError(field + ".path", "is required and must be a string");
  }
  if (!entry.contains("content") || !entry["content"].is_string()) {
    return FieldError(field + ".content", "is required and must be a string");
  }
  RecipeFile file;
  file.context_path = "recipe-files/" + std::to_string(i);
  std::string encoding = "utf8";
  if (entry.contains("encoding")) {
    if (!entry["encoding"].is_string() ||
        (entry["encoding"] != "utf8" && entry["encoding"] != "base64")) {
      return FieldError(field + ".encoding", "must be \"utf8\" or \"base64\"");
    }
    encoding = entry["encoding"].get<std::string>();
  }
  const std::string& content = entry["content"].get_ref<const std::string&>();
  if (encoding == "base64") {
    std::optional<std::string> bytes = Base64Decode(content);
    if (!bytes) return FieldError(field + ".content", "is not valid base64");
    file.bytes = std::move(*bytes);
  } else {
    file.bytes = content;
  }
  *total_bytes += file.bytes.size();
  if (*total_bytes > kMaxRecipeFileBytes) {
    return FieldError(list, "more than 1 MiB of file content in all", Code::kPayloadTooLarge);
  }
  if (entry.contains("mode")) {
    auto mode = Mode(entry["mode"], field + ".mode");
    if (!mode.ok()) return mode.status();
    file.mode = *mode;
  }
  return file;
}

// JSON text of `array`, or nullopt when a string in it is not valid UTF-8
// (possible only for a json built in-process, not one parsed from a request).
std::optional<std::string> Dump(const json& array) {
  try {
    return array.dump();
  } catch (const json::type_error&) {
    return std::nullopt;
  }
}

std::string ChmodFlag(uint32_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode);
  return buf;
}

}  // namespace

Result<RecipeBuild> RecipeToBuild(const json& recipe) {
  if (!recipe.is_object()) return FieldError("recipe", "must be an object");
  static const char* kFields[] = {"base",     "apt",   "pip", "npm",
                                  "commands", "files", "env", "workdir"};
  for (const auto& item : recipe.items()) {
    const std::string& key = item.key();
    if (std::none_of(std::begin(kFields), std::end(kFields),
                     [&](const char* f) { return key == f; })) {
      return FieldError("recipe." + key, "unknown field");
    }
  }

  std::string base = "base";
  if (recipe.contains("base")) {
    if (!recipe["base"].is_string()) return FieldError("recipe.base", "must be a string");
    base = recipe["base"].get<std::string>();
    if (!ParseKilnImageRef(base).ok()) {
      if (auto ref = ParseImageRef(base); !ref.ok()) {
        return FieldError("recipe.base", "is neither a kiln image nor an image reference: " +
                                             ref.status().message());
      }
    }
  }
  auto apt = Packages(recipe, "apt");
  if (!apt.ok()) return apt.status();
  auto pip = Packages(recipe, "pip");
  if (!pip.ok()) return pip.status();
  auto npm = Packages(recipe, "npm");
  if (!npm.ok()) return npm.status();
  auto commands = Strings(recipe, "commands");
  if (!commands.ok()) return commands.status();
  for (size_t i = 0; i < commands->size(); ++i) {
    const std::string& c = (*commands)[i];
    if (c.find_first_not_of(" \t\r\n") == std::string::npos) {
      return FieldError(Index("recipe.commands", i), "is empty");
    }
    if (c.find('\0') != std::string::npos) {
      return FieldError(Index("recipe.commands", i), "must not contain NUL");
    }
  }

  RecipeBuild build;
  if (recipe.contains("files")) {
    const json& files = recipe["files"];
    if (!files.is_array()) return FieldError("recipe.files", "must be an array");
    if (files.size() > kMaxRecipeFiles) {
      return FieldError("recipe.files", "more than 256 files", Code::kPayloadTooLarge);
    }
    size_t total = 0;
    for (size_t i = 0; i < files.size(); ++i) {
      auto file = File(files[i], i, &total);
      if (!file.ok()) return file.status();
      if (Status s =
              CheckPath(files[i]["path"].get<std::string>(), Index("recipe.files", i) + ".path");
          !s.ok()) {
        return s;
      }
      build.context.push_back(std::move(*file));
    }
  }

  std::vector<std::pair<std::string, std::string>> env;
  if (recipe.contains("env")) {
    const json& object = recipe["env"];
    if (!object.is_object()) return FieldError("recipe.env", "must be an object of strings");
    for (const auto& [key, value] : object.items()) {
      const std::string field = "recipe.env." + key;
      bool name_ok = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0])) &&
                     std::all_of(key.begin(), key.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                     });
      if (!name_ok) {
        return FieldError(field,
                          "is not a variable name: letters, digits and '_', not "
                          "starting with a digit");
      }
      if (!value.is_string()) return FieldError(field, "must be a string");
      std::string v = value.get<std::string>();
      if (HasControl(v)) return FieldError(field, "must not contain control characters");
      env.emplace_back(key, std::move(v));
    }
  }
  std::optional<std::string> workdir;
  if (recipe.contains("workdir")) {
    if (!recipe["workdir"].is_string()) return FieldError("recipe.workdir", "must be a string");
    workdir = recipe["workdir"].get<std::string>();
    if (Status s = CheckPath(*workdir, "recipe.workdir"); !s.ok()) return s;
  }

  std::string& out = build.dockerfile;
  out = "FROM " + base + "\nUSER root\n";
  if (!apt->empty()) {
    out +=
        "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
        "--no-install-recommends" +
        QuotedList(*apt) + " && rm -rf /var/lib/apt/lists/*\n";
  }
  if (!pip->empty()) {
    out += "RUN python3 -m pip install --no-cache-dir --break-system-packages" + QuotedList(*pip) +
           "\n";
  }
  if (!npm->empty()) out += "RUN npm install -g" + QuotedList(*npm) + "\n";
  for (size_t i = 0; i < build.context.size(); ++i) {
    const std::string path = recipe["files"][i]["path"].get<std::string>();
    auto args = Dump(json::array({build.context[i].context_path, EscapeWord(path)}));
    if (!args) return FieldError(Index("recipe.files", i) + ".path", "is not valid UTF-8");
    out += "COPY --chmod=" + ChmodFlag(build.context[i].mode) + " " + *args + "\n";
  }
  for (size_t i = 0; i < commands->size(); ++i) {
    auto argv = Dump(json::array({"/bin/sh", "-c", (*commands)[i]}));
    if (!argv) return FieldError(Index("recipe.commands", i), "is not valid UTF-8");
    out += "RUN " + *argv + "\n";
  }
  if (!env.empty()) {
    out += "ENV";
    for (const auto& [key, value] : env) out += " " + key + "=" + EscapeWord(value);
    out += "\n";
  }
  if (workdir) out += "WORKDIR " + EscapeWord(*workdir) + "\n";
  return build;
}

Result<std::vector<RecipeFile>> InlineContextFiles(const json& files) {
  const std::string list = "files";
  if (!files.is_array()) return FieldError(list, "must be an array of {path, content}");
  if (files.size() > kMaxRecipeFiles)
    return FieldError(list, "more than 256 files", Code::kPayloadTooLarge);
  std::vector<RecipeFile> out;
  std::set<std::string> seen;
  size_t total = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    Result<RecipeFile> file = File(files[i], i, &total, list);
    if (!file.ok()) return file.status();
    // A path in the context: relative, each segment a name (no "", ".", ".."),
    // so a file lands in the fresh context folder and nowhere else.
    const std::string field = Index(list, i) + ".path";
    const std::string path = files[i]["path"].get<std::string>();
    if (path.empty() || path.size() > 4096 || path[0] == '/')
      return FieldError(field, "must be a relative path in the build context");
    if (HasControl(path)) return FieldError(field, "must not contain control characters");
    for (size_t at = 0; at <= path.size();) {
      size_t slash = path.find('/', at);
      std::string seg =
          path.substr(at, slash == std::string::npos ? std::string::npos : slash - at);
      if (seg.empty() || seg == "." || seg == "..")
        return FieldError(field, "must be a relative path of names (no empty, '.' or '..' parts)");
      if (slash == std::string::npos) break;
      at = slash + 1;
    }
    if (!seen.insert(path).second) return FieldError(field, "names a file given before");
    file->context_path = path;
    out.push_back(std::move(*file));
  }
  return out;
}

}  // namespace kiln::images
