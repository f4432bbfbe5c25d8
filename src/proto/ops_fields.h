// How ops*.cc encode and decode members: for them only.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "proto/ops.h"

namespace kiln::proto {

// Every struct decodes from an object only (type_error otherwise).
inline void Object(const nlohmann::json& j) { (void)j.get_ref<const nlohmann::json::object_t&>(); }

// An integer member must be a JSON integer: nlohmann converts a float with
// a cast, which is undefined past the integer's range (1e30 as an exit
// code), and the other end of the channel is not trusted.
template <typename T>
void CheckInteger(const nlohmann::json& v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (v.is_number_float())
      throw nlohmann::json::type_error::create(302, "type must be an integer, but is a float", &v);
  }
}

// A required member: missing or of another type throws.
template <typename T>
void Need(const nlohmann::json& j, const char* key, T& out) {
  const nlohmann::json& v = j.at(key);
  CheckInteger<T>(v);
  v.get_to(out);
}

// An optional member: absent or null keeps the default.
template <typename T>
void Take(const nlohmann::json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  CheckInteger<T>(*it);
  it->get_to(out);
}
template <typename T>
void Take(const nlohmann::json& j, const char* key, std::optional<T>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  CheckInteger<T>(*it);
  out = it->template get<T>();
}

// A nullable member: null when absent.
template <typename T>
nlohmann::json OrNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
// A member left out when absent.
template <typename T>
void PutIf(nlohmann::json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

// A request object: the op's name first, its members then.
inline nlohmann::json RequestObject(std::string_view op) {
  return nlohmann::json{{std::string(kOpKey), std::string(op)}};
}

inline void PutCommand(nlohmann::json& j, const CommandSpec& v) {
  PutIf(j, "argv", v.argv);
  PutIf(j, "command", v.command);
  j["env"] = v.env;
  PutIf(j, "cwd", v.cwd);
  if (v.as_root) j["asRoot"] = true;
}
inline void TakeCommand(const nlohmann::json& j, CommandSpec& v) {
  Object(j);
  Take(j, "argv", v.argv);
  Take(j, "command", v.command);
  Take(j, "env", v.env);
  Take(j, "cwd", v.cwd);
  Take(j, "asRoot", v.as_root);
}

// Requests of ops without members.
template <typename R>
void EmptyRequestFromJson(const nlohmann::json& j, R&) {
  Object(j);
}

}  // namespace kiln::proto
