// A snapshot exported from one store and imported into another, and every
// way an imported tar can be wrong (store/snapshot_transfer.h).
#include "store/snapshot_transfer.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "common/digest.h"
#include "unit/support/temp_dir.h"

namespace kiln::store {
namespace snapshot_transfer_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kId[] = "0b3c6f0e-9a4e-4d43-8a55-2f4c1b7e9d10";
const TransferHost kHost{"runsc-1", "base-0123456789abcdef"};

class SnapshotTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    from_ = std::make_unique<SnapshotStore>(dir_ + "/a");
    to_ = std::make_unique<SnapshotStore>(dir_ + "/b");
  }

  // A sealed snapshot in `from_`, and its tar.
  std::string ExportedTar() {
    fs::create_directories(from_->CheckpointDir(kId));
    std::ofstream(from_->CheckpointDir(kId) + "/pages.img", std::ios::binary)
        << std::string(3 << 20, 'p') + "tail";
    std::ofstream(from_->CheckpointDir(kId) + "/checkpoint.img", std::ios::binary) << "state";
    SnapshotRecord r;
    r.id = kId;
    r.owner = "key_a";
    r.name = "warm";
    r.labels = {{"team", "x"}};
    r.source_sandbox_id = "sb1";
    r.created_ms = 1000;
    r.expires_ms = 2000;
    r.network = json{{"internet", false}, {"allow", json::array()}, {"deny", json::array()}};
    EXPECT_TRUE(from_->Seal(r).ok());
    return Streamed(SnapshotExport::Prepare(*from_, r, kHost));
  }

  // The whole tar of a prepared export, checked against its stated size.
  static std::string Streamed(const Result<SnapshotExport>& tar) {
    EXPECT_TRUE(tar.ok()) << tar.status().ToString();
    if (!tar.ok()) return "";
    std::string out;
    EXPECT_TRUE(tar->Stream([&](std::string_view d) {
      out.append(d);
      return true;
    }));
    EXPECT_EQ(out.size(), tar->size());
    return out;
  }

  // Imports `tar` into `to_` in uneven pieces, as a socket would give it.
  Result<ImportResult> Import(const std::string& tar, const std::string& owner = "key_b",
                              TransferHost host = kHost) {
    SnapshotImport import(*to_, ImportRequest{owner, host, 5000, nullptr});
    return import.Run(Pieces(tar));
  }

  // A body source giving `tar` in uneven pieces, some of them empty.
  static TarSource Pieces(const std::string& tar) {
    return [&tar, at = size_t{0}, calls = 0](std::string* chunk) mutable {
      if (at == tar.size()) return false;
      size_t n = ++calls % 5 == 0 ? 0 : std::min<size_t>(tar.size() - at, 1 + (at * 7919) % 70000);
      chunk->assign(tar, at, n);
      at += n;
      return true;
    };
  }

  // Nothing of an import is in `to_`'s directory but finished snapshots.
  std::vector<std::string> Entries() {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_ + "/b")) names.push_back(e.path().filename());
    return names;
  }

  // Offset of an entry's data in the tar.
  static size_t DataOf(const std::string& tar, const std::string& name) {
    size_t header = tar.find(name + std::string(1, '\0'));
    return header - header % kTarBlock + kTarBlock;
  }

  testutil::TempDir tmp_{"kiln-transfer"};  // outlives the stores below
  const std::string dir_ = tmp_.path();
  std::unique_ptr<SnapshotStore> from_, to_;
};

TEST_F(SnapshotTransferTest, ImportKeepsIdNameLabelsNetworkWithTheImportersOwner) {
  std::string tar = ExportedTar();
  auto done = Import(tar);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_TRUE(done->created);
  auto got = to_->Get(kId);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->owner, "key_b");
  EXPECT_EQ(got->name, "warm");
  EXPECT_EQ(got->labels.at("team"), "x");
  EXPECT_EQ(got->network["internet"], false);
  EXPECT_EQ(got->size_bytes, (3u << 20) + 4 + 5);
  EXPECT_EQ(got->expires_ms, 5000 + 7 * 86400000LL);
  EXPECT_TRUE(to_->Verify(kId).ok());
  EXPECT_EQ(Entries(), std::vector<std::string>{kId});
  // Again, same key: the same record, nothing written.
  auto again = Import(tar);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->created);
  // Another key: the id is taken, so its import gets an id of its own (no
  // key can squat an id another key's import needs), and the same import
  // again finds that one.
  auto other = Import(tar, "key_c");
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_TRUE(other->created);
  EXPECT_NE(other->record.id, kId);
  EXPECT_EQ(other->record.source_id, kId);
  EXPECT_EQ(other->record.owner, "key_c");
  EXPECT_EQ(to_->Get(kId)->owner, "key_b");  // untouched
  auto other_again = Import(tar, "key_c");
  ASSERT_TRUE(other_again.ok()) << other_again.status().ToString();
  EXPECT_FALSE(other_again->created);
  EXPECT_EQ(other_again->record.id, other->record.id);
  // A reloaded store has it too.
  to_ = std::make_unique<SnapshotStore>(dir_ + "/b");
  EXPECT_TRUE(to_->Verify(kId).ok());
}

