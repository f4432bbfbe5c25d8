#include "store/snapshot_store.h"

#include "common/json_integer.h"

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "common/digest.h"
#include "common/log.h"
#include "common/time.h"

namespace kiln::store {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Manifests name their checksum: XXH3-128 since it replaced SHA-256 (same
// guarantee against corruption, ~4x faster here); older ones stay readable.
bool MatchesChecksum(const std::string& path, const json& want) {
  if (auto it = want.find("xxh3_128"); it != want.end()) return FileXxh3Hex(path) == *it;
  if (auto it = want.find("sha256"); it != want.end()) return FileSha256Hex(path) == *it;
  return false;
}

}  // namespace

const char* SnapshotModeName(SnapshotMode mode) {
  return mode == SnapshotMode::kDisk ? "disk" : "memory";
}

std::optional<SnapshotMode> ParseSnapshotMode(const std::string& name) {
  if (name == "memory") return SnapshotMode::kMemory;
  if (name == "disk") return SnapshotMode::kDisk;
  return std::nullopt;
}

void to_json(json& j, const SnapshotRecord& r) {
  j = json{{"id", r.id},
           {"owner", r.owner},
           {"name", r.name ? json(*r.name) : json(nullptr)},
           {"labels", r.labels},
           {"sourceSandboxId", r.source_sandbox_id},
           {"vcpu", r.shape.vcpu},
           {"memoryMiB", r.shape.memory_mib},
           {"diskMiB", r.shape.disk_mib},
           {"retentionDays", r.retention_days},
           {"createdMs", r.created_ms},
           {"expiresMs", r.expires_ms},
           {"sizeBytes", r.size_bytes},
           {"captureMs", r.capture_ms},
           {"network", r.network}};
  if (r.image) j["image"] = *r.image;
  if (r.source_image) j["sourceImage"] = *r.source_image;
  if (r.source_id) j["sourceId"] = *r.source_id;
  if (!r.rootfs.empty()) j["rootfs"] = r.rootfs;
  if (!r.layers.empty()) j["layers"] = r.layers;
  if (r.image_warm) j["imageWarm"] = true;
  if (!r.paused_sandbox.empty()) j["pausedSandbox"] = r.paused_sandbox;
  if (r.temporary) j["temporary"] = true;
  if (r.sudo_off) j["sudoOff"] = true;
  if (r.mode != SnapshotMode::kMemory) {
    j["mode"] = SnapshotModeName(r.mode);
    j["runAs"] = r.run_as;
  }
}

void from_json(const json& j, SnapshotRecord& r) {
  r = SnapshotRecord{};
  j.at("id").get_to(r.id);
  r.owner = j.value("owner", "");
  if (j.at("name").is_string()) r.name = j["name"].get<std::string>();
  j.at("labels").get_to(r.labels);
  j.at("sourceSandboxId").get_to(r.source_sandbox_id);
  r.shape.vcpu = JsonIntegerAt<decltype(r.shape.vcpu)>(j, "vcpu");
  r.shape.memory_mib = JsonIntegerAt<decltype(r.shape.memory_mib)>(j, "memoryMiB");
  r.shape.disk_mib = JsonIntegerAt<decltype(r.shape.disk_mib)>(j, "diskMiB");
  r.retention_days = JsonIntegerAt<decltype(r.retention_days)>(j, "retentionDays");
  r.created_ms = JsonIntegerAt<decltype(r.created_ms)>(j, "createdMs");
  r.expires_ms = JsonIntegerAt<decltype(r.expires_ms)>(j, "expiresMs");
  r.size_bytes = JsonIntegerAt<decltype(r.size_bytes)>(j, "sizeBytes");
  r.capture_ms = JsonIntegerAt<decltype(r.capture_ms)>(j, "captureMs");
  r.network = j.value("network", json());
  if (j.contains("image")) r.image = j["image"].get<std::string>();
  if (j.contains("sourceImage")) r.source_image = j["sourceImage"].get<std::string>();
  if (j.contains("sourceId")) r.source_id = j["sourceId"].get<std::string>();
  r.rootfs = j.value("rootfs", "");
  if (j.contains("layers")) j["layers"].get_to(r.layers);
  r.image_warm = j.value("imageWarm", false);
  r.paused_sandbox = j.value("pausedSandbox", "");
  r.temporary = j.value("temporary", false);
  r.sudo_off = j.value("sudoOff", false);
  // Manifests written before disk snapshots have no mode: memory.
  auto mode = ParseSnapshotMode(j.value("mode", "memory"));
  if (!mode) throw json::other_error::create(501, "unknown snapshot mode", &j);
  r.mode = *mode;
  if (j.contains("runAs")) r.run_as = j["runAs"].get<RunAs>();
}

SnapshotStore::SnapshotStore(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    std::string id = e.path().filename();
    if (id.ends_with(".import-partial")) {
      LogWarn("removing an unfinished snapshot import", {{"dir", id}});
      fs::remove_all(e.path(), ec);
      continue;
    }
    std::ifstream f(e.path() / "manifest.json");
    json m = f ? json::parse(f, nullptr, false) : json();
    if (m.is_discarded() || !m.is_object() || !m.contains("record")) {
      LogWarn("removing an unsealed snapshot", {{"snapshotId", id}});
      fs::remove_all(e.path(), ec);
      continue;
    }
    try {
      snapshots_[id] = {m["record"].get<SnapshotRecord>(), m["files"]};
    } catch (const json::exception& ex) {
      LogWarn("unreadable snapshot manifest", {{"snapshotId", id}, {"error", ex.what()}});
      continue;
    }
    // Sealed, but a daemon stopped before its checksums were written.
    json& files = snapshots_[id].second;
    bool missing = false;
    for (const auto& [rel, want] : files.items())
      missing |=
          !want.contains("xxh3_128") && !want.contains("sha256") && !want.contains("changed");
    if (missing) {
      bool ok = HashFiles(id, &files, /*as_sealed=*/false);
      if (ok) {
        m["files"] = files;
        ok = WriteManifest(id, m);
      }
      if (!ok) {
        LogWarn("removing a snapshot whose files cannot be read", {{"snapshotId", id}});
        snapshots_.erase(id);
        fs::remove_all(e.path(), ec);
      }
    }
  }
  hasher_ = std::jthread([this](std::stop_token stop) { HashLoop(stop); });
}

