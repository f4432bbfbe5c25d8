// kiln CLI images: the build-context packer (byte-identical with the SDKs),
// .dockerignore rules, the build body, and `kiln image` against a canned
// daemon.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/image_context.h"
#include "common/digest.h"
#include "fakes/fake_daemon.h"
#include "images/context/dockerignore.h"
#include "unit/cli/cli_test_util.h"
#include "unit/support/temp_dir.h"

namespace kiln::cli {
namespace cli_image_test {
namespace {

namespace fs = std::filesystem;
using testutil::TempDir;
using json = nlohmann::json;
using testutil::CannedServer;
using testutil::CliRun;
using testutil::RunCaptured;
using testutil::VerbArgs;

// The same tree and digest as sdk/python/tests/test_images_client.py and
// sdk/js/test/unit/images.test.mjs.
constexpr char kGoldenDigest[] =
    "sha256:503240a6176a064c996f3ac1b1bcbcf8e935eabd5a831e008af9220ff3b6c68d";
constexpr char kId[] = "0b0e6a7e-1c5a-4c39-9a43-2f1d8e0c9a11";

void Put(const fs::path& root, const std::string& rel, const std::string& data,
         mode_t mode = 0644) {
  fs::create_directories((root / rel).parent_path());
  std::ofstream(root / rel, std::ios::binary) << data;
  ::chmod((root / rel).c_str(), mode);
}

void MakeTree(const fs::path& root) {
  Put(root, "Dockerfile", "FROM base\nCOPY . /app\n");
  Put(root, ".dockerignore", "# comment\n*.log\nbuild/\n!keep.log\nsecret*\n**/tmp\n");
  Put(root, "app.py", "print(1)\n", 0755);
  Put(root, "a.log", "x");
  Put(root, "keep.log", "k");
  Put(root, "build/out.bin", "out");
  Put(root, "src/main.c", "int main(){}\n");
  Put(root, "src/tmp/x", "x");
  Put(root, "secret.txt", "s");
  std::string big;
  for (int i = 0; i < 70000; ++i) big += static_cast<char>(i % 251);
  Put(root, "big.bin", big, 0600);
  const std::string d(60, 'd');
  Put(root, "src/deep/" + d + "/" + std::string(60, 'e') + ".txt", "long");
  fs::create_symlink("app.py", root / "link");
  for (const std::string& dir :
       std::vector<std::string>{"build", "src", "src/tmp", "src/deep", "src/deep/" + d})
    ::chmod((root / dir).c_str(), 0755);
  ::chmod(root.c_str(), 0755);
}

TEST(ImageContext, PackMatchesTheSdksByteForByte) {
  TempDir dir;
  MakeTree(dir.path());
  Result<PackedContext> packed = PackContext(dir.path());
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  EXPECT_EQ(packed->digest, "sha256:" + Sha256Hex(packed->bytes));
  EXPECT_EQ(packed->bytes.substr(0, 10), std::string("\x1f\x8b\x08\0\0\0\0\0\0\x03", 10));
  EXPECT_EQ(packed->digest, kGoldenDigest);
  // Ignored files do not change it; a mode does.
  Put(dir.path(), "a.log", "changed");
  EXPECT_EQ(PackContext(dir.path())->digest, kGoldenDigest);
  ::chmod((dir / "app.py").c_str(), 0700);
  EXPECT_NE(PackContext(dir.path())->digest, kGoldenDigest);
}

TEST(ImageContext, StoredGzipFramesBlocks) {
  const std::string empty = StoredGzip("");
  EXPECT_EQ(empty.size(), 10u + 5u + 8u);
  EXPECT_EQ(empty.substr(10, 5), std::string("\x01\x00\x00\xff\xff", 5));
  const std::string big = StoredGzip(std::string(70000, 'a'));
  EXPECT_EQ(big.size(), 10u + 5u + 65535u + 5u + (70000u - 65535u) + 8u);
  EXPECT_EQ(big[10], '\0');  // first block not final
}

TEST(ImageContext, ErrorsNameThePath) {
  TempDir dir;
  Result<PackedContext> none = PackContext(dir / "nope");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("nope"), std::string::npos);
  fs::create_symlink(std::string(101, 't'), dir / "far");
  Result<PackedContext> far = PackContext(dir.path());
  ASSERT_FALSE(far.ok());
  EXPECT_NE(far.status().message().find("far"), std::string::npos);
}

// The packer uses the builder's matcher (kiln::images::DockerIgnore); the
// cases the SDKs' matchers are tested on too.
TEST(DockerIgnoreRules, DockerSemantics) {
  using images::DockerIgnore;
  Result<DockerIgnore> ig =
      DockerIgnore::Parse("*.log\n!keep.log\nnode_modules\n**/cache\n/docs/*.md\nsub/**/x?.txt\n");
  ASSERT_TRUE(ig.ok());
  EXPECT_TRUE(ig->Excluded("a.log"));
  EXPECT_FALSE(ig->Excluded("keep.log"));
  EXPECT_FALSE(ig->Excluded("dir/a.log"));
  EXPECT_TRUE(ig->Excluded("node_modules/pkg/index.js"));
  EXPECT_TRUE(ig->Excluded("a/b/cache/f"));
  EXPECT_TRUE(ig->Excluded("docs/readme.md"));
  EXPECT_FALSE(ig->Excluded("docs/sub/readme.md"));
  EXPECT_TRUE(ig->Excluded("sub/a/b/x2.txt"));
  EXPECT_FALSE(ig->Excluded("sub/x10.txt"));
  EXPECT_TRUE(ig->HasExceptions());
  Result<DockerIgnore> bad = DockerIgnore::Parse("ok\n[abc\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().message();
}

TEST(ImageBuildBodyTest, RecipeFromFlags) {
  ParsedArgs args;
  args.flags["tag"] = {"data:v1", "data:latest"};
  args.flags["from"] = {"python:3.12"};
  args.flags["pip"] = {"pandas", "numpy"};
  args.flags["start"] = {"serve"};
  args.flags["ready-port"] = {"8000"};
  args.flags["allow-host"] = {"pypi.org"};
  args.flags["memory"] = {"2048"};
  args.flags["no-cache"] = {""};
  const json body = ImageBuildBody(args, std::nullopt, std::nullopt);
  EXPECT_EQ(body, json::parse(R"({"name": "data", "tags": ["v1", "latest"],
      "recipe": {"base": "python:3.12", "pip": ["pandas", "numpy"]},
      "start": {"command": "serve", "readyPort": 8000}, "network": {"allow": ["pypi.org"]},
      "build": {"memoryMiB": 2048}, "cache": false})"));
}

TEST(ImageBuildBodyTest, UsageErrors) {
  ParsedArgs none;
  none.flags["from"] = {"x"};
  EXPECT_THROW(ImageBuildBody(none, std::nullopt, std::nullopt), UsageError);  // no -t
  ParsedArgs two;
  two.flags["tag"] = {"a:1", "b:2"};
  two.flags["from"] = {"x"};
  EXPECT_THROW(ImageBuildBody(two, std::nullopt, std::nullopt), UsageError);
  ParsedArgs mixed;
  mixed.flags["tag"] = {"a"};
  mixed.flags["pip"] = {"x"};
  EXPECT_THROW(ImageBuildBody(mixed, std::string("FROM x\n"), std::nullopt), UsageError);
  ParsedArgs nothing;
  nothing.flags["tag"] = {"a"};
  EXPECT_THROW(ImageBuildBody(nothing, std::nullopt, std::nullopt), UsageError);
  ParsedArgs ready;
  ready.flags["tag"] = {"a"};
  ready.flags["from"] = {"x"};
  ready.flags["ready-port"] = {"80"};
  EXPECT_THROW(ImageBuildBody(ready, std::nullopt, std::nullopt), UsageError);
}

TEST(ImageIds, UuidOrRef) {
  EXPECT_TRUE(IsImageId(kId));
  EXPECT_FALSE(IsImageId("web:v1"));
  EXPECT_FALSE(IsImageId("0b0e6a7e-1c5a-4c39-9a43-2f1d8e0c9a1z"));
}

// --- against a canned daemon -----------------------------------------------

class DaemonEnv {
 public:
  explicit DaemonEnv(const std::string& url) {
    ::setenv("KILN_API_URL", url.c_str(), 1);
    ::setenv("KILN_API_KEY", "kiln_test", 1);
  }
  ~DaemonEnv() {
    ::unsetenv("KILN_API_URL");
    ::unsetenv("KILN_API_KEY");
  }
};

std::string Info(const std::string& state, const std::string& extra = "") {
  return std::string(R"({"id": ")") + kId + R"(", "kind": "image", "name": "web", "version": 3,
      "tags": [], "state": ")" +
         state + R"(", "stepsTotal": 2)" + extra + "}";
}
std::string BodyOf(const std::string& request) {
  return request.substr(request.find("\r\n\r\n") + 4);
}

TEST(CliImage, BuildDirPacksUploadsFollowsAndPrints) {
  TempDir dir;
  MakeTree(dir.path());
  const std::string missing = std::string(R"({"missing": [")") + kGoldenDigest + "\"]}";
  CannedServer server(
      {{200, missing},
       {200, R"({"digest": "x", "sizeBytes": 1})"},
       {202, Info("queued")},
       {200, R"({"lines": [{"n": 1, "stream": "system", "step": 1, "text": "step 1/2 FROM base"}],
                                "nextAfter": 1, "state": "building", "done": false})"},
       {200, R"({"lines": [{"n": 2, "stream": "stdout", "step": 2, "text": "copied"}],
                                "nextAfter": 2, "state": "ready", "done": true})"},
       {200, Info("ready")}});
  DaemonEnv env(server.url());
  CliRun r = RunCaptured({"image", "build", dir.path(), "-t", "web:v1", "--build-arg", "A=1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, std::string("step 1/2 FROM base\ncopied\n") + kId + " web:3\n");
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 6u);
  EXPECT_TRUE(reqs[0].starts_with("POST /v1/images/context/missing ")) << reqs[0];
  EXPECT_EQ(json::parse(BodyOf(reqs[0])),
            json::parse(std::string(R"({"digests": [")") + kGoldenDigest + "\"]}"));
  EXPECT_TRUE(reqs[1].starts_with(std::string("PUT /v1/images/context/") + kGoldenDigest + " "))
      << reqs[1];
  EXPECT_NE(reqs[1].find("Content-Type: application/gzip"), std::string::npos);
  EXPECT_TRUE(reqs[2].starts_with("POST /v1/images ")) << reqs[2];
  EXPECT_EQ(
      json::parse(BodyOf(reqs[2])),
      json::parse(
          std::string(R"({"name": "web", "tags": ["v1"], "dockerfile": "FROM base\nCOPY . /app\n",
                "context": ")") +
          kGoldenDigest + R"(", "buildArgs": {"A": "1"}})"));
  EXPECT_TRUE(
      reqs[3].starts_with(std::string("GET /v1/images/") + kId + "/logs?after=0&follow=true "))
      << reqs[3];
  EXPECT_TRUE(
      reqs[4].starts_with(std::string("GET /v1/images/") + kId + "/logs?after=1&follow=true "))
      << reqs[4];
}

TEST(CliImage, FailedBuildExitsOneWithTheError) {
  CannedServer server(
      {{202, Info("queued")},
       {200, R"({"lines": [], "nextAfter": 0, "state": "failed", "done": true})"},
       {200, Info("failed", R"(, "error": {"code": "build_step_failed", "message": "exit 2",
                                  "step": 2, "line": 5, "instruction": "RUN make", "exitCode": 2})")}});
  DaemonEnv env(server.url());
  CliRun r = RunCaptured({"image", "build", "-t", "web", "--from", "debian", "--apt", "make"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("build failed at step 2 (Dockerfile line 5) [RUN make]: exit 2 (exit 2)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(json::parse(BodyOf(server.requests()[0])),
            json::parse(R"({"name": "web", "recipe": {"base": "debian", "apt": ["make"]}})"));
}

TEST(CliImage, TagResolvesARefFirst) {
  CannedServer server({{200, Info("ready")}, {200, Info("ready", R"(, "tags2": 1)")}});
  DaemonEnv env(server.url());
  CliRun r = RunCaptured({"image", "tag", "web@3", "prod"});
  EXPECT_EQ(r.status, 0) << r.err;
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_TRUE(reqs[0].starts_with("GET /v1/images/resolve?ref=web%403 ")) << reqs[0];
  EXPECT_TRUE(reqs[1].starts_with(std::string("POST /v1/images/") + kId + ":tag ")) << reqs[1];
  EXPECT_EQ(json::parse(BodyOf(reqs[1])), json::parse(R"({"tag": "prod"})"));
}

TEST(CliImage, RegistryLsAndUsage) {
  CannedServer server(
      {{200, R"({"data": [{"registry": "ghcr.io", "username": "me", "createdAt": "t"}]})"}});
  DaemonEnv env(server.url());
  CliRun r = RunCaptured({"image", "registry", "ls"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("ghcr.io"), std::string::npos);
  EXPECT_NE(RunCaptured({"image", "registry", "rm"}).status, 0);
  EXPECT_NE(RunCaptured({"image", "build", "-t"}).status, 0);
  EXPECT_NE(RunCaptured({"image", "build", "a", "b", "-t", "x"}).status, 0);
}

TEST(CliImage, SandboxCreateSendsImage) {
  CannedServer server({{200, R"({"id": "sbx_new", "kind": "sandbox", "state": "running"})"}});
  DaemonEnv env(server.url());
  CliRun r = RunCaptured({"sandbox", "create", "--image", "web:v1", "--wait", "0"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(BodyOf(server.requests()[0]))["image"], "web:v1");
}

}  // namespace
}  // namespace cli_image_test
}  // namespace kiln::cli
