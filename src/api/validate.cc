#include "api/validate.h"

namespace kiln::api {

using nlohmann::json;

FieldReader::FieldReader(const json& body, std::string prefix)
    : body_(body), prefix_(std::move(prefix)) {
  if (!body_.is_object())
    issues_.push_back(json{{"path", prefix_}, {"message", "must be a JSON object"}});
}

const json* FieldReader::Take(const std::string& name) {
  seen_.insert(name);
  if (!body_.is_object()) return nullptr;
  auto it = body_.find(name);
  if (it == body_.end() || it->is_null()) return nullptr;
  return &*it;
}

const json* FieldReader::Raw(const std::string& name) { return Take(name); }

void FieldReader::Issue(const std::string& field, const std::string& message) {
  issues_.push_back(json{{"path", prefix_ + "." + field}, {"message", message}});
}

std::optional<int64_t> FieldReader::Int(const std::string& name, int64_t min, int64_t max) {
  const json* v = Take(name);
  if (!v) return std::nullopt;
  std::string range =
      "must be an integer from " + std::to_string(min) + " to " + std::to_string(max);
  if (!v->is_number_integer()) {
    Issue(name, range);
    return std::nullopt;
  }
  int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                  ? INT64_MAX
                  : v->get<int64_t>();
  if (x < min || x > max) {
    Issue(name, range);
    return std::nullopt;
  }
  return x;
}

std::optional<std::string> FieldReader::String(const std::string& name, size_t max_len) {
  const json* v = Take(name);
  if (!v) return std::nullopt;
  if (!v->is_string()) {
    Issue(name, "must be a string");
    return std::nullopt;
  }
  auto s = v->get<std::string>();
  if (s.size() > max_len) {
    Issue(name, "must be at most " + std::to_string(max_len) + " bytes");
    return std::nullopt;
  }
  return s;
}

std::optional<bool> FieldReader::Bool(const std::string& name) {
  const json* v = Take(name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    Issue(name, "must be true or false");
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::vector<std::string>> FieldReader::StringList(const std::string& name,
                                                                size_t max_items) {
  const json* v = Take(name);
  if (!v) return std::nullopt;
  if (!v->is_array()) {
    Issue(name, "must be a list of strings");
    return std::nullopt;
  }
  if (v->size() > max_items) {
    Issue(name, "must have at most " + std::to_string(max_items) + " items");
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      Issue(name + "[" + std::to_string(i) + "]", "must be a string");
      return std::nullopt;
    }
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

std::optional<std::map<std::string, std::string>> FieldReader::StringMap(const std::string& name,
                                                                         size_t max_entries,
                                                                         size_t max_key,
                                                                         size_t max_value) {
  const json* v = Take(name);
  if (!v) return std::nullopt;
  if (!v->is_object()) {
    Issue(name, "must be an object of strings");
    return std::nullopt;
  }
  if (v->size() > max_entries) {
    Issue(name, "must have at most " + std::to_string(max_entries) + " entries");
    return std::nullopt;
  }
  std::map<std::string, std::string> out;
  for (const auto& [k, val] : v->items()) {
    if (!val.is_string()) {
      Issue(name + "." + k, "must be a string");
      return std::nullopt;
    }
    if (k.empty() || k.size() > max_key) {
      Issue(name + "." + k, "key must be 1 to " + std::to_string(max_key) + " bytes");
      return std::nullopt;
    }
    if (val.get<std::string>().size() > max_value) {
      Issue(name + "." + k, "value must be at most " + std::to_string(max_value) + " bytes");
      return std::nullopt;
    }
    out[k] = val.get<std::string>();
  }
  return out;
}

void FieldReader::Finish() {
  if (body_.is_object()) {
    for (const auto& [k, v] : body_.items()) {
      if (!seen_.count(k)) Issue(k, "unknown field");
    }
  }
  if (issues_.empty()) return;
  std::string message;
  for (const auto& i : issues_) {
    if (!message.empty()) message += "; ";
    message += i["path"].get<std::string>() + ": " + i["message"].get<std::string>();
  }
  throw ApiError(Code::kInvalidRequest, message, json{{"issues", issues_}});
}

bool ValidEnvName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

}  // namespace kiln::api
