// Fuzzes the snapshot import (store/snapshot_transfer.h): an input is the
// body of POST /v1/snapshots:import, a tar read by libarchive and checked
// against its kiln-snapshot.json. It is imported into a SnapshotStore in a
// temporary directory, pulled in uneven pieces as a socket gives them.
// Whatever the input: no crash or leak; a failed import leaves the store's
// directory and its list exactly as they were (no partial directory); a
// successful one lists a snapshot whose files on disk are exactly those its
// manifest names, with their sizes and checksums; an image snapshot's layers
// reach the layer store only whole and matching their digests.
#include <stdio.h>
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/digest.h"
#include "fuzz_util.h"
#include "store/snapshot_store.h"
#include "store/snapshot_transfer.h"

namespace kiln::fuzz {
namespace {

namespace fs = std::filesystem;

// The host the seeds' manifests name (tests/fuzz/seeds.py).
const store::TransferHost kHost{"runsc-fuzz", "base-fuzz"};

std::set<std::string> Listing(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.insert(fs::relative(it->path(), dir, ec).string());
  return out;
}

std::string HashOf(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(f)), {});
  Xxh3 h;
  h.Update(data);
  return h.HexDigest();
}

// The imported snapshot's files are exactly those its manifest lists.
void CheckImported(const store::SnapshotStore& store, const store::SnapshotRecord& rec) {
  auto files = store.VerifiedFiles(rec.id);
  if (!files.ok() || !store.Verify(rec.id).ok()) __builtin_trap();
  std::string dir = store.SnapshotDir(rec.id);
  std::set<std::string> listed;
  uint64_t total = 0;
  for (const auto& [rel, want] : files->items()) {
    listed.insert(rel);
    std::string path = dir + "/" + rel;
    if (fs::is_symlink(path) || !fs::is_regular_file(path)) __builtin_trap();
    uint64_t size = want.at("size").get<uint64_t>();
    total += size;
    if (fs::file_size(path) != size || HashOf(path) != want.at("xxh3_128").get<std::string>())
      __builtin_trap();
  }
  std::set<std::string> on_disk;
  for (const auto& e : fs::recursive_directory_iterator(dir + "/checkpoint"))
    if (!e.is_directory()) on_disk.insert(fs::relative(e.path(), dir).string());
  if (on_disk != listed || rec.size_bytes != total || rec.owner != "key_fuzz") __builtin_trap();
}

// An image store in memory. It holds one layer (the sha256 of "held layer"):
// a layer the import hands it must be whole and match the digest it is named
// by, and a root is committed only of layers it received or holds.
class FuzzLayers : public store::LayerSink {
 public:
  bool Has(const std::string& sha) override { return sha == Held(); }
  Status Begin(const std::string& sha, uint64_t size) override {
    current_ = sha;
    size_ = size;
    data_.clear();
    return Status::Ok();
  }
  Status Data(std::string_view d) override {
    data_.append(d);
    return Status::Ok();
  }
  Status End() override {
    if (data_.size() != size_ || Sha256Hex(data_) != current_) __builtin_trap();
    received_.insert(current_);
    return Status::Ok();
  }
  Result<store::ImportedRoot> Commit(const std::vector<store::TransferLayer>& layers) override {
    store::ImportedRoot root{"/fuzz-root", {}};
    for (const auto& l : layers) {
      if (l.base.empty() && !received_.count(l.sha256) && l.sha256 != Held()) __builtin_trap();
      root.layers.push_back(l.base.empty() ? l.sha256 : l.base);
    }
    return root;
  }

 private:
  static const std::string& Held() {
    static const std::string held = Sha256Hex("held layer");
    return held;
  }
  std::string current_, data_;
  uint64_t size_ = 0;
  std::set<std::string> received_;
};

}  // namespace
}  // namespace kiln::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  static auto* base = new fuzz::TempDir();
  static auto* store = new store::SnapshotStore(base->path());
  std::string body(fuzz::AsText(data, size));
  auto before = fuzz::Listing(base->path());
  size_t listed = store->List().size();

  std::optional<Result<store::ImportResult>> done;
  {
    store::SnapshotImport import(
        *store, store::ImportRequest{
                    "key_fuzz", fuzz::kHost, 1000, {}, std::make_unique<fuzz::FuzzLayers>()});
    // Pieces of 1 to 4099 bytes: headers and entries split at every place.
    size_t at = 0, n = 1;
    done.emplace(import.Run([&](std::string* chunk) {
      if (at == body.size()) return false;
      n = (n * 31 + 7) % 4099 + 1;
      chunk->assign(body, at, n);
      at += chunk->size();
      return true;
    }));
  }
  // KILN_FUZZ_VERBOSE=1: say what became of each input (is a seed whole?).
  static const bool verbose = ::getenv("KILN_FUZZ_VERBOSE") != nullptr;
  if (verbose)
    fprintf(
        stderr, "import: %s\n",
        done->ok() ? ("created " + (*done)->record.id).c_str() : done->status().ToString().c_str());
  if (!done->ok()) {
    // Nothing new: no partial directory, nothing listed.
    if (fuzz::Listing(base->path()) != before || store->List().size() != listed) __builtin_trap();
    if (done->status().message().empty()) __builtin_trap();
    return 0;
  }
  if (!(*done)->created || !store->Get((*done)->record.id)) __builtin_trap();
  fuzz::CheckImported(*store, (*done)->record);
  if (!store->Delete((*done)->record.id)) __builtin_trap();
  if (fuzz::Listing(base->path()) != before || store->List().size() != listed) __builtin_trap();
  return 0;
}
