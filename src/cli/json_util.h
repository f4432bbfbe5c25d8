// Lenient field access for daemon answers: json::value() throws when a
// field is present but null or of another type, which answers may do.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln::cli {

inline std::string StringField(const nlohmann::json& j, std::string_view key,
                               std::string fallback = "") {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

inline bool BoolField(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

inline std::optional<long long> IntField(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<long long>();
}

}  // namespace kiln::cli