std::string SnapshotStore::CheckpointDir(const std::string& id) const {
  return dir_ + "/" + id + "/checkpoint";
}

bool SnapshotStore::WriteManifest(const std::string& id, const json& manifest) {
  std::string base = dir_ + "/" + id;
  {
    std::ofstream f(base + "/manifest.json.tmp");
    f << manifest.dump(2);
    if (!f) return false;
  }
  std::error_code ec;
  fs::rename(base + "/manifest.json.tmp", base + "/manifest.json", ec);
  return !ec;
}

Status SnapshotStore::Seal(const SnapshotRecord& record) {
  auto fail = [&](std::string message) {
    Discard(record.id);
    return Status(Code::kSnapshotFailed, std::move(message));
  };
  std::string base = dir_ + "/" + record.id;
  json files = json::object();
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(CheckpointDir(record.id), ec)) {
    if (!e.is_regular_file()) continue;
    std::string rel = fs::relative(e.path(), base).string();
    auto identity = IdentityOf(e.path());
    if (!identity) return fail("cannot read " + rel);
    files[rel] = {{"size", identity->size}};
    std::lock_guard lock(mu_);
    verified_[e.path()] = *identity;  // written just now, by runsc for us
  }
  if (ec || files.empty()) return fail("the capture wrote no files");
  // The manifest names the files now; their checksums follow from the
  // hasher (a manifest without them is completed at the next start).
  if (!WriteManifest(record.id, json{{"record", record}, {"files", files}})) {
    int err = errno;
    if (err == ENOSPC || err == EDQUOT) {
      Discard(record.id);
      return Status(Code::kNoSpace, "no space left on the state disk for the snapshot's manifest");
    }
    return fail("cannot write the manifest");
  }
  {
    std::lock_guard lock(mu_);
    snapshots_[record.id] = {record, files};
    to_hash_.push_back(record.id);
  }
  hash_cv_.notify_one();
  return Status::Ok();
}

bool SnapshotStore::HashFiles(const std::string& id, json* files, bool as_sealed) {
  std::string base = dir_ + "/" + id + "/";
  for (auto& [rel, want] : files->items()) {
    if (want.contains("xxh3_128") || want.contains("sha256") || want.contains("changed")) continue;
    std::string path = base + rel;
    auto sealed = [&] {
      std::lock_guard lock(mu_);
      auto it = verified_.find(path);
      auto now = IdentityOf(path);
      return it != verified_.end() && now && *now == it->second;
    };
    // A file changed since its seal gets no checksum but a mark (and no
    // restore): a sum must be of what runsc wrote, not of what came after.
    if (as_sealed && !sealed()) {
      want["changed"] = true;  // refused for good, also after a restart
      continue;
    }
    std::string sum = FileXxh3Hex(path);
    if (sum.empty()) return false;
    if (as_sealed && !sealed()) {
      want["changed"] = true;
      continue;
    }
    want["xxh3_128"] = sum;
  }
  return true;
}

void SnapshotStore::HashLoop(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (hash_cv_.wait(lock, stop, [&] { return !to_hash_.empty(); })) {
    std::string id = std::move(to_hash_.front());
    to_hash_.pop_front();
    auto it = snapshots_.find(id);
    if (it == snapshots_.end()) continue;  // deleted meanwhile
    SnapshotRecord record = it->second.first;
    json files = it->second.second;
    lock.unlock();
    bool hashed = HashFiles(id, &files, /*as_sealed=*/true);
    lock.lock();
    it = snapshots_.find(id);
    if (it == snapshots_.end()) continue;
    if (!hashed || !WriteManifest(id, json{{"record", record}, {"files", files}})) {
      LogWarn("cannot checksum a snapshot: it is checked by file identity until kilnd restarts",
              {{"snapshotId", id}});
      continue;
    }
    it->second.second = files;
  }
}

