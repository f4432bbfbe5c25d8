#include "egress/proxy_request.h"

#include <gtest/gtest.h>

namespace kiln::egress {
namespace egress_proxy_request_test {
namespace {

using Result = ProxyRequestParser::Result;

TEST(EgressProxyRequestTest, ConnectGivesHostPortAndEarlyBytes) {
  ProxyRequestParser p;
  ASSERT_EQ(p.Feed("CONNECT pkgs.test:443 HTTP/1.1\r\nHost: pkgs.test:443\r\n\r\n\x16\x03"),
            Result::kComplete);
  EXPECT_TRUE(p.request().connect);
  EXPECT_EQ(p.request().method, "CONNECT");
  EXPECT_EQ(p.request().host, "pkgs.test");
  EXPECT_EQ(p.request().port, 443);
  EXPECT_EQ(p.request().upstream_head, "");
  EXPECT_EQ(p.rest(), "\x16\x03");
}

TEST(EgressProxyRequestTest, HeadMayArriveInPieces) {
  ProxyRequestParser p;
  EXPECT_EQ(p.Feed("CONNECT [::1]:8"), Result::kIncomplete);
  EXPECT_EQ(p.Feed("443 HTTP/1.1\r\n"), Result::kIncomplete);
  ASSERT_EQ(p.Feed("\r\n"), Result::kComplete);
  EXPECT_EQ(p.request().host, "::1");
  EXPECT_EQ(p.request().port, 8443);
}

TEST(EgressProxyRequestTest, AbsoluteUriBecomesOriginFormWithoutProxyHeaders) {
  ProxyRequestParser p;
  ASSERT_EQ(p.Feed("POST http://API.example.test:8080/a/b?x=1#frag HTTP/1.1\r\n"
                   "Host: API.example.test:8080\r\nProxy-Connection: keep-alive\r\n"
                   "Proxy-Authorization: Basic eDp5\r\nContent-Length: 4\r\n\r\nbody"),
            Result::kComplete);
  const ProxyRequest& r = p.request();
  EXPECT_FALSE(r.connect);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.host, "API.example.test");  // normalized later, with the policy check
  EXPECT_EQ(r.port, 8080);
  EXPECT_EQ(r.upstream_head.rfind("POST /a/b?x=1 HTTP/1.1\r\n", 0), 0u) << r.upstream_head;
  EXPECT_NE(r.upstream_head.find("Host: API.example.test:8080\r\n"), std::string::npos);
  EXPECT_NE(r.upstream_head.find("Connection: close\r\n"), std::string::npos);
  EXPECT_NE(r.upstream_head.find("Content-Length: 4\r\n"), std::string::npos);
  EXPECT_EQ(r.upstream_head.find("Proxy-"), std::string::npos);
  EXPECT_EQ(r.upstream_head.substr(r.upstream_head.size() - 4), "\r\n\r\n");
  EXPECT_EQ(p.rest(), "body");
}

// Regression (found by egress_gate_test): a head whose first piece ends
// after a whole line was refused once the rest arrived, because Feed() gave
// Beast the lines it had already consumed again.
TEST(EgressProxyRequestTest, HeadSplitAfterAWholeLine) {
  for (const char* second : {"\r\n", "Host: a.com\r\n\r\n"}) {
    ProxyRequestParser p;
    EXPECT_EQ(p.Feed("CONNECT a.com:443 HTTP/1.1\r\n"), Result::kIncomplete);
    EXPECT_EQ(p.Feed(second), Result::kComplete) << p.error();
  }
}

TEST(EgressProxyRequestTest, DefaultsPortAndPath) {
  ProxyRequestParser p;
  ASSERT_EQ(p.Feed("GET http://pkgs.test HTTP/1.1\r\n\r\n"), Result::kComplete);
  EXPECT_EQ(p.request().port, 80);
  EXPECT_EQ(p.request().upstream_head.rfind("GET / HTTP/1.1\r\n", 0), 0u);
  // No Host header: the URI's authority is sent as the Host.
  EXPECT_NE(p.request().upstream_head.find("Host: pkgs.test\r\n"), std::string::npos);
}

TEST(EgressProxyRequestTest, RefusesWhatIsNotAProxyRequest) {
  for (const char* head : {
           "GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n",     // origin-form: not for a proxy
           "GET https://pkgs.test/ HTTP/1.1\r\n\r\n",         // TLS goes through CONNECT
           "CONNECT pkgs.test HTTP/1.1\r\n\r\n",              // no port
           "CONNECT pkgs.test:0 HTTP/1.1\r\n\r\n",            // port out of range
           "CONNECT pkgs.test:70000 HTTP/1.1\r\n\r\n",        //
           "CONNECT ::1:443 HTTP/1.1\r\n\r\n",                // v6 needs brackets
           "GET http://user:pw@pkgs.test/ HTTP/1.1\r\n\r\n",  // user information
           "GET http://:80/ HTTP/1.1\r\n\r\n",                // no host
           "NOT HTTP AT ALL\r\n\r\n",
       }) {
    ProxyRequestParser p;
    EXPECT_EQ(p.Feed(head), Result::kBad) << head;
    EXPECT_FALSE(p.error().empty()) << head;
    EXPECT_EQ(p.Feed("more"), Result::kBad);  // stays bad
  }
}

TEST(EgressProxyRequestTest, RefusesAnEndlessHead) {
  ProxyRequestParser p;
  Result r = p.Feed("GET http://pkgs.test/ HTTP/1.1\r\n");
  std::string header = "X-Filler: " + std::string(1000, 'a') + "\r\n";
  for (int i = 0; i < 200 && r == Result::kIncomplete; ++i) r = p.Feed(header);
  EXPECT_EQ(r, Result::kBad);
}

TEST(EgressProxyRequestTest, AnswersCarryTheReason) {
  std::string a = ProxyAnswer(403, "not-allowed", "kiln: egress refused");
  EXPECT_EQ(a.rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u) << a;
  EXPECT_NE(a.find("X-Kiln-Egress: not-allowed\r\n"), std::string::npos);
  EXPECT_NE(a.find("Connection: close\r\n"), std::string::npos);
  EXPECT_NE(a.find("Content-Length: 21\r\n"), std::string::npos);
  EXPECT_EQ(a.substr(a.size() - 21), "kiln: egress refused\n");
  EXPECT_EQ(ConnectEstablished(), "HTTP/1.1 200 Connection Established\r\n\r\n");
}

}  // namespace
}  // namespace egress_proxy_request_test
}  // namespace kiln::egress
