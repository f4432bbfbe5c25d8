#include "images/layers/oci_layout.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <functional>
#include <vector>

#include "common/digest.h"
#include "images/layers/flatten.h"
#include "images/layers/layer_unpack.h"
#include "unit/images/layers/layer_test_util.h"
#include "unit/support/tar_writer.h"
#include "unit/support/temp_dir.h"

namespace kiln::images {
namespace images_oci_layout_test {
namespace {

using layer_testing::ReadAll;
using layer_testing::WriteAll;
using nlohmann::json;
using testutil::TarWriter;
using testutil::TempDir;

constexpr const char* kOciManifest = "application/vnd.oci.image.manifest.v1+json";
constexpr const char* kOciIndex = "application/vnd.oci.image.index.v1+json";
constexpr const char* kOciConfig = "application/vnd.oci.image.config.v1+json";
constexpr const char* kGzipLayer = "application/vnd.oci.image.layer.v1.tar+gzip";

// An OCI layout written by hand: blobs/sha256/<hex> and index.json.
class LayoutBuilder {
 public:
  explicit LayoutBuilder(std::string dir) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_ + "/blobs/sha256");
    WriteAll(dir_ + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  }
  // Stores `data` as a blob; its descriptor.
  json Blob(const std::string& data, const std::string& media_type) {
    std::string hex = Sha256Hex(data);
    WriteAll(dir_ + "/blobs/sha256/" + hex, data);
    return {{"mediaType", media_type}, {"digest", "sha256:" + hex}, {"size", data.size()}};
  }
  json BlobFile(const std::string& path, const std::string& media_type) {
    return Blob(ReadAll(path), media_type);
  }
  // A vector, not a json: `Index({desc})` with a json parameter is an
  // array of one under GCC but a copy of desc under clang.
  void Index(const std::vector<json>& descriptors) {
    WriteAll(dir_ + "/index.json",
             json{{"schemaVersion", 2}, {"manifests", json(descriptors)}}.dump());
  }
  std::string BlobPath(const json& desc) const {
    return dir_ + "/blobs/sha256/" + desc["digest"].get<std::string>().substr(7);
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

json ConfigJson(const std::vector<std::string>& diff_ids) {
  json ids = json::array();
  for (const auto& d : diff_ids) ids.push_back("sha256:" + d);
  return {{"architecture", "amd64"},
          {"os", "linux"},
          {"config",
           {{"Env", {"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}},
            {"User", "1000:1000"},
            {"WorkingDir", "/app"},
            {"Cmd", {"python", "main.py"}},
            {"Entrypoint", {"/entry.sh"}},
            {"ExposedPorts", {{"8000/tcp", json::object()}, {"53/udp", json::object()}}},
            {"Labels", {{"org.example", "yes"}}},
            {"StopSignal", "SIGINT"}}},
          {"rootfs", {{"type", "layers"}, {"diff_ids", ids}}},
          {"history", json::array()}};
}

class OciLayoutTest : public ::testing::Test {
 protected:
  // Two gzip layers; fills descriptors and diff ids.
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      std::string tar = tmp_ / ("l" + std::to_string(i) + ".tar");
      {
        TarWriter w(tar);
        w.File("layer" + std::to_string(i), "content " + std::to_string(i));
        if (i == 1) w.File(".wh.layer0", "");
      }
      diff_ids_.push_back(FileSha256Hex(tar));
      ASSERT_EQ(std::system(("gzip -n " + tar).c_str()), 0);
      layers_.push_back(layout_.BlobFile(tar + ".gz", kGzipLayer));
    }
  }
  json Manifest(const json& config_desc, const json& layers) {
    return {{"schemaVersion", 2},
            {"mediaType", kOciManifest},
            {"config", config_desc},
            {"layers", layers}};
  }
  json WriteImage(const json& config) {
    json config_desc = layout_.Blob(config.dump(), kOciConfig);
    return layout_.Blob(Manifest(config_desc, layers_).dump(), kOciManifest);
  }

  TempDir tmp_;
  LayoutBuilder layout_{tmp_ / "layout"};
  std::vector<json> layers_;
  std::vector<std::string> diff_ids_;
};

TEST_F(OciLayoutTest, IndexManifestConfig) {
  json manifest = WriteImage(ConfigJson(diff_ids_));
  manifest["annotations"] = {{"org.opencontainers.image.ref.name", "latest"}};
  layout_.Index({manifest});

  auto image = ReadOciLayout(layout_.dir());
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->manifest_digest, manifest["digest"]);
  ASSERT_EQ(image->layers.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(image->layers[i].digest.str(), layers_[i]["digest"]);
    EXPECT_EQ(image->layers[i].media_type, kGzipLayer);
    EXPECT_EQ(image->layers[i].size, layers_[i]["size"].get<uint64_t>());
    EXPECT_EQ(image->layers[i].blob_path, layout_.BlobPath(layers_[i]));
    EXPECT_EQ(image->layers[i].diff_id.hex(), diff_ids_[i]);
  }
  const OciConfig& c = image->config;
  EXPECT_EQ(c.env, (std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}));
  EXPECT_EQ(c.user, "1000:1000");
  EXPECT_EQ(c.working_dir, "/app");
  EXPECT_EQ(c.cmd, (std::vector<std::string>{"python", "main.py"}));
  EXPECT_EQ(c.entrypoint, (std::vector<std::string>{"/entry.sh"}));
  EXPECT_EQ(c.exposed_ports, (std::vector<std::string>{"53/udp", "8000/tcp"}));
  EXPECT_EQ(c.labels.at("org.example"), "yes");
  EXPECT_EQ(c.stop_signal, "SIGINT");

