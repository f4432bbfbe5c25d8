#include "images/layers/oci_layout.h"

#include <algorithm>

namespace kiln::images {
namespace {

using nlohmann::json;

Status InvalidConfig(const std::string& message, json details = nullptr) {
  return Status(Code::kInvalidImage, message, std::move(details));
}

Status GetStringList(const json& obj, const char* key, const std::string& prefix,
                     std::vector<std::string>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  std::string field = prefix + key;
  if (!it->is_array()) return InvalidConfig(field + " is not a list", {{"field", field}});
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    std::string at = field + "[" + std::to_string(i) + "]";
    if (!v.is_string()) return InvalidConfig(at + " is not a string", {{"field", at}});
    out->push_back(v.get<std::string>());
  }
  return Status::Ok();
}

Status GetString(const json& obj, const char* key, const std::string& prefix, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  std::string field = prefix + key;
  if (!it->is_string()) return InvalidConfig(field + " is not a string", {{"field", field}});
  *out = it->get<std::string>();
  return Status::Ok();
}

}  // namespace

Result<OciConfig> ParseOciConfig(const json& config) {
  if (!config.is_object()) return InvalidConfig("the image config is not a JSON object");
  bool whole = config.contains("config") || config.contains("rootfs") ||
               config.contains("architecture") || config.contains("os");
  const std::string prefix = "config.";
  json inner = whole ? config.value("config", json()) : config;
  OciConfig out;
  if (inner.is_null()) return out;
  if (!inner.is_object()) return InvalidConfig("config is not an object", {{"field", "config"}});
  if (Status s = GetStringList(inner, "Env", prefix, &out.env); !s.ok()) return s;
  if (Status s = GetString(inner, "User", prefix, &out.user); !s.ok()) return s;
  if (Status s = GetString(inner, "WorkingDir", prefix, &out.working_dir); !s.ok()) return s;
  if (Status s = GetStringList(inner, "Cmd", prefix, &out.cmd); !s.ok()) return s;
  if (Status s = GetStringList(inner, "Entrypoint", prefix, &out.entrypoint); !s.ok()) return s;
  for (size_t i = 0; i < out.env.size(); ++i) {
    if (out.env[i].find('=') == std::string::npos || out.env[i][0] == '=') {
      std::string at = prefix + "Env[" + std::to_string(i) + "]";
      return InvalidConfig(at + " is not K=V", {{"field", at}});
    }
  }
  if (auto it = inner.find("ExposedPorts"); it != inner.end() && !it->is_null()) {
    if (!it->is_object())
      return InvalidConfig("config.ExposedPorts is not an object",
                           {{"field", "config.ExposedPorts"}});
    for (const auto& [port, ignored] : it->items()) out.exposed_ports.push_back(port);
    std::sort(out.exposed_ports.begin(), out.exposed_ports.end());
  }
  if (auto it = inner.find("Labels"); it != inner.end() && !it->is_null()) {
    if (!it->is_object())
      return InvalidConfig("config.Labels is not an object", {{"field", "config.Labels"}});
    for (const auto& [key, value] : it->items()) {
      std::string at = "config.Labels." + key;
      if (!value.is_string()) return InvalidConfig(at + " is not a string", {{"field", at}});
      out.labels[key] = value.get<std::string>();
    }
  }
  std::string stop;
  if (Status s = GetString(inner, "StopSignal", prefix, &stop); !s.ok()) return s;
  if (!stop.empty()) out.stop_signal = stop;
  return out;
}

json OciConfigToJson(const OciConfig& config) {
  json out = json::object();
  if (!config.env.empty()) out["Env"] = config.env;
  if (!config.user.empty()) out["User"] = config.user;
  if (!config.working_dir.empty()) out["WorkingDir"] = config.working_dir;
  if (!config.cmd.empty()) out["Cmd"] = config.cmd;
  if (!config.entrypoint.empty()) out["Entrypoint"] = config.entrypoint;
  if (!config.exposed_ports.empty()) {
    json ports = json::object();
    for (const std::string& p : config.exposed_ports) ports[p] = json::object();
    out["ExposedPorts"] = ports;
  }
  if (!config.labels.empty()) out["Labels"] = config.labels;
  if (config.stop_signal) out["StopSignal"] = *config.stop_signal;
  return out;
}

}  // namespace kiln::images
