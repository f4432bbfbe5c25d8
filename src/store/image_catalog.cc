#include "store/image_catalog.h"

#include <algorithm>

#include "common/time.h"

namespace kiln::store {

using nlohmann::json;

ImageCatalog::ImageCatalog(Db& db, const SecretBox* secrets) : db_(db), secrets_(secrets) {}

RegistryCredential ImageCatalog::Credential(const DbRow& r) const {
  std::string password = r.Text(2);
  if (secrets_) password = secrets_->Unseal(password).value_or("");
  return RegistryCredential{r.Text(0), r.Text(1), password, r.Int(3)};
}

json ImageCatalog::Insert(json record, const std::vector<std::string>& tags) {
  Db::Transaction tx(db_);
  std::string owner = record.at("owner"), name = record.at("name");
  auto row = db_.QueryOne(
      "SELECT COALESCE(MAX(version), 0) FROM images WHERE owner = ? AND name = ?", {owner, name});
  int64_t version = row->Int(0) + 1;
  record["version"] = version;
  record.erase("tags");
  db_.Exec(
      "INSERT INTO images (id, owner, name, version, state, created_ms, record) "
      "VALUES (?, ?, ?, ?, ?, ?, ?)",
      {record.at("id").get<std::string>(), owner, name, version,
       record.at("state").get<std::string>(), record.value("createdMs", int64_t{0}),
       record.dump()});
  for (const auto& tag : tags) Tag(owner, name, tag, record["id"]);
  tx.Commit();
  return WithTags(record);
}

void ImageCatalog::Update(const json& record) {
  json stored = record;
  stored.erase("tags");
  db_.Exec(
      "UPDATE images SET state = ?, record = ? WHERE id = ?",
      {stored.at("state").get<std::string>(), stored.dump(), stored.at("id").get<std::string>()});
}

void ImageCatalog::Remove(const std::string& id) {
  Db::Transaction tx(db_);
  db_.Exec("DELETE FROM image_tags WHERE image_id = ?", {id});
  db_.Exec("DELETE FROM images WHERE id = ?", {id});
  tx.Commit();
}

json ImageCatalog::WithTags(json record) const {
  json tags = json::array();
  for (const auto& r : db_.Query("SELECT tag FROM image_tags WHERE image_id = ? ORDER BY tag",
                                 {record.at("id").get<std::string>()}))
    tags.push_back(r.Text(0));
  record["tags"] = tags;
  return record;
}

std::optional<json> ImageCatalog::Get(const std::string& id) const {
  auto row = db_.QueryOne("SELECT record FROM images WHERE id = ?", {id});
  if (!row) return std::nullopt;
  return WithTags(json::parse(row->Text(0)));
}

std::vector<json> ImageCatalog::List(const std::optional<std::string>& owner,
                                     const std::optional<std::string>& name,
                                     const std::optional<std::string>& state) const {
  std::string sql = "SELECT record FROM images WHERE 1 = 1";
  std::vector<DbValue> args;
  if (owner) sql += " AND owner = ?", args.emplace_back(*owner);
  if (name) sql += " AND name = ?", args.emplace_back(*name);
  if (state) sql += " AND state = ?", args.emplace_back(*state);
  sql += " ORDER BY created_ms DESC, version DESC";
  std::vector<json> out;
  for (const auto& r : db_.Query(sql, args)) out.push_back(WithTags(json::parse(r.Text(0))));
  return out;
}

std::optional<json> ImageCatalog::ByTag(const std::string& owner, const std::string& name,
                                        const std::string& tag) const {
  auto row =
      db_.QueryOne("SELECT image_id FROM image_tags WHERE owner = ? AND name = ? AND tag = ?",
                   {owner, name, tag});
  if (!row) return std::nullopt;
  return Get(row->Text(0));
}

std::optional<json> ImageCatalog::ByVersion(const std::string& owner, const std::string& name,
                                            int64_t version) const {
  auto row = db_.QueryOne("SELECT record FROM images WHERE owner = ? AND name = ? AND version = ?",
                          {owner, name, version});
  if (!row) return std::nullopt;
  return WithTags(json::parse(row->Text(0)));
}

void ImageCatalog::Tag(const std::string& owner, const std::string& name, const std::string& tag,
                       const std::string& image_id) {
  db_.Exec("INSERT OR REPLACE INTO image_tags (owner, name, tag, image_id) VALUES (?, ?, ?, ?)",
           {owner, name, tag, image_id});
}

bool ImageCatalog::Untag(const std::string& owner, const std::string& name,
                         const std::string& tag) {
  return db_.Exec("DELETE FROM image_tags WHERE owner = ? AND name = ? AND tag = ?",
                  {owner, name, tag}) > 0;
}

std::optional<std::string> ImageCatalog::CachedLayer(const std::string& owner,
                                                     const std::string& step_key) {
  auto row = db_.QueryOne("SELECT layer FROM build_cache WHERE owner = ? AND step_key = ?",
                          {owner, step_key});
  if (!row) return std::nullopt;
  db_.Exec("UPDATE build_cache SET used_ms = ? WHERE owner = ? AND step_key = ?",
           {NowMs(), owner, step_key});
  return row->Text(0);
}

void ImageCatalog::PutCachedLayer(const std::string& owner, const std::string& step_key,
                                  const std::string& layer) {
  int64_t now = NowMs();
  // The first layer cached for a step stays: a later build of the same
  // step by the same key only touches it.
  db_.Exec(
      "INSERT INTO build_cache (owner, step_key, layer, created_ms, used_ms) "
      "VALUES (?, ?, ?, ?, ?) ON CONFLICT (owner, step_key) DO UPDATE SET used_ms = "
      "excluded.used_ms",
      {owner, step_key, layer, now, now});
}

std::vector<std::string> ImageCatalog::CachedLayers() const {
  std::vector<std::string> out;
  for (const auto& r : db_.Query("SELECT DISTINCT layer FROM build_cache"))
    out.push_back(r.Text(0));
  return out;
}

int ImageCatalog::ClearCache() { return db_.Exec("DELETE FROM build_cache"); }

std::vector<RegistryCredential> ImageCatalog::Registries(const std::string& owner) const {
  std::vector<RegistryCredential> out;
  for (const auto& r : db_.Query("SELECT registry, username, password, created_ms FROM "
                                 "registry_credentials WHERE owner = ? ORDER BY registry",
                                 {owner}))
    out.push_back(Credential(r));
  return out;
}

std::optional<RegistryCredential> ImageCatalog::Registry(const std::string& owner,
                                                         const std::string& registry) const {
  auto r = db_.QueryOne(
      "SELECT registry, username, password, created_ms FROM "
      "registry_credentials WHERE owner = ? AND registry = ?",
      {owner, registry});
  if (!r) return std::nullopt;
  return Credential(*r);
}

void ImageCatalog::PutRegistry(const std::string& owner, const RegistryCredential& cred) {
  db_.Exec(
      "INSERT OR REPLACE INTO registry_credentials "
      "(owner, registry, username, password, created_ms) VALUES (?, ?, ?, ?, ?)",
      {owner, cred.registry, cred.username,
       secrets_ ? secrets_->Seal(cred.password) : cred.password, cred.created_ms});
}

bool ImageCatalog::DeleteRegistry(const std::string& owner, const std::string& registry) {
  return db_.Exec("DELETE FROM registry_credentials WHERE owner = ? AND registry = ?",
                  {owner, registry}) > 0;
}

}  // namespace kiln::store
