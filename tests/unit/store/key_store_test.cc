#include "store/key_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "common/digest.h"
#include "unit/support/temp_dir.h"

namespace kiln::store {
namespace key_store_test {
namespace {

namespace fs = std::filesystem;

using testutil::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

void WriteFile(const std::string& path, const std::string& data) { std::ofstream(path) << data; }

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

bool IsLowerHex(const std::string& s) {
  return s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

TEST(KeyStoreTest, CreateAuthenticateGetList) {
  Db db(":memory:");
  KeyStore keys(db);
  auto [key, secret] = keys.Create("ci", false, 5000000);
  EXPECT_EQ(key.id.size(), 4u + 16u);
  EXPECT_TRUE(key.id.starts_with("key_"));
  EXPECT_TRUE(IsLowerHex(key.id.substr(4)));
  EXPECT_EQ(secret.size(), 5u + 40u);
  EXPECT_TRUE(secret.starts_with("kiln_"));
  EXPECT_TRUE(IsLowerHex(secret.substr(5)));

  auto found = keys.Authenticate(secret);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, key.id);
  EXPECT_EQ(found->name, "ci");
  EXPECT_FALSE(found->admin);
  EXPECT_EQ(found->daily_limit_micros, 5000000);
  EXPECT_FALSE(found->revoked_ms);

  EXPECT_FALSE(keys.Authenticate(""));
  EXPECT_FALSE(keys.Authenticate(secret + "x"));
  EXPECT_FALSE(keys.Authenticate("kiln_" + std::string(40, '0')));

  auto [admin, admin_secret] = keys.Create("", true, std::nullopt);
  EXPECT_NE(admin_secret, secret);
  EXPECT_NE(admin.id, key.id);
  EXPECT_TRUE(keys.Authenticate(admin_secret)->admin);

  auto list = keys.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, key.id);  // oldest first
  EXPECT_EQ(list[1].id, admin.id);
  EXPECT_EQ(keys.Get(admin.id)->name, "");
  EXPECT_FALSE(keys.Get("key_0000000000000000"));
}

TEST(KeyStoreTest, RevokedKeyIsRefused) {
  Db db(":memory:");
  KeyStore keys(db);
  auto [key, secret] = keys.Create("a", true, std::nullopt);
  auto [other, other_secret] = keys.Create("b", false, std::nullopt);
  ASSERT_TRUE(keys.Authenticate(secret));
  EXPECT_TRUE(keys.Revoke(key.id));
  EXPECT_FALSE(keys.Authenticate(secret));
  EXPECT_TRUE(keys.Authenticate(other_secret));  // only that key

  auto revoked = keys.Get(key.id);
  ASSERT_TRUE(revoked && revoked->revoked_ms);
  int64_t first = *revoked->revoked_ms;
  EXPECT_TRUE(keys.Revoke(key.id));  // idempotent, keeps the first time
  EXPECT_EQ(keys.Get(key.id)->revoked_ms, first);
  EXPECT_FALSE(keys.Authenticate(secret));
  EXPECT_FALSE(keys.Revoke("key_unknown"));
  EXPECT_EQ(keys.List().size(), 2u);  // revoked keys stay listed
}

TEST(KeyStoreTest, StoresOnlyTheHash) {
  Db db(":memory:");
  KeyStore keys(db);
  auto [key, secret] = keys.Create("a", false, std::nullopt);
  auto rows = db.Query("SELECT * FROM api_keys");
  ASSERT_EQ(rows.size(), 1u);
  bool saw_hash = false;
  for (size_t i = 0; i < rows[0].size(); ++i) {
    std::string v = rows[0].Text(i);
    EXPECT_EQ(v.find(secret.substr(5)), std::string::npos) << "column " << i;
    saw_hash |= v == Sha256Hex(secret);
  }
  EXPECT_TRUE(saw_hash);
}

TEST(KeyStoreTest, SurvivesReopen) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::string db_path = dir.path() + "/kiln.db";
  std::string secret, id;
  {
    Db db(db_path);
    KeyStore keys(db);
    auto created = keys.Create("a", false, 7);
    id = created.first.id;
    secret = created.second;
  }
  Db db(db_path);
  KeyStore keys(db);  // the table exists already
  auto k = keys.Authenticate(secret);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->id, id);
  EXPECT_EQ(k->daily_limit_micros, 7);
}

TEST(KeyStoreTest, EnsureLocalAdminKeyCreatesAStable0600File) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  Db db(dir.path() + "/kiln.db");
  KeyStore keys(db);
  std::string path = dir.path() + "/state/admin.key";  // parent created too

  std::string id = keys.EnsureLocalAdminKey(path);
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  std::string secret = ReadFile(path);
  auto k = keys.Authenticate(secret);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->id, id);
  EXPECT_TRUE(k->admin);

  EXPECT_EQ(keys.EnsureLocalAdminKey(path), id);
  EXPECT_EQ(ReadFile(path), secret);
  EXPECT_EQ(keys.List().size(), 1u);

  // A file someone widened is theirs to keep that way (e.g. group access).
  ASSERT_EQ(chmod(path.c_str(), 0640), 0);
  EXPECT_EQ(keys.EnsureLocalAdminKey(path), id);
  EXPECT_EQ(ModeOf(path), 0640u);
}

TEST(KeyStoreTest, EnsureLocalAdminKeyRecreatesWhenRevokedOrBad) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  Db db(":memory:");
  KeyStore keys(db);
  std::string path = dir.path() + "/admin.key";

  std::string id = keys.EnsureLocalAdminKey(path);
  std::string secret = ReadFile(path);
  ASSERT_TRUE(keys.Revoke(id));
  std::string id2 = keys.EnsureLocalAdminKey(path);
  EXPECT_NE(id2, id);
  std::string secret2 = ReadFile(path);
  EXPECT_NE(secret2, secret);
  EXPECT_EQ(keys.Authenticate(secret2)->id, id2);
  EXPECT_EQ(ModeOf(path), 0600u);

  // Garbage, a non-admin key, an empty file: each replaced by a fresh admin key.
  std::set<std::string> ids = {id, id2};
  auto [plain, plain_secret] = keys.Create("plain", false, std::nullopt);
  ids.insert(plain.id);
  for (const std::string& content :
       {std::string("garbage\n"), plain_secret + "\n", std::string()}) {
    WriteFile(path, content);
    std::string next = keys.EnsureLocalAdminKey(path);
    EXPECT_TRUE(ids.insert(next).second) << "reused " << next;
    EXPECT_TRUE(keys.Authenticate(ReadFile(path))->admin);
  }

  // Surrounding white space (an editor's newline) is fine.
  std::string current = ReadFile(path);
  WriteFile(path, "  " + current + " \r\n");
  EXPECT_EQ(keys.EnsureLocalAdminKey(path), keys.Authenticate(current)->id);
}

TEST(KeyStoreTest, EnsureLocalAdminKeyFailureLeavesNoLiveKey) {
  Db db(":memory:");
  KeyStore keys(db);
  // A regular file where the directory should be: the key file cannot be written.
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  WriteFile(dir.path() + "/file", "x");
  EXPECT_THROW(keys.EnsureLocalAdminKey(dir.path() + "/file/admin.key"), std::runtime_error);
  auto list = keys.List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_TRUE(list[0].revoked_ms);
}

}  // namespace
}  // namespace key_store_test
}  // namespace kiln::store