  // What the image manager does next: unpack each layer checked against the
  // manifest and the config, then flatten.
  std::vector<std::string> dirs;
  for (const OciLayer& l : image->layers) {
    dirs.push_back(tmp_ / ("layers/" + l.diff_id.hex()));
    auto stats =
        UnpackLayer(l.blob_path, dirs.back(),
                    {.expected_blob_sha256 = l.digest.str(), .expected_diff_id = l.diff_id.hex()});
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  }
  ASSERT_TRUE(Flatten(dirs, tmp_ / "root").ok());
  EXPECT_FALSE(layer_testing::Exists(tmp_ / "root/layer0"));
  EXPECT_EQ(ReadAll(tmp_ / "root/layer1"), "content 1");
}

TEST_F(OciLayoutTest, ManifestListPicksLinuxAmd64) {
  json arm_config = ConfigJson(diff_ids_);
  arm_config["architecture"] = "arm64";
  arm_config["config"]["User"] = "arm";
  json arm = WriteImage(arm_config);
  arm["platform"] = {{"os", "linux"}, {"architecture", "arm64"}};
  json amd = WriteImage(ConfigJson(diff_ids_));
  amd["platform"] = {{"os", "linux"}, {"architecture", "amd64"}};
  json list = layout_.Blob(
      json{{"schemaVersion", 2}, {"mediaType", kOciIndex}, {"manifests", {arm, amd}}}.dump(),
      kOciIndex);
  layout_.Index({list});

  auto image = ReadOciLayout(layout_.dir());
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->manifest_digest, amd["digest"]);
  EXPECT_EQ(image->config.user, "1000:1000");

  // Docker's manifest list type, without an amd64 entry.
  json only_arm =
      layout_.Blob(json{{"schemaVersion", 2},
                        {"mediaType", "application/vnd.docker.distribution.manifest.list.v2+json"},
                        {"manifests", {arm}}}
                       .dump(),
                   "application/vnd.docker.distribution.manifest.list.v2+json");
  layout_.Index({only_arm});
  auto none = ReadOciLayout(layout_.dir());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("linux/amd64"), std::string::npos);
}

TEST_F(OciLayoutTest, DockerSchema2Accepted) {
  json config_desc =
      layout_.Blob(ConfigJson(diff_ids_).dump(), "application/vnd.docker.container.image.v1+json");
  json layers = json::array();
  for (json l : layers_) {
    l["mediaType"] = "application/vnd.docker.image.rootfs.diff.tar.gzip";
    layers.push_back(l);
  }
  json manifest = Manifest(config_desc, layers);
  manifest["mediaType"] = "application/vnd.docker.distribution.manifest.v2+json";
  layout_.Index({layout_.Blob(manifest.dump(), manifest["mediaType"])});
  auto image = ReadOciLayout(layout_.dir());
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->layers.size(), 2u);
}

TEST_F(OciLayoutTest, DigestMismatchNamesTheBlob) {
  json config_desc = layout_.Blob(ConfigJson(diff_ids_).dump(), kOciConfig);
  json manifest = layout_.Blob(Manifest(config_desc, layers_).dump(), kOciManifest);
  layout_.Index({manifest});
  // Same size, other bytes.
  std::string config_path = layout_.BlobPath(config_desc);
  std::string text = ReadAll(config_path);
  text[text.find("1000:1000")] = '2';
  WriteAll(config_path, text);
  auto image = ReadOciLayout(layout_.dir());
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), Code::kInvalidImage);
  EXPECT_EQ(image.status().details()["blob"], config_desc["digest"]);
  EXPECT_NE(image.status().message().find(config_desc["digest"].get<std::string>()),
            std::string::npos);

  // A manifest blob whose size differs from its descriptor's.
  json bad_size = manifest;
  bad_size["size"] = manifest["size"].get<uint64_t>() + 1;
  layout_.Index({bad_size});
  EXPECT_EQ(ReadOciLayout(layout_.dir()).status().code(), Code::kInvalidImage);
}

