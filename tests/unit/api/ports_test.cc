// The pure parts of reaching a sandbox's ports (issue 28): the router's
// rest-of-path parameter and any-method routes, the target a server sees
// after /ports/{port}, and preview tokens (HMAC under a secret, expiry,
// rotation).
#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/port_proxy.h"
#include "api/router.h"
#include "common/time.h"
#include "fakes/fake_exchange.h"
#include "store/db.h"
#include "store/preview_store.h"

namespace kiln {
namespace ports_test {
namespace {

using api::TargetAfterSegments;
using store::PreviewStore;
using testutil::FakeExchange;

TEST(PortRoutesTest, RestOfPathAndAnyMethod) {
  api::Router r;
  std::string got;
  r.Add("*", "/v1/sandboxes/{id}/ports/{port}/{path...}", [&](api::Exchange& ex) {
    got = ex.method() + " " + ex.params["id"] + " " + ex.params["port"] + " [" + ex.params["path"] +
          "]";
  });
  for (const auto& [method, path, want] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"GET", "/v1/sandboxes/s1/ports/80/a/b/c", "GET s1 80 [a/b/c]"},
           {"PATCH", "/v1/sandboxes/s1/ports/80/", "PATCH s1 80 []"},
           {"DELETE", "/v1/sandboxes/s1/ports/80", "DELETE s1 80 []"}}) {
    got.clear();
    FakeExchange ex(method, path);
    r.Dispatch(ex);
    EXPECT_EQ(got, want) << path;
  }
  FakeExchange short_path("GET", "/v1/sandboxes/s1/ports");
  EXPECT_THROW(r.Dispatch(short_path), api::ApiError);
  EXPECT_EQ(r.PatternFor("/v1/sandboxes/s1/ports/80/x/y"),
            "/v1/sandboxes/{id}/ports/{port}/{path...}");
}

TEST(PortRoutesTest, TargetAfterThePortKeepsPathAndQueryAsTheyCame) {
  EXPECT_EQ(TargetAfterSegments("/v1/sandboxes/S/ports/80/a%20b/c?x=1&y", 5), "/a%20b/c?x=1&y");
  EXPECT_EQ(TargetAfterSegments("/v1/sandboxes/S/ports/80", 5), "/");
  EXPECT_EQ(TargetAfterSegments("/v1/sandboxes/S/ports/80?q=/x", 5), "/?q=/x");
  EXPECT_EQ(TargetAfterSegments("/v1/sandboxes/S/ports/80/", 5), "/");
}

TEST(PreviewTokenTest, ValidUntilExpiryUnderTheSecretOnly) {
  store::Db db(":memory:");
  PreviewStore previews(db);
  auto p = previews.Put("sb1", 8080, false, 60000);
  EXPECT_EQ(p.id.rfind("pv_", 0), 0u);
  int64_t now = NowMs();
  std::string token = PreviewStore::Token(p, now + 60000);
  EXPECT_TRUE(PreviewStore::TokenValid(p, token, now));
  EXPECT_FALSE(PreviewStore::TokenValid(p, token, now + 60001));  // expired
  // Another port's, another sandbox's record: the HMAC covers both.
  auto other = previews.Put("sb1", 8081, false, 60000);
  EXPECT_FALSE(PreviewStore::TokenValid(other, token, now));
  // Tampered expiry, garbage.
  std::string later = std::to_string(now + 999999) + token.substr(token.find('.'));
  EXPECT_FALSE(PreviewStore::TokenValid(p, later, now));
  for (const char* bad : {"", ".", "x.y", "123", "99999999999999999999.ab", "-5.ab"})
    EXPECT_FALSE(PreviewStore::TokenValid(p, bad, now)) << bad;
  // Rotation refuses every earlier token; putting again keeps the secret.
  auto again = previews.Put("sb1", 8080, true, 120000);
  EXPECT_TRUE(again.is_public);
  EXPECT_EQ(again.id, p.id);
  EXPECT_TRUE(PreviewStore::TokenValid(again, token, now));
  ASSERT_TRUE(previews.Rotate("sb1", 8080));
  auto rotated = *previews.Get("sb1", 8080);
  EXPECT_FALSE(PreviewStore::TokenValid(rotated, token, now));
  EXPECT_TRUE(PreviewStore::TokenValid(rotated, PreviewStore::Token(rotated, now + 1000), now));
  EXPECT_EQ(previews.List("sb1").size(), 2u);
  EXPECT_TRUE(previews.Delete("sb1", 8080));
  EXPECT_FALSE(previews.Get("sb1", 8080));
  EXPECT_FALSE(previews.Rotate("sb1", 8080));
}

}  // namespace
}  // namespace ports_test
}  // namespace kiln