TEST_F(SnapshotTransferTest, BadTarsLeaveNothing) {
  std::string tar = ExportedTar();
  auto refused = [&](const std::string& body, Code code, const std::string& says) {
    auto done = Import(body);
    ASSERT_FALSE(done.ok()) << says;
    EXPECT_EQ(done.status().code(), code) << done.status().message();
    EXPECT_NE(done.status().message().find(says), std::string::npos) << done.status().message();
    EXPECT_TRUE(Entries().empty()) << says;
    EXPECT_FALSE(to_->Get(kId));
  };
  std::string flipped = tar;
  flipped[DataOf(tar, "checkpoint/pages.img") + 12345] ^= 1;
  refused(flipped, Code::kInvalidArchive, "checkpoint/pages.img does not match its xxh3_128");
  refused(tar.substr(0, tar.size() / 2), Code::kInvalidArchive, "truncated");
  refused(tar.substr(0, tar.size() - 1024), Code::kInvalidArchive, "end-of-archive");
  refused(std::string(4000, 'g'), Code::kInvalidArchive, "not a tar");
  refused("", Code::kInvalidArchive, "empty");
  std::string extra = tar.substr(0, tar.size() - 1024) + TarFileHeader("checkpoint/x.img", 1, 0) +
                      "x" + TarPadding(1) + TarEnd();
  refused(extra, Code::kInvalidArchive, "checkpoint/x.img is not listed");
  std::string link = TarFileHeader("checkpoint/l", 0, 0);
  link[156] = '2';  // a symlink, its header checksum made right again
  unsigned sum = 0;
  for (size_t i = 0; i < kTarBlock; ++i)
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(link[i]);
  snprintf(link.data() + 148, 8, "%06o", sum);
  refused(tar.substr(0, tar.size() - 1024) + link + TarEnd(), Code::kInvalidArchive,
          "symbolic link");
  std::string escape = tar.substr(0, tar.size() - 1024) + TarFileHeader("../../etc/x", 0, 0);
  refused(escape + TarEnd(), Code::kInvalidArchive, "..");
  // A listed file left out.
  size_t pages = DataOf(tar, "checkpoint/pages.img") - kTarBlock;
  size_t after = DataOf(tar, "checkpoint/pages.img") + (3 << 20) + 512;
  refused(tar.substr(0, pages) + tar.substr(after), Code::kInvalidArchive,
          "lacks checkpoint/pages.img");
  // Another engine or base image.
  auto engine = Import(tar, "key_b", TransferHost{"runsc-2", kHost.base_image});
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), Code::kSnapshotIncompatible);
  EXPECT_NE(engine.status().message().find("runsc-1"), std::string::npos);
  auto base = Import(tar, "key_b", TransferHost{kHost.engine_version, "base-ffff"});
  ASSERT_FALSE(base.ok());
  EXPECT_EQ(base.status().code(), Code::kSnapshotIncompatible);
  EXPECT_TRUE(Entries().empty());
}

// A layer store in memory: what an import gave it, and what it holds.
class FakeLayers : public LayerSink {
 public:
  struct State {
    std::set<std::string> held;              // digests Has() answers true for
    std::map<std::string, std::string> got;  // sha256 -> bytes received
    std::vector<std::string> committed;      // ids of the last Commit
  };
  explicit FakeLayers(State& state) : state_(state) {}
  bool Has(const std::string& sha) override { return state_.held.count(sha) > 0; }
  Status Begin(const std::string& sha, uint64_t) override {
    current_ = sha;
    state_.got[sha].clear();
    return Status::Ok();
  }
  Status Data(std::string_view d) override {
    state_.got[current_].append(d);
    return Status::Ok();
  }
  Status End() override { return Status::Ok(); }
  Result<ImportedRoot> Commit(const std::vector<TransferLayer>& layers) override {
    ImportedRoot root{"/roots/imported", {}};
    for (const auto& l : layers) root.layers.push_back(l.base.empty() ? "id-" + l.sha256 : l.base);
    state_.committed = root.layers;
    return root;
  }

 private:
  State& state_;
  std::string current_;
};

