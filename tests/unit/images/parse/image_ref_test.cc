// Image references (src/images/parse/image_ref.h): Docker's normalisation, ports,
// digests, the malformed ones, loopback registries, and kiln's own names.
#include <gtest/gtest.h>

#include <string>

#include "images/parse/image_ref.h"

namespace kiln::images {
namespace images_ref_test {
namespace {

const std::string kHex(64, 'a');

struct Case {
  const char* text;
  const char* domain;
  const char* path;
  const char* tag;     // nullptr: none
  const char* digest;  // nullptr: none
  const char* canonical;
};

TEST(ImageRefTest, ParsesAndNormalisesAsDocker) {
  const std::string digest = "sha256:" + kHex;
  const std::string with_digest = "python@" + digest;
  const std::string tag_and_digest = "localhost:5000/a/b:v1@" + digest;
  const Case cases[] = {
      {"python", "docker.io", "library/python", nullptr, nullptr,
       "docker.io/library/python:latest"},
      {"python:3.12", "docker.io", "library/python", "3.12", nullptr,
       "docker.io/library/python:3.12"},
      {"library/python:3.12-slim", "docker.io", "library/python", "3.12-slim", nullptr,
       "docker.io/library/python:3.12-slim"},
      {"docker.io/python", "docker.io", "library/python", nullptr, nullptr,
       "docker.io/library/python:latest"},
      {"index.docker.io/user/app", "docker.io", "user/app", nullptr, nullptr,
       "docker.io/user/app:latest"},
      {"user/app:v2", "docker.io", "user/app", "v2", nullptr, "docker.io/user/app:v2"},
      {"ghcr.io/org/team/app:1.0", "ghcr.io", "org/team/app", "1.0", nullptr,
       "ghcr.io/org/team/app:1.0"},
      {"localhost/app", "localhost", "app", nullptr, nullptr, "localhost/app:latest"},
      {"localhost:5000/app:dev", "localhost:5000", "app", "dev", nullptr, "localhost:5000/app:dev"},
      {"Registry.Example.COM:443/a_b/c__d/e-f/g--h.i", "Registry.Example.COM:443",
       "a_b/c__d/e-f/g--h.i", nullptr, nullptr,
       "Registry.Example.COM:443/a_b/c__d/e-f/g--h.i:latest"},
      {"[::1]:5000/app", "[::1]:5000", "app", nullptr, nullptr, "[::1]:5000/app:latest"},
      {"127.0.0.1:5000/app:x", "127.0.0.1:5000", "app", "x", nullptr, "127.0.0.1:5000/app:x"},
      {with_digest.c_str(), "docker.io", "library/python", nullptr, digest.c_str(), nullptr},
      {tag_and_digest.c_str(), "localhost:5000", "a/b", "v1", digest.c_str(), nullptr},
  };
  for (const Case& c : cases) {
    Result<ImageRef> ref = ParseImageRef(c.text);
    ASSERT_TRUE(ref.ok()) << c.text << ": " << ref.status().ToString();
    EXPECT_EQ(ref->domain, c.domain) << c.text;
    EXPECT_EQ(ref->path, c.path) << c.text;
    EXPECT_EQ(ref->tag, c.tag ? std::optional<std::string>(c.tag) : std::nullopt) << c.text;
    EXPECT_EQ(ref->digest, c.digest ? std::optional<std::string>(c.digest) : std::nullopt)
        << c.text;
    if (c.canonical) {
      EXPECT_EQ(ref->String(), c.canonical) << c.text;
    }
    EXPECT_EQ(ref->Repository(), std::string(c.domain) + "/" + c.path);
  }
}

TEST(ImageRefTest, DigestFormsKeepTheirParts) {
  Result<ImageRef> only = ParseImageRef("python@sha256:" + kHex);
  ASSERT_TRUE(only.ok());
  EXPECT_EQ(only->String(), "docker.io/library/python@sha256:" + kHex);
  Result<ImageRef> both = ParseImageRef("python:3@sha256:" + kHex);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->String(), "docker.io/library/python:3@sha256:" + kHex);
  // The canonical form parses back to the same reference.
  Result<ImageRef> again = ParseImageRef(both->String());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *both);
}

TEST(ImageRefTest, RefusesMalformedReferencesSayingWhat) {
  struct Bad {
    std::string text;
    const char* says;
  };
  const Bad cases[] = {
      {"", "empty"},
      {"Python", "must be lowercase"},
      {"user/App", "must be lowercase"},
      {"python:", "tag ''"},
      {"python:.x", "tag '.x'"},
      {"python:" + std::string(129, 'a'), "tag"},
      {"python@sha256:abc", "64 lowercase hex"},
      {"python@sha256:" + std::string(64, 'A'), "64 lowercase hex"},
      {"python@md5:" + kHex, "is not sha256"},
      {"a//b", "empty component"},
      {"a/b/", "empty component"},
      {"-a", "component '-a' is invalid"},
      {"a_", "component 'a_' is invalid"},
      {"a___b", "component 'a___b' is invalid"},
      {"a..b", "component 'a..b' is invalid"},
      {"has space", "whitespace"},
      {"example.com:port/app", "port 'port' is not a number"},
      {"exa_mple.com/app", "not a valid host name"},
      {"-example.com/app", "not a valid host name"},
      {"[zz::1]:5000/app", "not a valid IPv6"},
      {"[::1/app", "malformed registry"},
      {"example.com:/app", "malformed registry"},
      {"example.com/" + std::string(250, 'a'), "longer than 255"},
  };
  for (const Bad& c : cases) {
    Result<ImageRef> ref = ParseImageRef(c.text);
    ASSERT_FALSE(ref.ok()) << c.text;
    EXPECT_EQ(ref.status().code(), Code::kInvalidRequest);
    EXPECT_NE(ref.status().message().find(c.says), std::string::npos)
        << c.text << " -> " << ref.status().message();
    EXPECT_EQ(ref.status().details()["reference"], c.text);
  }
}

TEST(ImageRefTest, DetectsLoopbackRegistries) {
  const char* loopback[] = {"localhost/a",      "localhost:5000/a", "127.0.0.1/a",
                            "127.0.0.1:5000/a", "127.1.2.3:80/a",   "[::1]/a",
                            "[::1]:5000/a",     "[0:0::1]:5000/a"};
  for (const char* text : loopback) {
    Result<ImageRef> ref = ParseImageRef(text);
    ASSERT_TRUE(ref.ok()) << text;
    EXPECT_TRUE(ref->IsLoopback()) << text;
  }
  const char* remote[] = {"python",
                          "ghcr.io/a",
                          "128.0.0.1:5000/a",
                          "10.0.0.1:5000/a",
                          "[::2]:5000/a",
                          "localhost.example.com/a",
                          "mylocalhost:5000/a"};
  for (const char* text : remote) {
    Result<ImageRef> ref = ParseImageRef(text);
    ASSERT_TRUE(ref.ok()) << text;
    EXPECT_FALSE(ref->IsLoopback()) << text;
  }
}

TEST(KilnImageRefTest, ParsesIdsNamesTagsAndVersions) {
  Result<KilnImageRef> id = ParseKilnImageRef("0b5e4c1a-9f3d-4e7a-8c2b-1d2e3f4a5b6c");
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(id->is_id);
  EXPECT_EQ(id->name, "0b5e4c1a-9f3d-4e7a-8c2b-1d2e3f4a5b6c");

  Result<KilnImageRef> name = ParseKilnImageRef("team/py-data");
  ASSERT_TRUE(name.ok());
  EXPECT_FALSE(name->is_id);
  EXPECT_EQ(name->name, "team/py-data");
  EXPECT_FALSE(name->tag.has_value());
  EXPECT_FALSE(name->version.has_value());

  Result<KilnImageRef> tagged = ParseKilnImageRef("py-data:Stable_1.0");
  ASSERT_TRUE(tagged.ok());
  EXPECT_EQ(tagged->name, "py-data");
  EXPECT_EQ(tagged->tag, "Stable_1.0");

  Result<KilnImageRef> versioned = ParseKilnImageRef("py-data@12");
  ASSERT_TRUE(versioned.ok());
  EXPECT_EQ(versioned->name, "py-data");
  EXPECT_EQ(versioned->version, 12);
}

TEST(KilnImageRefTest, RefusesBadPartsByName) {
  struct Bad {
    const char* text;
    const char* says;
  };
  const Bad cases[] = {
      {"", "image name is empty"},  {"Py", "must start with a lowercase"},
      {"py data", "may only hold"}, {"py:", "tag ''"},
      {"py:-x", "tag '-x'"},        {"py@0", "version '0'"},
      {"py@01", "version '01'"},    {"py@x", "version 'x'"},
      {"py@", "version ''"},        {"py@1234567890", "version"},
      {"py:a@1", "not both"},       {":tag", "image name is empty"},
  };
  for (const Bad& c : cases) {
    Result<KilnImageRef> ref = ParseKilnImageRef(c.text);
    ASSERT_FALSE(ref.ok()) << c.text;
    EXPECT_EQ(ref.status().code(), Code::kInvalidRequest);
    EXPECT_NE(ref.status().message().find(c.says), std::string::npos)
        << c.text << " -> " << ref.status().message();
  }
}

TEST(KilnImageRefTest, ValidatesNamesAndTags) {
  EXPECT_TRUE(ValidateImageName("a").ok());
  EXPECT_TRUE(ValidateImageName("0team/a.b_c-d").ok());
  EXPECT_TRUE(ValidateImageName(std::string(128, 'a')).ok());
  EXPECT_FALSE(ValidateImageName(std::string(129, 'a')).ok());
  EXPECT_FALSE(ValidateImageName("/a").ok());
  EXPECT_FALSE(ValidateImageName(".a").ok());
  EXPECT_FALSE(ValidateImageName("a:b").ok());
  EXPECT_TRUE(ValidateTag("_x").ok());
  EXPECT_TRUE(ValidateTag(std::string(128, 'T')).ok());
  EXPECT_FALSE(ValidateTag(std::string(129, 'T')).ok());
  EXPECT_FALSE(ValidateTag("").ok());
  EXPECT_FALSE(ValidateTag("a/b").ok());
  EXPECT_EQ(ValidateTag(".x").code(), Code::kInvalidRequest);
}

}  // namespace
}  // namespace images_ref_test
}  // namespace kiln::images
