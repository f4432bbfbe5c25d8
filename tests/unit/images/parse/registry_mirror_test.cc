// --registry-mirror and --registry-mirror-only values (src/images/parse/registry_mirror.h).
#include <gtest/gtest.h>

#include "images/parse/registry_mirror.h"

namespace kiln::images {
namespace images_registry_mirror_test {
namespace {

ImageRef Ref(const std::string& text) { return *ParseImageRef(text); }

TEST(RegistryMirrorTest, DockerHubOnALoopbackMirrorKeepsThePathTagAndDigest) {
  auto m = ParseRegistryMirror("docker.io=http://127.0.0.1:5000");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->registry, "docker.io");
  EXPECT_EQ(m->host, "127.0.0.1:5000");
  EXPECT_TRUE(m->plain_http);
  EXPECT_FALSE(m->only);
  EXPECT_TRUE(m->Mirrors(Ref("ubuntu:24.04")));
  EXPECT_FALSE(m->Mirrors(Ref("ghcr.io/a/b:1")));
  EXPECT_EQ(m->On(Ref("ubuntu:24.04")).String(), "127.0.0.1:5000/library/ubuntu:24.04");
  std::string digest = "sha256:" + std::string(64, 'a');
  EXPECT_EQ(m->On(Ref("python:3.12@" + digest)).String(),
            "127.0.0.1:5000/library/python:3.12@" + digest);
  EXPECT_EQ(m->String(), "docker.io=http://127.0.0.1:5000");
}

TEST(RegistryMirrorTest, DockerHubsOtherNamesAndAPathPrefix) {
  for (const char* name : {"index.docker.io", "registry-1.docker.io", "Docker.IO"}) {
    auto m = ParseRegistryMirror(std::string(name) + "=https://mirror.example/hub/");
    ASSERT_TRUE(m.ok()) << name << ": " << m.status().message();
    EXPECT_EQ(m->registry, "docker.io") << name;
    EXPECT_EQ(m->prefix, "hub");
    EXPECT_FALSE(m->plain_http);
    EXPECT_EQ(m->On(Ref("alpine")).String(), "mirror.example/hub/library/alpine:latest");
  }
  auto ghcr = ParseRegistryMirror("ghcr.io=https://[::1]:8443");
  ASSERT_TRUE(ghcr.ok()) << ghcr.status().message();
  EXPECT_EQ(ghcr->On(Ref("ghcr.io/org/app:2")).String(), "[::1]:8443/org/app:2");
}

TEST(RegistryMirrorTest, RefusesWhatCannotBeUsed) {
  for (const char* bad : {
           "",                                 // nothing
           "http://127.0.0.1:5000",            // no REGISTRY=
           "=http://127.0.0.1:5000",           // an empty registry
           "ubuntu=http://127.0.0.1:5000",     // an image, not a registry's domain
           "docker.io=127.0.0.1:5000",         // no scheme
           "docker.io=ftp://mirror.example",   // another scheme
           "docker.io=http://mirror.example",  // plain HTTP off loopback
           "docker.io=http://10.0.0.5:5000",   // plain HTTP to a private address
           "docker.io=https://user@mirror.example", "docker.io=https://mirror.example?x=1",
           "docker.io=https://",                    // no host
           "docker.io=https://mirror/hub",          // a host that is not a registry's
           "docker.io=https://mirror.example/Hub",  // a prefix that is not a path
       }) {
    auto m = ParseRegistryMirror(bad);
    EXPECT_FALSE(m.ok()) << "'" << bad << "' was taken";
    if (!m.ok()) EXPECT_NE(m.status().message().find("REGISTRY=URL"), std::string::npos) << bad;
  }
}

TEST(RegistryMirrorTest, TheFlagsOneMirrorPerRegistryAndMirrorOnlyNamingOne) {
  auto both = ParseRegistryMirrors({"docker.io=http://127.0.0.1:5000", "quay.io=https://q.example"},
                                   {"index.docker.io"});
  ASSERT_TRUE(both.ok()) << both.status().message();
  ASSERT_EQ(both->size(), 2u);
  EXPECT_TRUE((*both)[0].only);
  EXPECT_FALSE((*both)[1].only);

  auto twice =
      ParseRegistryMirrors({"docker.io=http://127.0.0.1:5000", "docker.io=https://m.example"}, {});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("--registry-mirror"), std::string::npos);
  EXPECT_NE(twice.status().message().find("one per registry"), std::string::npos);

  auto unmirrored = ParseRegistryMirrors({"docker.io=http://127.0.0.1:5000"}, {"ghcr.io"});
  ASSERT_FALSE(unmirrored.ok());
  EXPECT_NE(unmirrored.status().message().find("--registry-mirror-only 'ghcr.io'"),
            std::string::npos);

  auto bad = ParseRegistryMirrors({"docker.io"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().message().starts_with("--registry-mirror '"));
}

}  // namespace
}  // namespace images_registry_mirror_test
}  // namespace kiln::images
