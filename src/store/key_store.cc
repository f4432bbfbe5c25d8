#include "store/key_store.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "common/digest.h"
#include "common/time.h"
#include "common/unique_fd.h"

namespace kiln::store {

using nlohmann::json;

namespace {

constexpr char kColumns[] = "id, name, admin, daily_limit_micros, created_ms, revoked_ms";
constexpr size_t kMaxSecretFileBytes = 4096;

// From the kernel's CSPRNG: a secret must not be guessable.
std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  return out;
}

ApiKey FromRow(const DbRow& r) {
  ApiKey k;
  k.id = r.Text(0);
  k.name = r.Text(1);
  k.admin = r.Int(2) != 0;
  if (!r.IsNull(3)) k.daily_limit_micros = r.Int(3);
  k.created_ms = r.Int(4);
  if (!r.IsNull(5)) k.revoked_ms = r.Int(5);
  return k;
}

// The file's first line without surrounding white space; "" if unreadable.
std::string ReadSecretFile(const std::string& path) {
  // O_NONBLOCK: a FIFO planted at `path` must not hang the daemon's start.
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return "";
  std::string data(kMaxSecretFileBytes, '\0');
  ssize_t n;
  do {
    n = read(fd.get(), data.data(), data.size());
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return "";
  data.resize(static_cast<size_t>(n));
  data = data.substr(0, data.find('\n'));
  const char* kSpace = " \t\r";
  size_t b = data.find_first_not_of(kSpace);
  if (b == std::string::npos) return "";
  return data.substr(b, data.find_last_not_of(kSpace) - b + 1);
}

[[noreturn]] void Fail(const std::string& what, const std::string& path, int err) {
  throw std::runtime_error(what + " " + path + ": " + std::strerror(err));
}

// Fails with errno after removing the half-written temporary file.
[[noreturn]] void FailAndRemove(const std::string& what, const std::string& tmp) {
  int err = errno;
  unlink(tmp.c_str());
  Fail(what, tmp, err);
}

// Replaces `path` atomically: readers see the old file or the whole new one.
void WriteSecretFile(const std::string& path, const std::string& secret) {
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);

  const std::string tmp = path + ".tmp";
  // O_EXCL on a fresh name: never write through a symlink or into a file
  // someone else already holds open with wider permissions.
  if (unlink(tmp.c_str()) != 0 && errno != ENOENT) Fail("cannot remove", tmp, errno);
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0) Fail("cannot create", tmp, errno);
  // Exactly 0600, whatever the umask.
  if (fchmod(fd.get(), 0600) != 0) FailAndRemove("cannot chmod", tmp);
  const std::string data = secret + "\n";
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;
    if (n <= 0) FailAndRemove("cannot write", tmp);
    done += static_cast<size_t>(n);
  }
  if (fsync(fd.get()) != 0) FailAndRemove("cannot sync", tmp);
  fd.reset();
  if (rename(tmp.c_str(), path.c_str()) != 0) FailAndRemove("cannot rename", tmp);
  // Make the rename itself durable, so a crash cannot bring back a stale file.
  UniqueFd dir(open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) fsync(dir.get());
}

}  // namespace

KeyStore::KeyStore(Db& db) : db_(db) {}

std::pair<ApiKey, std::string> KeyStore::Create(const std::string& name, bool admin,
                                                std::optional<int64_t> daily_limit_micros) {
  ApiKey k;
  k.id = "key_" + RandomHex(8);
  k.name = name;
  k.admin = admin;
  k.daily_limit_micros = daily_limit_micros;
  k.created_ms = NowMs();
  std::string secret = "kiln_" + RandomHex(20);
  db_.Exec(
      "INSERT INTO api_keys (id, name, secret_sha256, admin, daily_limit_micros, created_ms)"
      " VALUES (?, ?, ?, ?, ?, ?)",
      {k.id, k.name, Sha256Hex(secret), int64_t{admin ? 1 : 0},
       daily_limit_micros ? DbValue(*daily_limit_micros) : DbValue(nullptr), k.created_ms});
  return {std::move(k), std::move(secret)};
}

std::vector<ApiKey> KeyStore::List() const {
  std::vector<ApiKey> out;
  for (const auto& r :
       db_.Query(std::string("SELECT ") + kColumns + " FROM api_keys ORDER BY created_ms, rowid"))
    out.push_back(FromRow(r));
  return out;
}

std::optional<ApiKey> KeyStore::Get(const std::string& id) const {
  auto r = db_.QueryOne(std::string("SELECT ") + kColumns + " FROM api_keys WHERE id = ?", {id});
  if (!r) return std::nullopt;
  return FromRow(*r);
}

bool KeyStore::Revoke(const std::string& id) {
  if (db_.Exec("UPDATE api_keys SET revoked_ms = ? WHERE id = ? AND revoked_ms IS NULL",
               {NowMs(), id}) > 0)
    return true;
  // Nothing changed: unknown, or revoked before (which keeps its first time).
  return db_.QueryOne("SELECT 1 FROM api_keys WHERE id = ?", {id}).has_value();
}

std::optional<ApiKey> KeyStore::Authenticate(const std::string& secret) const {
  if (secret.empty()) return std::nullopt;
  // Looking up the hash (not the secret) also means the lookup's timing can
  // only reveal bits of a digest, which do not help to forge a secret.
  auto r = db_.QueryOne(std::string("SELECT ") + kColumns +
                            " FROM api_keys WHERE secret_sha256 = ? AND revoked_ms IS NULL",
                        {Sha256Hex(secret)});
  if (!r) return std::nullopt;
  return FromRow(*r);
}

std::string KeyStore::EnsureLocalAdminKey(const std::string& path) {
  if (auto k = Authenticate(ReadSecretFile(path)); k && k->admin) return k->id;
  auto [key, secret] = Create("local admin", /*admin=*/true, std::nullopt);
  try {
    WriteSecretFile(path, secret);
  } catch (...) {
    // Nobody will ever hold this secret: leave no live admin key behind.
    Revoke(key.id);
    throw;
  }
  return key.id;
}

}  // namespace kiln::store
