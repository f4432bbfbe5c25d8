// ImageStorage's prune over a real store in a temporary directory: what is
// not kept goes, with its bytes counted, and nothing is left in tmp/.
#include "images/manager/image_storage.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "unit/support/images_test_util.h"
#include "unit/support/temp_dir.h"

namespace kiln::images {
namespace image_storage_test {
namespace {

namespace fs = std::filesystem;
using testing::WriteFile;
using testutil::TempDir;

LayerId AddLayer(ImageStorage& store, const std::string& scratch, const std::string& name) {
  std::string dir = scratch + "/" + name;
  WriteFile(dir + "/" + name + ".txt", std::string(64 * 1024, 'x'));
  LayerId id = LayerId::Of(Sha256Digest::Of(name));
  Result<LayerInfo> added = store.AddLayerDir(dir, id);
  EXPECT_TRUE(added.ok()) << added.status().ToString();
  return id;
}

TEST(ImageStoragePrune, RemovesWhatIsNotKeptAndLeavesTheRestWhole) {
  TempDir dir;
  ImageStorage store(dir.path() + "/store");
  LayerId base = AddLayer(store, dir.path(), "base");
  LayerId kept = AddLayer(store, dir.path(), "kept");
  LayerId gone = AddLayer(store, dir.path(), "gone");
  Result<std::string> kept_root = store.EnsureRoot({base, kept});
  Result<std::string> gone_root = store.EnsureRoot({base, gone});
  ASSERT_TRUE(kept_root.ok() && gone_root.ok());

  PruneStats stats =
      store.Prune({base.str(), kept.str()}, {ImageStorage::ChainId({base, kept}).hex()}, false);
  EXPECT_EQ(stats.roots_removed, 1);
  EXPECT_EQ(stats.layers_removed, 1);
  EXPECT_GE(stats.bytes_freed, 64u * 1024);  // the last links to gone.txt
  EXPECT_FALSE(fs::exists(*gone_root));
  EXPECT_FALSE(fs::exists(store.LayerDir(gone)));
  EXPECT_FALSE(store.Layer(gone));
  EXPECT_EQ(testing::ReadFile(*kept_root + "/kept.txt").size(), 64u * 1024);
  EXPECT_EQ(testing::ReadFile(*kept_root + "/base.txt").size(), 64u * 1024);
  EXPECT_TRUE(fs::is_empty(store.dir() + "/tmp"));  // removed, not just moved aside
  // The pruned chain flattens again on its next use.
  LayerId again = AddLayer(store, dir.path() + "/2", "gone");
  Result<std::string> root = store.EnsureRoot({base, again});
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_TRUE(fs::exists(*root + "/gone.txt"));
}

}  // namespace
}  // namespace image_storage_test
}  // namespace kiln::images
