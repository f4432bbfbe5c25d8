// The builder over a fake BuildHost (images/manager/build_host.h): a real layer
// store in a temporary directory, an in-memory step cache, one base image,
// and a RUN that records what it was asked and writes a small upper tar.
// What RUN does in a real sandbox is tested against kilnd
// (tests/integration/test_images.py).
#include "images/manager/builder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>

#include "unit/support/images_test_util.h"
#include "unit/support/temp_dir.h"

namespace kiln::images {
namespace images_builder_test {
namespace {

using nlohmann::json;
using testing::TarEntry;
using testing::WriteFile;
using testing::WriteTar;
using testutil::TempDir;

class FakeBuildHost : public BuildHost {
 public:
  explicit FakeBuildHost(const std::string& dir) : storage_(dir + "/store") {
    std::string base = dir + "/base-layer";
    WriteFile(base + "/etc/passwd",
              "root:x:0:0:root:/root:/bin/sh\napp:x:1234:1234::/home/app:/bin/sh\n");
    WriteFile(base + "/etc/group", "root:x:0:\napp:x:1234:\n");
    Result<LayerInfo> added = storage_.AddLayerDir(base, base_layer_);
    EXPECT_TRUE(added.ok()) << added.status().ToString();
  }

  ImageStorage& Layers() override { return storage_; }
  void PinLayer(const LayerId& layer) override { pinned.insert(layer.str()); }
  Status CheckStoreQuota() override { return Status::Ok(); }
  std::optional<std::string> CachedStep(const std::string& owner, const std::string& key) override {
    auto it = cache.find(owner + "/" + key);
    return it == cache.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  void CacheStep(const std::string& owner, const std::string& key, const LayerId& layer) override {
    cache[owner + "/" + key] = layer.str();
  }
  Result<ImageRecord> FindImage(const std::string& ref, const std::string& /*owner*/) override {
    if (ref != "base") return Status(Code::kImageNotFound, "image " + ref + " not found");
    ImageRecord image;
    image.state = ImageState::kReady;
    image.layers = {base_layer_};
    image.config = OciConfig{};
    image.config->user = "app";
    image.config->working_dir = "/home/app";
    return image;
  }
  std::string ContextPath(const std::string&, const Sha256Digest& d) override {
    auto it = contexts.find(d.hex());
    return it == contexts.end() ? d.hex() : it->second;
  }
  std::set<LayerId> HeldLayers(const std::string&) override { return {base_layer_}; }
  RegistryAccess Registry(const std::string&, const ImageRef&) override { return {}; }
  Result<SandboxStepExit> RunInSandbox(const SandboxStep& step) override {
    runs.push_back(step);
    if (fail_next) return *std::exchange(fail_next, std::nullopt);
    step.output(1, "hello from the step\n");
    SandboxStepExit exit;
    exit.exit_code = exit_code;
    if (exit_code == 0)
      WriteTar(step.upper_tar, {TarEntry{"home/app/made.txt", 'f', "made by RUN\n"}},
               /*gzip=*/false);
    return exit;
  }

  std::map<std::string, std::string> cache;
  std::map<std::string, std::string> contexts;  // uploaded context digest (hex) -> its tar
  std::set<std::string> pinned;
  std::vector<SandboxStep> runs;
  int exit_code = 0;
  std::optional<Status> fail_next;

 private:
  LayerId base_layer_ = LayerId::Of(Sha256Digest::Of("fake base"));
  ImageStorage storage_;
};

class BuilderTest : public ::testing::Test {
 protected:
  BuilderTest() : host_(dir_.path()) {}

  Result<BuiltImage> Build(const std::string& dockerfile,
                           const std::function<void(ImageRequest&)>& more = nullptr) {
    ImageRequest req;
    req.owner = "key_a";
    req.source = ImageSource::kDockerfile;
    req.dockerfile = dockerfile;
    req.build.timeout_seconds = 60;
    if (more) more(req);
    log_ = std::make_shared<BuildLog>(dir_.path() + "/build.log");
    Builder builder(host_, req, "00000000-0000-4000-8000-000000000001", log_, cancelled_);
    return builder.Run();
  }