TEST_F(OciLayoutTest, Schema1Refused) {
  json signed_manifest = layout_.Blob(
      json{{"schemaVersion", 1}, {"name", "library/old"}, {"fsLayers", json::array()}}.dump(),
      "application/vnd.docker.distribution.manifest.v1+prettyjws");
  layout_.Index({signed_manifest});
  auto image = ReadOciLayout(layout_.dir());
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), Code::kInvalidImage);
  EXPECT_NE(image.status().message().find("schema 1"), std::string::npos);

  // Without a media type anywhere, schemaVersion gives it away.
  json untyped = signed_manifest;
  untyped.erase("mediaType");
  layout_.Index({untyped});
  image = ReadOciLayout(layout_.dir());
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.status().message().find("schema 1"), std::string::npos);
}

TEST_F(OciLayoutTest, MalformedLayouts) {
  EXPECT_EQ(ReadOciLayout(tmp_ / "nothing").status().code(), Code::kNotFound);

  // One diff id short.
  layout_.Index({WriteImage(ConfigJson({diff_ids_[0]}))});
  auto short_ids = ReadOciLayout(layout_.dir());
  ASSERT_FALSE(short_ids.ok());
  EXPECT_NE(short_ids.status().message().find("diff_ids"), std::string::npos);

  // A digest that would be a path outside blobs/.
  layout_.Index({{{"mediaType", kOciManifest}, {"digest", "sha256:../../../etc/passwd"}}});
  EXPECT_EQ(ReadOciLayout(layout_.dir()).status().code(), Code::kInvalidImage);

  // A layer blob that is not there.
  json missing = layers_[1];
  missing["digest"] = "sha256:" + std::string(64, 'e');
  json config_desc = layout_.Blob(ConfigJson(diff_ids_).dump(), kOciConfig);
  layout_.Index({layout_.Blob(Manifest(config_desc, {layers_[0], missing}).dump(), kOciManifest)});
  auto absent = ReadOciLayout(layout_.dir());
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().details()["blob"], missing["digest"]);

  // An unknown layer type (e.g. encrypted).
  json encrypted = layers_[1];
  encrypted["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip+encrypted";
  layout_.Index(
      {layout_.Blob(Manifest(config_desc, {layers_[0], encrypted}).dump(), kOciManifest)});
  auto refused = ReadOciLayout(layout_.dir());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("layers[1]"), std::string::npos);

  WriteAll(layout_.dir() + "/index.json", "{not json");
  EXPECT_EQ(ReadOciLayout(layout_.dir()).status().code(), Code::kInvalidImage);
}

// umoci's own layout (umoci is installed with kiln's image tools).
TEST(OciLayoutUmociTest, ReadsUmociOutput) {
  if (std::system("command -v umoci >/dev/null 2>&1") != 0) GTEST_SKIP() << "no umoci";
  TempDir tmp;
  std::string dir = tmp / "layout";
  ASSERT_EQ(
      std::system(("umoci init --layout " + dir + " && umoci new --image " + dir + ":t").c_str()),
      0);
  auto image = ReadOciLayout(dir);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_TRUE(image->layers.empty());
  EXPECT_EQ(image->config, OciConfig{});
  EXPECT_EQ(image->manifest_digest.substr(0, 7), "sha256:");
}

TEST(OciConfigTest, RoundTripAndFieldErrors) {
  OciConfig c;
  c.env = {"A=1", "B=x=y"};
  c.user = "app";
  c.working_dir = "/w";
  c.cmd = {"sh", "-c", "echo hi"};
  c.entrypoint = {"/init"};
  c.exposed_ports = {"443/tcp", "80/tcp"};
  c.labels = {{"k", "v"}};
  c.stop_signal = "SIGTERM";
  json j = OciConfigToJson(c);
  EXPECT_EQ(j["ExposedPorts"], (json{{"443/tcp", json::object()}, {"80/tcp", json::object()}}));
  EXPECT_EQ(j["StopSignal"], "SIGTERM");
  auto back = ParseOciConfig(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, c);
  auto whole = ParseOciConfig(json{{"architecture", "amd64"}, {"config", j}});
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(*whole, c);
  EXPECT_EQ(OciConfigToJson(OciConfig{}), json::object());
  EXPECT_EQ(*ParseOciConfig(json{{"config", nullptr}, {"os", "linux"}}), OciConfig{});
  EXPECT_EQ(ParseOciConfig(json{{"Cmd", nullptr}})->cmd.size(), 0u);

  struct Bad {
    json config;
    const char* field;
  };
  for (const Bad& bad :
       {Bad{{{"Env", {"A=1", 7}}}, "config.Env[1]"}, Bad{{{"Env", {"NOEQUALS"}}}, "config.Env[0]"},
        Bad{{{"Cmd", "sh -c x"}}, "config.Cmd"}, Bad{{{"User", 0}}, "config.User"},
        Bad{{{"ExposedPorts", {"80/tcp"}}}, "config.ExposedPorts"},
        Bad{{{"Labels", {{"k", 1}}}}, "config.Labels.k"},
        Bad{{{"StopSignal", 15}}, "config.StopSignal"}}) {
    auto r = ParseOciConfig(bad.config);
    ASSERT_FALSE(r.ok()) << bad.config;
    EXPECT_EQ(r.status().code(), Code::kInvalidImage);
    EXPECT_EQ(r.status().details()["field"], bad.field) << r.status().message();
    EXPECT_NE(r.status().message().find(bad.field), std::string::npos);
  }
  EXPECT_FALSE(ParseOciConfig(json::array()).ok());
}

