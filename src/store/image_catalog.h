// The durable table of images: one JSON record per image build (its state,
// layers, config and error), the tags that point at them, the build step
// cache (step key -> layer) and the registry credentials of each key.
// Versions count per key and name: the n-th build of "web" is web@n.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/secret_box.h"
#include "common/status.h"
#include "store/db.h"

namespace kiln::store {

struct RegistryCredential {
  std::string registry, username, password;
  int64_t created_ms = 0;
};

class ImageCatalog {
 public:
  // `secrets` seals registry passwords in the database (null: stored as
  // given, in tests).
  explicit ImageCatalog(Db& db, const SecretBox* secrets = nullptr);

  // Inserts a new image record (record["id"], ["owner"], ["name"], ["state"],
  // ["createdMs"]) as the next version of its name; sets record["version"]
  // and points `tags` at it (moving them from older versions). Returns it.
  nlohmann::json Insert(nlohmann::json record, const std::vector<std::string>& tags);
  // Replaces the record (same id); its state column follows record["state"].
  void Update(const nlohmann::json& record);
  // Forgets an image and its tags.
  void Remove(const std::string& id);

  // Records carry "tags" (sorted) when read.
  std::optional<nlohmann::json> Get(const std::string& id) const;
  // Newest first; empty owner/name/state = any.
  std::vector<nlohmann::json> List(const std::optional<std::string>& owner,
                                   const std::optional<std::string>& name,
                                   const std::optional<std::string>& state) const;
  std::optional<nlohmann::json> ByTag(const std::string& owner, const std::string& name,
                                      const std::string& tag) const;
  std::optional<nlohmann::json> ByVersion(const std::string& owner, const std::string& name,
                                          int64_t version) const;

  // Points owner/name:tag at image_id (moving it if it pointed elsewhere).
  void Tag(const std::string& owner, const std::string& name, const std::string& tag,
           const std::string& image_id);
  bool Untag(const std::string& owner, const std::string& name, const std::string& tag);

  // The build step cache, per key: a key only ever reuses the layers its
  // own builds made.
  std::optional<std::string> CachedLayer(const std::string& owner, const std::string& step_key);
  void PutCachedLayer(const std::string& owner, const std::string& step_key,
                      const std::string& layer);
  std::vector<std::string> CachedLayers() const;
  // Drops every entry; returns how many there were.
  int ClearCache();

  std::vector<RegistryCredential> Registries(const std::string& owner) const;
  std::optional<RegistryCredential> Registry(const std::string& owner,
                                             const std::string& registry) const;
  void PutRegistry(const std::string& owner, const RegistryCredential& cred);
  bool DeleteRegistry(const std::string& owner, const std::string& registry);

 private:
  nlohmann::json WithTags(nlohmann::json record) const;
  RegistryCredential Credential(const DbRow& r) const;
  Db& db_;
  const SecretBox* secrets_;
};

}  // namespace kiln::store
