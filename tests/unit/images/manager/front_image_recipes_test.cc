// The fronts' default images as kiln ships them and as an operator gives
// them (src/images/manager/front_image_recipes.h).
#include "images/manager/front_image_recipes.h"

#include <gtest/gtest.h>

#include "images/parse/recipe.h"
#include "unit/support/images_test_util.h"
#include "unit/support/temp_dir.h"

namespace kiln::images {
namespace images_front_image_recipes_test {
namespace {

using testing::WriteFile;
using testutil::TempDir;

TEST(FrontImageRecipesTest, TheHostsMirrorsAndCaBundleAreRead) {
  TempDir etc;
  WriteFile(etc.path() + "/ssl/certs/ca-certificates.crt", "-----BEGIN CERTIFICATE-----\nx\n");
  WriteFile(etc.path() + "/apt/sources.list.d/debian.sources",
            "Types: deb\nURIs: http://deb.example.org/debian https://Mirror.Example:8443/d\n"
            "Suites: bookworm\n\nTypes: deb\nURIs: http://deb.example.org/debian-security\n");
  WriteFile(etc.path() + "/apt/sources.list",
            "# a comment\ndeb [arch=amd64] http://user@old.example.net/debian bookworm main\n"
            "deb-src http://src.example.net/debian bookworm main\n");
  FrontImageHost host = ReadFrontImageHost(etc.path());
  EXPECT_EQ(host.ca_bundle, "-----BEGIN CERTIFICATE-----\nx\n");
  EXPECT_EQ(host.debian_mirrors,
            (std::vector<std::string>{"deb.example.org", "mirror.example", "old.example.net"}));
  FrontImageHost none = ReadFrontImageHost(etc.path() + "/nothing");
  EXPECT_TRUE(none.ca_bundle.empty() && none.debian_mirrors.empty());
}

TEST(FrontImageRecipesTest, KilnShipsTheInterpreterAndTheLanguageImage) {
  FrontImageHost host{"PEM", {"deb.example.org"}};
  auto shipped = ShippedFrontImages("sf-langs", host);
  ASSERT_EQ(shipped.size(), 2u);
  const auto& interpreter = shipped[0];
  EXPECT_EQ(interpreter.name, "code-interpreter-v1");
  auto build = RecipeToBuild(interpreter.recipe);
  ASSERT_TRUE(build.ok()) << build.status().message();
  EXPECT_NE(build->dockerfile.find("--cert /etc/ssl/certs/kiln-host-ca.pem"), std::string::npos);
  EXPECT_NE(build->dockerfile.find("--cafile /etc/ssl/certs/kiln-host-ca.pem typescript@5"),
            std::string::npos);
  for (const char* kernel : {"ipykernel", "bash_kernel", "jjava", "r-cran-irkernel"})
    EXPECT_NE(build->dockerfile.find(kernel), std::string::npos) << kernel;
  ASSERT_EQ(build->context.size(), 1u);
  EXPECT_EQ(build->context[0].bytes, "PEM");
  EXPECT_TRUE(interpreter.network.internet);
  EXPECT_EQ(interpreter.network.ToJson()["allow"],
            nlohmann::json(
                {"deb.example.org", "pypi.org", "files.pythonhosted.org", "registry.npmjs.org"}));
  const auto& languages = shipped[1];
  EXPECT_EQ(languages.name, "sf-langs");
  ASSERT_TRUE(RecipeToBuild(languages.recipe).ok());
  EXPECT_EQ(languages.network.ToJson()["allow"], nlohmann::json({"deb.example.org"}));
  // Without a CA bundle, pip trusts the image's own; without mirrors, the
  // language image's apt step is offline (and says so when it fails).
  auto bare = ShippedFrontImages("sf", FrontImageHost{});
  EXPECT_EQ(RecipeToBuild(bare[0].recipe)->dockerfile.find("--cert"), std::string::npos);
  EXPECT_EQ(RecipeToBuild(bare[0].recipe)->dockerfile.find("--cafile"), std::string::npos);
  EXPECT_FALSE(bare[1].network.internet);
}

TEST(FrontImageRecipesTest, AnOperatorsFileReplacesOneOrAddsOne) {
  TempDir dir;
  std::string file = dir.path() + "/tiny.json";
  WriteFile(file, R"({"recipe": {"commands": ["echo tiny > /opt/tiny"]},
                      "network": {"allow": ["example.com"]}, "buildTimeoutSeconds": 120})");
  auto d = ReadFrontImageFlag("code-interpreter-v1=" + file);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->build_timeout_seconds, 120);
  auto all = WithOverrides(ShippedFrontImages("sf", FrontImageHost{}), {*d});
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].name, "code-interpreter-v1");
  EXPECT_EQ(all[1].recipe["commands"][0], "echo tiny > /opt/tiny");
  WriteFile(dir.path() + "/bad.json", R"({"recipe": {"apt": ["a; rm -rf /"]}})");
  for (const std::string& bad : {std::string("nofile"), "x=" + dir.path() + "/missing.json",
                                 "Bad Name=" + file, "x=" + dir.path() + "/bad.json"}) {
    auto r = ReadFrontImageFlag(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(r.status().message().starts_with("--front-image '")) << r.status().message();
  }
}

}  // namespace
}  // namespace images_front_image_recipes_test
}  // namespace kiln::images
