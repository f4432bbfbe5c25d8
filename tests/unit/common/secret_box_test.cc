#include "common/secret_box.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "unit/support/temp_dir.h"

namespace kiln {
namespace secret_box_test {
namespace {

class SecretBoxTest : public ::testing::Test {
 protected:
  testutil::TempDir tmp_{"kiln-secret-test"};
  const std::string dir_ = tmp_.path();
};

TEST_F(SecretBoxTest, SealsAndUnsealsWithAKeyMadeOnceAndKeptPrivate) {
  auto box = SecretBox::Open(dir_ + "/secrets.key");
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/secrets.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 32);
  std::string sealed = box->Seal("hunter2");
  EXPECT_EQ(sealed.rfind("enc1:", 0), 0u);
  EXPECT_EQ(sealed.find("hunter2"), std::string::npos);
  EXPECT_NE(box->Seal("hunter2"), sealed);  // a fresh nonce each time
  EXPECT_EQ(box->Unseal(sealed), "hunter2");
  // The same key file again opens what it sealed.
  auto again = SecretBox::Open(dir_ + "/secrets.key");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->Unseal(sealed), "hunter2");
  // A text stored before sealing reads as it is; a damaged one does not open.
  EXPECT_EQ(box->Unseal("plain-password"), "plain-password");
  std::string damaged = sealed;
  damaged.back() = damaged.back() == '0' ? '1' : '0';
  EXPECT_EQ(box->Unseal(damaged), std::nullopt);
  EXPECT_EQ(box->Unseal("enc1:zz"), std::nullopt);
  // Another key does not open it.
  auto other = SecretBox::Open(dir_ + "/other.key");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->Unseal(sealed), std::nullopt);
}

TEST_F(SecretBoxTest, AKeyFileOfTheWrongSizeIsRefused) {
  std::ofstream(dir_ + "/short.key") << "too short";
  EXPECT_FALSE(SecretBox::Open(dir_ + "/short.key").ok());
}

}  // namespace
}  // namespace secret_box_test
}  // namespace kiln
