// envd's signed file URLs, against signatures E2B's Python SDK (e2b 2.63.0,
// e2b.sandbox.signature.get_signature) computed for the same inputs.
#include "api/e2b/envd/file_signature.h"

#include <gtest/gtest.h>

namespace kiln::api::e2b {
namespace {

TEST(EnvdFileSignature, MatchesTheSdks) {
  EXPECT_EQ(EnvdFileSignature("notes/a b.txt", "read", "user", "tok-123", std::nullopt),
            "v1_3SxjFkqUjnWmezA5o3I2s7nBRSmjwoiaVESV995LHrg");
  EXPECT_EQ(EnvdFileSignature("notes/a b.txt", "write", "", "tok-123", 1700000000),
            "v1_/2she197NbCCUFBhOfMs9G5iuHDJi7Nzvu7/ZuBDEnw");
}

TEST(EnvdFileSignature, ChecksTheOperationTokenAndExpiry) {
  std::string read = EnvdFileSignature("a.txt", "read", "", "tok", std::nullopt);
  EXPECT_EQ(CheckEnvdFileSignature("GET", "a.txt", "", read, std::nullopt, "tok", 0),
            FileSignature::kValid);
  // A read link opens no write, another path, user or sandbox.
  EXPECT_EQ(CheckEnvdFileSignature("POST", "a.txt", "", read, std::nullopt, "tok", 0),
            FileSignature::kInvalid);
  EXPECT_EQ(CheckEnvdFileSignature("GET", "b.txt", "", read, std::nullopt, "tok", 0),
            FileSignature::kInvalid);
  EXPECT_EQ(CheckEnvdFileSignature("GET", "a.txt", "root", read, std::nullopt, "tok", 0),
            FileSignature::kInvalid);
  EXPECT_EQ(CheckEnvdFileSignature("GET", "a.txt", "", read, std::nullopt, "other", 0),
            FileSignature::kInvalid);
  EXPECT_EQ(CheckEnvdFileSignature("DELETE", "a.txt", "", read, std::nullopt, "tok", 0),
            FileSignature::kInvalid);
  // The expiry is in the signed material: changing it breaks the signature;
  // a past one is refused only once the signature holds.
  std::string until = EnvdFileSignature("a.txt", "read", "", "tok", 100);
  EXPECT_EQ(CheckEnvdFileSignature("GET", "a.txt", "", until, "100", "tok", 99),
            FileSignature::kValid);
  EXPECT_EQ(CheckEnvdFileSignature("GET", "a.txt", "", until, "100", "tok", 101),
            FileSignature::kExpired);
  EXPECT_EQ(CheckEnvdFileSignature("GET", "a.txt", "", until, "200", "tok", 101),
            FileSignature::kInvalid);
  EXPECT_EQ(CheckEnvdFileSignature("GET", "a.txt", "", "v1_forged", "1", "tok", 101),
            FileSignature::kInvalid);
  EXPECT_EQ(CheckEnvdFileSignature("GET", "a.txt", "", until, "soon", "tok", 0),
            FileSignature::kBadExpiration);
  EXPECT_STREQ(FileSignatureError(FileSignature::kExpired), "signature is already expired");
}

}  // namespace
}  // namespace kiln::api::e2b
