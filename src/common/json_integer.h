// Integer members of JSON that kiln reads back from disk (its records), where
// a damaged or edited file may hold anything. nlohmann converts a float to an
// integer with a cast, which is undefined past the type's range (1e30 as a
// timestamp); these refuse a float instead, with the type_error every other
// wrong type gets, so callers handle all damage one way.
#pragma once

#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace kiln {

template <typename T>
T JsonInteger(const nlohmann::json& v, const char* key) {
  static_assert(std::is_integral_v<T>);
  if (!v.is_number_integer())
    throw nlohmann::json::type_error::create(302, std::string(key) + " must be an integer", &v);
  return v.get<T>();
}

// The member `key` as a T; missing -> type_error too.
template <typename T>
T JsonIntegerAt(const nlohmann::json& j, const char* key) {
  return JsonInteger<T>(j.at(key), key);
}

// The member `key` as a T, or `fallback` when absent or null.
template <typename T>
T JsonIntegerOr(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return JsonInteger<T>(*it, key);
}

}  // namespace kiln