TransferLayer MemoryLayer(const std::string& bytes) {
  TransferLayer l;
  l.sha256 = Sha256Hex(bytes);
  l.size = bytes.size();
  l.write = [bytes](const std::function<bool(std::string_view)>& write) { return write(bytes); };
  return l;
}

TEST_F(SnapshotTransferTest, AnImageSnapshotCarriesItsLayersAndSkipsWhatTheReceiverHas) {
  ExportedTar();  // seals kId in from_
  SnapshotRecord r = *from_->Get(kId);
  r.image = "img-1";
  TransferLayer base;
  base.base = kHost.base_image;
  std::vector<TransferLayer> layers = {base, MemoryLayer("layer one"), MemoryLayer("layer two")};
  std::string sha1 = layers[1].sha256, sha2 = layers[2].sha256;

  auto export_with = [&](const std::set<std::string>& skip) {
    return Streamed(SnapshotExport::Prepare(*from_, r, kHost, layers, skip));
  };
  auto import_into = [&](const std::string& tar, FakeLayers::State& state) {
    ImportRequest req{"key_b", kHost, 5000, nullptr, std::make_unique<FakeLayers>(state)};
    SnapshotImport import(*to_, std::move(req));
    return import.Run(Pieces(tar));
  };

  // Without a layer store, an image snapshot is refused.
  std::string whole = export_with({});
  EXPECT_EQ(Import(whole).status().code(), Code::kSnapshotIncompatible);
  // A skipped layer the receiver lacks: refused before anything is stored.
  FakeLayers::State lacking;
  auto refused = import_into(export_with({sha2}), lacking);
  EXPECT_EQ(refused.status().code(), Code::kSnapshotIncompatible);
  EXPECT_EQ(refused.status().details()["missingLayers"], json::array({sha2}));
  EXPECT_TRUE(lacking.got.empty());
  EXPECT_FALSE(to_->Get(kId));
  // A layer whose bytes do not match its name: invalid, nothing committed.
  std::string bad = whole;
  bad[DataOf(bad, "layers/" + sha1 + ".tar")] ^= 1;
  FakeLayers::State corrupted;
  EXPECT_EQ(import_into(bad, corrupted).status().code(), Code::kInvalidArchive);
  EXPECT_TRUE(corrupted.committed.empty());
  EXPECT_FALSE(to_->Get(kId));
  // A receiver holding layer two gets only layer one, and the record points at its root.
  FakeLayers::State holding;
  holding.held = {sha2};
  auto done = import_into(export_with({sha2}), holding);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(holding.got.size(), 1u);
  EXPECT_EQ(holding.got[sha1], "layer one");
  EXPECT_EQ(holding.committed,
            (std::vector<std::string>{kHost.base_image, "id-" + sha1, "id-" + sha2}));
  EXPECT_EQ(done->record.rootfs, "/roots/imported");
  EXPECT_EQ(done->record.layers, holding.committed);
  // The sender's image id is provenance only: never this host's `image`.
  EXPECT_EQ(done->record.image, std::nullopt);
  EXPECT_EQ(done->record.source_image, "img-1");
  EXPECT_EQ(to_->Get(kId)->layers, holding.committed);  // kept in its manifest
}

TEST_F(SnapshotTransferTest, AStartingStoreRemovesAnUnfinishedImport) {
  std::string tar = ExportedTar();
  bool seen_partial = false;
  {
    SnapshotImport import(*to_, ImportRequest{"key_b", kHost, 5000, nullptr});
    size_t at = 0;
    // The client goes away half way: the body source throws, as a broken
    // connection's reader may.
    EXPECT_THROW((void)import.Run([&](std::string* chunk) -> bool {
      if (at >= tar.size() / 2) {
        seen_partial = fs::exists(to_->ImportDir(kId));
        // As after a kill -9: another import's partial directory stays...
        fs::create_directories(dir_ + "/b/" + kId + "-copy.import-partial/checkpoint");
        throw std::runtime_error("connection reset");
      }
      chunk->assign(tar, at, 65536);
      at += 65536;
      return true;
    }),
                 std::runtime_error);
  }
  EXPECT_TRUE(seen_partial);
  EXPECT_FALSE(fs::exists(to_->ImportDir(kId)));  // ...an abandoned import removes its own
  to_ = std::make_unique<SnapshotStore>(dir_ + "/b");
  EXPECT_TRUE(Entries().empty());
}

