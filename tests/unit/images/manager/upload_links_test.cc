// Upload links (src/images/manager/upload_links.h): a link lets in exactly
// what it was signed for, until it expires.
#include "images/manager/upload_links.h"

#include <gtest/gtest.h>

namespace kiln::images {
namespace images_upload_links_test {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;

TEST(UploadLinksTest, ALinkLetsInWhatItWasSignedForUntilItExpires) {
  UploadLinks links("a signing key");
  int64_t expires = kNow + 60'000;
  std::string sig = links.Sign("key_a", "task", "abc", expires);
  EXPECT_TRUE(links.Check("key_a", "task", "abc", expires, sig, kNow));
  EXPECT_FALSE(links.Check("key_b", "task", "abc", expires, sig, kNow));      // another key
  EXPECT_FALSE(links.Check("key_a", "other", "abc", expires, sig, kNow));     // another template
  EXPECT_FALSE(links.Check("key_a", "task", "abd", expires, sig, kNow));      // another file
  EXPECT_FALSE(links.Check("key_a", "task", "abc", expires + 1, sig, kNow));  // its expiry moved
  EXPECT_FALSE(links.Check("key_a", "task", "abc", expires, sig, expires));   // expired
  EXPECT_FALSE(links.Check("key_a", "task", "abc", expires, sig + "0", kNow));
  // Another kilnd's key signs other links; a link may not outlive its lifetime.
  EXPECT_FALSE(UploadLinks("another key").Check("key_a", "task", "abc", expires, sig, kNow));
  int64_t far = kNow + UploadLinks::kTtlMs + 1;
  EXPECT_FALSE(
      links.Check("key_a", "task", "abc", far, links.Sign("key_a", "task", "abc", far), kNow));
}

TEST(UploadLinksTest, FieldsCannotBeShiftedIntoEachOther) {
  UploadLinks links("k");
  int64_t expires = kNow + 1000;
  std::string sig = links.Sign("key_a", "t\nx", "h", expires);
  EXPECT_FALSE(links.Check("key_a", "t\nx", "h", expires, sig, kNow));  // a separator refused
  EXPECT_FALSE(links.Check("key_a\nt", "x", "h", expires, sig, kNow));
  EXPECT_FALSE(links.Check("", "t", "h", expires, links.Sign("", "t", "h", expires), kNow));
  EXPECT_FALSE(UploadLinks("").Check("key_a", "t", "h", expires,
                                     UploadLinks("").Sign("key_a", "t", "h", expires), kNow));
}

}  // namespace
}  // namespace images_upload_links_test
}  // namespace kiln::images