std::optional<SnapshotStore::FileIdentity> SnapshotStore::IdentityOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) < 0) return std::nullopt;
  return FileIdentity{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                      static_cast<uint64_t>(st.st_size),
                      st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec,
                      st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec};
}

Status SnapshotStore::Verify(const std::string& id) const {
  json files;
  {
    std::lock_guard lock(mu_);
    auto it = snapshots_.find(id);
    if (it == snapshots_.end())
      return Status(Code::kSnapshotNotFound, "snapshot " + id + " not found");
    files = it->second.second;
  }
  std::string base = dir_ + "/" + id + "/";
  for (const auto& [rel, want] : files.items()) {
    std::string path = base + rel;
    auto identity = IdentityOf(path);
    bool intact = identity && identity->size == want["size"].get<uint64_t>();
    if (intact) {
      std::lock_guard lock(mu_);
      auto seen = verified_.find(path);
      if (seen != verified_.end() && seen->second == *identity) continue;
    }
    bool summed = want.contains("xxh3_128") || want.contains("sha256");
    if (!intact || !summed || !MatchesChecksum(path, want)) {
      std::lock_guard lock(mu_);
      verified_.erase(path);
      return Status(Code::kSnapshotCorrupted,
                    "snapshot " + id + " is corrupted: " + rel + " does not match its checksum");
    }
    std::lock_guard lock(mu_);
    verified_[path] = *identity;
  }
  return Status::Ok();
}

Status SnapshotStore::AdoptImport(const SnapshotRecord& record, const json& files) {
  std::string from = ImportDir(record.id);
  {
    std::ofstream f(from + "/manifest.json");
    f << json{{"record", record}, {"files", files}}.dump(2);
    f.flush();
    if (!f) {
      int err = errno;
      if (err == ENOSPC || err == EDQUOT)
        return Status(Code::kNoSpace,
                      "no space left on the state disk for the snapshot's manifest");
      return Status(Code::kIoError, "cannot write the imported snapshot's manifest");
    }
  }
  std::lock_guard lock(mu_);
  if (snapshots_.count(record.id))
    return Status(Code::kSnapshotExists, "snapshot " + record.id + " exists already",
                  json{{"snapshotId", record.id}});
  std::error_code ec;
  fs::rename(from, SnapshotDir(record.id), ec);
  if (ec)
    return Status(Code::kIoError, "cannot move the imported snapshot into place: " + ec.message());
  // Written by kilnd just now from bytes whose checksums matched.
  for (const auto& [rel, want] : files.items()) {
    std::string path = SnapshotDir(record.id) + "/" + rel;
    if (auto identity = IdentityOf(path)) verified_[path] = *identity;
  }
  snapshots_[record.id] = {record, files};
  return Status::Ok();
}

Result<json> SnapshotStore::VerifiedFiles(const std::string& id) const {
  if (Status intact = Verify(id); !intact.ok()) return intact;
  json files;
  {
    std::lock_guard lock(mu_);
    auto it = snapshots_.find(id);
    if (it == snapshots_.end())
      return Status(Code::kSnapshotNotFound, "snapshot " + id + " not found");
    files = it->second.second;
  }
  for (auto& [rel, want] : files.items()) {
    if (want.contains("xxh3_128")) continue;
    std::string sum = FileXxh3Hex(SnapshotDir(id) + "/" + rel);
    if (sum.empty()) return Status(Code::kIoError, "cannot read " + rel + " of snapshot " + id);
    want.erase("sha256");
    want["xxh3_128"] = sum;
  }
  return files;
}

std::optional<SnapshotRecord> SnapshotStore::Get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = snapshots_.find(id);
  if (it == snapshots_.end()) return std::nullopt;
  return it->second.first;
}

std::vector<SnapshotRecord> SnapshotStore::List() const {
  std::vector<SnapshotRecord> out;
  std::lock_guard lock(mu_);
  for (const auto& [id, s] : snapshots_) out.push_back(s.first);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.created_ms < b.created_ms; });
  return out;
}

bool SnapshotStore::Delete(const std::string& id) {
  {
    std::lock_guard lock(mu_);
    if (!snapshots_.erase(id)) return false;
    std::string base = dir_ + "/" + id + "/";
    for (auto it = verified_.lower_bound(base);
         it != verified_.end() && it->first.compare(0, base.size(), base) == 0;)
      it = verified_.erase(it);
  }
  std::error_code ec;
  fs::remove_all(dir_ + "/" + id, ec);
  return true;
}

std::vector<std::string> SnapshotStore::DeleteExpired(int64_t now_ms) {
  std::vector<std::string> expired;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : snapshots_) {
      if (s.first.expires_ms <= now_ms) expired.push_back(id);
    }
  }
  for (const auto& id : expired) Delete(id);
  return expired;
}

void SnapshotStore::Discard(const std::string& id) {
  std::error_code ec;
  fs::remove_all(dir_ + "/" + id, ec);
}

}  // namespace kiln::store
