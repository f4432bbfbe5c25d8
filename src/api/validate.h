// Reading a JSON request body field by field. Every problem is collected
// with the field's path ("body.memoryMiB"), then all are reported at once as
// one 400 invalid_request; unknown fields are problems too.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/errors.h"
#include "common/contract.h"

namespace kiln::api {

class FieldReader {
 public:
  explicit FieldReader(const nlohmann::json& body, std::string prefix = "body");

  std::optional<int64_t> Int(const std::string& name, int64_t min, int64_t max);
  // A field of the contract: its bounds, and its default when absent.
  int64_t Int(const std::string& name, const contract::IntField& field) {
    return Int(name, field.min, field.max).value_or(field.def);
  }
  std::optional<std::string> String(const std::string& name, size_t max_len);
  std::optional<bool> Bool(const std::string& name);
  std::optional<std::vector<std::string>> StringList(const std::string& name, size_t max_items);
  std::optional<std::map<std::string, std::string>> StringMap(const std::string& name,
                                                              size_t max_entries, size_t max_key,
                                                              size_t max_value);
  // Accepts the field without reading it (it is read elsewhere).
  const nlohmann::json* Raw(const std::string& name);

  void Issue(const std::string& field, const std::string& message);
  bool has(const std::string& name) const { return body_.is_object() && body_.contains(name); }
  // Throws the collected issues (and unknown fields) as one ApiError.
  void Finish();

 private:
  const nlohmann::json* Take(const std::string& name);

  const nlohmann::json& body_;
  std::string prefix_;
  std::set<std::string> seen_;
  nlohmann::json issues_ = nlohmann::json::array();
};

// An environment variable name: [A-Za-z_][A-Za-z0-9_]*.
bool ValidEnvName(const std::string& name);

}  // namespace kiln::api