// What a registry's manifest and config may hold, as the stored-layers
// shortcut reads them (no blob fetched): every field is checked and named.
TEST_F(OciLayoutTest, ParseImageManifestRefusesCraftedConfigsNamingTheField) {
  json config = ConfigJson(diff_ids_);
  json config_desc = {{"mediaType", kOciConfig},
                      {"digest", "sha256:" + Sha256Hex(config.dump())},
                      {"size", config.dump().size()}};
  json manifest = Manifest(config_desc, layers_);
  auto good = ParseImageManifest(manifest, "sha256:m", config);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  ASSERT_EQ(good->layers.size(), 2u);
  EXPECT_EQ(good->layers[1].diff_id.hex(), diff_ids_[1]);
  EXPECT_EQ(good->layers[1].blob_path, "");

  struct Bad {
    std::function<void(json&, json&)> craft;
    std::string field;
  };
  const std::string id = diff_ids_[0];
  for (const Bad& bad : std::vector<Bad>{
           {[&]([[maybe_unused]] json&m, [[maybe_unused]] json&c) {
              c["rootfs"]["diff_ids"][0] = "sha256:" + id + "/..";
            },
            "rootfs.diff_ids[0]"},
           {[&]([[maybe_unused]] json&m, [[maybe_unused]] json&c) {
              c["rootfs"]["diff_ids"][0] = "sha256:" + id + "/pwn";
            },
            "rootfs.diff_ids[0]"},
           {[&]([[maybe_unused]] json&m, [[maybe_unused]] json&c) {
              c["rootfs"]["diff_ids"][1] = "sha256:../../" + id;
            },
            "rootfs.diff_ids[1]"},
           {[&]([[maybe_unused]] json&m, [[maybe_unused]] json&c) {
              c["rootfs"]["diff_ids"][0] = 42;
            },
            "rootfs.diff_ids[0]"},
           {[&]([[maybe_unused]] json&m, [[maybe_unused]] json&c) { c["rootfs"] = "layers"; },
            "rootfs"},
           {[&]([[maybe_unused]] json&m, [[maybe_unused]] json&c) {
              c["rootfs"]["diff_ids"] = {{"a", 1}};
            },
            "rootfs"},
           {[&]([[maybe_unused]] json&m, [[maybe_unused]] json&c) {
              c["rootfs"].erase("diff_ids");
            },
            "rootfs"},
           {[&]([[maybe_unused]] json&m, [[maybe_unused]] json&c) {
              m["layers"][0]["digest"] = "sha256:" + id + "/..";
            },
            "layers[0]"},
           {[&]([[maybe_unused]] json&m, [[maybe_unused]] json&c) { m["layers"][1] = 7; },
            "layers[1]"},
           {[&]([[maybe_unused]] json&m, [[maybe_unused]] json&c) { m["config"]["digest"] = 7; },
            "config.digest"},
           {[&]([[maybe_unused]] json&m, [[maybe_unused]] json&c) { c["config"]["Env"] = "A=1"; },
            "config.Env"},
       }) {
    json m = manifest, c = config;
    bad.craft(m, c);
    auto r = ParseImageManifest(m, "sha256:m", c);
    ASSERT_FALSE(r.ok()) << bad.field;
    EXPECT_EQ(r.status().code(), Code::kInvalidImage) << r.status().ToString();
    EXPECT_NE(r.status().ToString().find(bad.field), std::string::npos) << r.status().ToString();
  }
  EXPECT_FALSE(ParseImageManifest(json::array(), "sha256:m", config).ok());
  EXPECT_FALSE(ParseImageManifest(manifest, "sha256:m", json::array()).ok());
}

}  // namespace
}  // namespace images_oci_layout_test
}  // namespace kiln::images