// libarchive reads what the writer wrote, in pieces of any size.
struct Collect : TarSink {
  std::vector<std::pair<std::string, std::string>> got;
  Status BeginEntry(const std::string& name, uint64_t) override {
    got.push_back({name, ""});
    return Status::Ok();
  }
  Status EntryData(std::string_view d) override {
    got.back().second.append(d);
    return Status::Ok();
  }
  Status EndEntry() override { return Status::Ok(); }
};

Status ReadBytewise(const std::string& tar, Collect& sink) {
  size_t at = 0;
  return ReadTar(
      [&](std::string* chunk) {
        if (at == tar.size()) return false;
        chunk->assign(1, tar[at++]);
        return true;
      },
      sink);
}

TEST(SnapshotTarTest, HeaderRoundTripsThroughLibarchive) {
  Collect sink;
  std::string tar = TarFileHeader("./a//b", 3, 7) + "abc" + TarPadding(3) +
                    TarFileHeader("e", 0, 7) + TarEnd() + std::string(8192, '\0');
  Status s = ReadBytewise(tar, sink);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(sink.got.size(), 2u);
  EXPECT_EQ(sink.got[0], (std::pair<std::string, std::string>{"a/b", "abc"}));
  EXPECT_EQ(sink.got[1].first, "e");
}

TEST(SnapshotTarTest, TheEndOfTheTarIsChecked) {
  std::string entry = TarFileHeader("a", 600, 7) + std::string(600, 'x') + TarPadding(600);
  auto read = [](const std::string& tar) {
    Collect sink;
    return ReadBytewise(tar, sink);
  };
  EXPECT_TRUE(read(entry + TarEnd()).ok());
  Status one_block = read(entry + std::string(kTarBlock, '\0'));
  EXPECT_NE(one_block.message().find("before its end-of-archive marker"), std::string::npos)
      << one_block.ToString();
  Status none = read(entry);
  EXPECT_NE(none.message().find("it ends at byte 1536 before"), std::string::npos)
      << none.ToString();
  Status after = read(entry + TarEnd() + "x");
  EXPECT_NE(after.message().find("data after its end-of-archive marker"), std::string::npos)
      << after.ToString();
  // An entry after a single zero block is never read: it is data after the end.
  Status hidden = read(entry + std::string(kTarBlock, '\0') + entry + TarEnd());
  EXPECT_NE(hidden.message().find("data after its end-of-archive marker"), std::string::npos)
      << hidden.ToString();
  Status inside = read(entry.substr(0, 700));
  EXPECT_NE(inside.message().find("truncated: it ends inside entry a at byte 700"),
            std::string::npos)
      << inside.ToString();
  Status header = read(entry + TarFileHeader("b", 1, 7).substr(0, 100));
  EXPECT_NE(header.message().find("truncated"), std::string::npos) << header.ToString();
  Status empty = read("");
  EXPECT_NE(empty.message().find("the body is empty"), std::string::npos) << empty.ToString();
  Status short_body = read("abc");
  EXPECT_NE(short_body.message().find("not a tar"), std::string::npos) << short_body.ToString();
  Status zeros = read(std::string(4096, '\0'));  // no entry: the import says what is missing
  EXPECT_TRUE(zeros.ok()) << zeros.ToString();
}

// Every kind of entry but a regular file is refused by name, whatever
// libarchive makes of it.
TEST(SnapshotTarTest, OnlyRegularFilesAreTaken) {
  auto with_type = [](const std::string& name, char type, const std::string& link = "") {
    std::string h = TarFileHeader(name, 0, 7);
    h[156] = type;
    std::copy(link.begin(), link.end(), h.begin() + 157);
    std::fill(h.begin() + 148, h.begin() + 156, ' ');
    unsigned sum = 0;
    for (char c : h) sum += static_cast<unsigned char>(c);
    snprintf(h.data() + 148, 8, "%06o", sum);
    return h + TarEnd();
  };
  struct Case {
    char type;
    const char* kind;
  };
  for (Case c : {Case{'1', "a hard link"}, Case{'2', "a symbolic link"}, Case{'3', "a device"},
                 Case{'4', "a device"}, Case{'5', "a directory"}, Case{'6', "a fifo"}}) {
    Collect sink;
    Status s = ReadBytewise(with_type("checkpoint/x", c.type, "checkpoint/y"), sink);
    EXPECT_EQ(s.code(), Code::kInvalidArchive) << c.kind;
    EXPECT_NE(s.message().find(std::string("tar entry checkpoint/x is ") + c.kind),
              std::string::npos)
        << s.ToString();
    EXPECT_TRUE(sink.got.empty());
  }
  Collect sink;
  Status s = ReadBytewise(with_type("/etc/passwd", '0'), sink);
  EXPECT_NE(s.message().find("absolute path"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace snapshot_transfer_test
}  // namespace kiln::store