  TempDir dir_;
  FakeBuildHost host_;
  std::shared_ptr<BuildLog> log_;
  std::atomic<bool> cancelled_{false};
};

TEST_F(BuilderTest, ARunStepRunsAsTheImagesUserOnItsRootAndBecomesALayer) {
  auto built = Build("FROM base\nRUN echo hi > made.txt\n");
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  ASSERT_EQ(host_.runs.size(), 1u);
  const SandboxStep& run = host_.runs[0];
  EXPECT_EQ(run.argv, (std::vector<std::string>{"/bin/sh", "-c", "echo hi > made.txt"}));
  EXPECT_EQ(run.run_as.uid, 1234u);
  EXPECT_EQ(run.cwd, "/home/app");
  EXPECT_EQ(run.owner, "key_a");
  EXPECT_TRUE(std::filesystem::exists(run.root + "/etc/passwd"));  // the base's root
  ASSERT_EQ(built->layers.size(), 2u);
  std::string layer_dir = host_.Layers().LayerDir(built->layers[1]);
  EXPECT_EQ(testing::ReadFile(layer_dir + "/home/app/made.txt"), "made by RUN\n");
  EXPECT_TRUE(host_.pinned.count(built->layers[1].str()));
  EXPECT_EQ(built->steps_run, 1);
  std::vector<std::string> tail = log_->Tail(5);
  EXPECT_NE(std::find(tail.begin(), tail.end(), "hello from the step"), tail.end());
}

TEST_F(BuilderTest, AnUnchangedRunIsTakenFromTheKeysCache) {
  auto first = Build("FROM base\nRUN echo hi\n");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto again = Build("FROM base\nRUN echo hi\n");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(host_.runs.size(), 1u);  // not run a second time
  EXPECT_EQ(again->layers, first->layers);
  EXPECT_EQ(again->steps_run, 0);
  auto other = Build("FROM base\nRUN echo other\n");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(host_.runs.size(), 2u);
}

TEST_F(BuilderTest, AFailedRunNamesItsStepExitCodeAndLogAndCachesNothing) {
  host_.exit_code = 3;
  auto built = Build("FROM base\nRUN false\n");
  ASSERT_FALSE(built.ok());
  const json& d = built.status().details();
  EXPECT_EQ(d.value("code", ""), "step_failed");
  EXPECT_EQ(d.value("exitCode", 0), 3);
  EXPECT_NE(built.status().message().find("exit code 3"), std::string::npos);
  EXPECT_TRUE(host_.cache.empty());
}

TEST_F(BuilderTest, ASandboxThatStopsIsTheBuildsError) {
  host_.fail_next = Status(Code::kStartupFailed, "the build sandbox stopped during the step");
  auto built = Build("FROM base\nRUN sleep 1\n");
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), Code::kStartupFailed);
  EXPECT_TRUE(host_.cache.empty());
}

TEST_F(BuilderTest, AnUnknownBaseIsNotFound) {
  auto built = Build("FROM nosuch\nRUN true\n");
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), Code::kImageNotFound);
  EXPECT_TRUE(host_.runs.empty());
}

TEST_F(BuilderTest, CopyFromANamedContextReadsThatUploadAndRebuildFromRunsTheRestAgain) {
  std::string tar = dir_.path() + "/piece.tar.gz";
  WriteTar(tar, {TarEntry{"app", 'd', "", 0755}, TarEntry{"app/x.txt", 'f', "from the piece\n"},
                 TarEntry{"app/link", 'l', "x.txt"}});
  Sha256Digest digest = Sha256Digest::Of("piece");
  host_.contexts[digest.hex()] = tar;
  auto with_piece = [&](ImageRequest& req) { req.named_contexts = {{"piece", digest}}; };
  const std::string file = "FROM base\nCOPY --from=piece app /dest/\nRUN echo hi\n";
  auto built = Build(file, with_piece);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  ASSERT_EQ(built->layers.size(), 3u);
  std::string copied = host_.Layers().LayerDir(built->layers[1]);
  EXPECT_EQ(testing::ReadFile(copied + "/dest/x.txt"), "from the piece\n");
  EXPECT_EQ(std::filesystem::read_symlink(copied + "/dest/link"), "x.txt");  // kept a link
  ASSERT_EQ(host_.runs.size(), 1u);
  // Again, the RUN (step 3) asked to run though cached; the COPY is cached.
  auto again = Build(file, [&](ImageRequest& req) {
    with_piece(req);
    req.rebuild_from_step = 3;
  });
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(host_.runs.size(), 2u);
  EXPECT_EQ(again->steps_cached, 2);  // FROM and the COPY
  // Without the context, a COPY --from of that name is an image's (none here).
  EXPECT_FALSE(Build(file).ok());
}

TEST_F(BuilderTest, ACachedCopyAndAKnownWorkdirFlattenNoRoot) {
  std::string tar = dir_.path() + "/piece.tar.gz";
  WriteTar(tar, {TarEntry{"app", 'd', "", 0755}, TarEntry{"app/x.txt", 'f', "x\n"}});
  Sha256Digest digest = Sha256Digest::Of("piece");
  host_.contexts[digest.hex()] = tar;
  auto with_piece = [&](ImageRequest& req) { req.named_contexts = {{"piece", digest}}; };
  // /dest is the COPY's own directory (the top layer's); /nowhere is in no layer.
  const std::string file =
      "FROM base\nRUN echo hi\nCOPY --from=piece app /dest/\nWORKDIR /dest\nWORKDIR /nowhere\n";
  auto built = Build(file, with_piece);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  ASSERT_EQ(built->layers.size(), 4u);  // base, RUN, COPY, the missing WORKDIR's directory
  EXPECT_TRUE(
      std::filesystem::is_directory(host_.Layers().LayerDir(built->layers[3]) + "/nowhere"));
  EXPECT_EQ(built->config.working_dir, "/nowhere");
  const std::string roots = dir_.path() + "/store/roots";
  for (const auto& e : std::filesystem::directory_iterator(roots)) std::filesystem::remove_all(e);
  // Built again from the cache, no step reads a root: none is flattened.
  auto again = Build(file, with_piece);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->layers, built->layers);
  EXPECT_EQ(host_.runs.size(), 1u);
  EXPECT_TRUE(std::filesystem::is_empty(roots));
}

}  // namespace
}  // namespace images_builder_test
}  // namespace kiln::images
