#include "api/errors.h"
#include "api/kiln/routes.h"
#include "api/validate.h"
#include "common/contract.h"

namespace kiln::api {
void ReadCommandFields(FieldReader& f, const control::Sandbox& s, io::Command* command) {
  auto argv = f.StringList("argv", contract::kArgvMax);
  auto line = f.String("command", contract::kCommandMax);
  if (argv && line) f.Issue("argv", "give either argv or command, not both");
  if (!argv && !line && !f.has("argv") && !f.has("command"))
    f.Issue("command", "argv or command is required");
  if (argv && argv->empty()) f.Issue("argv", "must not be empty");
  if (argv && !argv->empty() && (*argv)[0].empty()) f.Issue("argv[0]", "must not be empty");
  command->argv = std::move(argv);
  command->command = std::move(line);
  auto env = f.StringMap("env", 256, 256, contract::kCommandEnvValueMax);
  if (env) {
    for (auto& [k, v] : *env) {
      if (!ValidEnvName(k)) f.Issue("env." + k, "is not a valid variable name");
      if (v.find('\0') != std::string::npos) f.Issue("env." + k, "must not contain a NUL byte");
      command->env[k] = std::move(v);
    }
  }
  if (auto user = f.String("user", 32)) {
    // The API's caller holds the key; the policy inside never reaches this.
    if (*user != "root" && *user != s.spec().run_as.user && *user != "user")
      f.Issue("user", "must be \"root\" or the sandbox's user");
    command->as_root = *user == "root";
  }
  if (auto cwd = f.String("cwd", contract::kPathMax)) {
    if (cwd->empty() || (*cwd)[0] != '/') f.Issue("cwd", "must be an absolute path");
    command->cwd = std::move(cwd);
  }
}

std::optional<int> ReadPoolSize(FieldReader& f) {
  auto size = f.Int("size", contract::kPoolSize.min, contract::kPoolSize.max);
  auto automatic = f.Bool("auto");
  if (f.has("size") && f.has("auto"))
    f.Issue("auto", "give either size (a pinned pool) or auto, not both");
  else if (!f.has("size") && !f.has("auto"))
    f.Issue("size", "is required (or auto: true, for a pool sized by demand)");
  else if (f.has("auto") && automatic && !*automatic)
    f.Issue("auto", "must be true (to pin a size, give size)");
  if (size) return static_cast<int>(*size);
  return std::nullopt;
}

std::optional<std::map<std::string, std::string>> ReadLabels(FieldReader& f) {
  return f.StringMap("labels", contract::kLabelsMax, contract::kLabelKeyMax,
                     contract::kLabelValueMax);
}

}  // namespace kiln::api
