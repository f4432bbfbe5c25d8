// Who a sandbox's commands run as and with what environment: its image's
// USER, WORKDIR and ENV. kilnd hands it to the agent at start (the engine
// puts it in PID 1's environment), so an image built by anyone works with
// nothing of kiln baked in. The defaults are kiln's base image.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln {

struct RunAs {
  uint32_t uid = 1000, gid = 1000;
  std::string user = "user";
  std::string home = "/workspace";
  std::string workdir = "/workspace";
  std::vector<std::string> env = {
      "PATH=/workspace/.local/bin:/workspace/.npm-global/bin:/usr/local/bin:/usr/bin:/bin"};
  bool operator==(const RunAs&) const = default;
};

inline void to_json(nlohmann::json& j, const RunAs& r) {
  j = {{"uid", r.uid},   {"gid", r.gid},         {"user", r.user},
       {"home", r.home}, {"workdir", r.workdir}, {"env", r.env}};
}

// Missing keys keep the defaults.
inline void from_json(const nlohmann::json& j, RunAs& r) {
  RunAs d;
  r.uid = j.value("uid", d.uid);
  r.gid = j.value("gid", d.gid);
  r.user = j.value("user", d.user);
  r.home = j.value("home", d.home);
  r.workdir = j.value("workdir", d.workdir);
  r.env = j.value("env", d.env);
}

}  // namespace kiln
