// The real egress Gate over a FakeAgentChannel: the test plays the agent
// (egress.listen announces connections, egress.attach carries one) and the
// client behind it. Names resolve through a fake resolver.
//
// Not covered here: carrying bytes to an allowed host. Every address a test
// can listen on without root is the host's own or loopback, which the proxy
// refuses whatever the policy says; the integration tests reach their hosts
// in a network namespace (tests/integration/nethosts.py).
#include "egress/egress.h"

#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "fakes/fake_agent.h"
#include "fakes/fake_engine.h"  // WaitUntil
#include "proto/frame.h"
#include "store/db.h"

namespace kiln::egress {
namespace egress_gate_test {
namespace {

using fakes::FakeAgentChannel;
using fakes::FakeAgentOp;

class FakeResolver : public Resolver {
 public:
  FakeResolver(std::map<std::string, std::string> names, std::atomic<int>* lookups)
      : names_(std::move(names)), lookups_(lookups) {}

  Result<std::vector<network::Address>> Resolve(const std::string& host) override {
    ++*lookups_;
    auto it = names_.find(host);
    if (it == names_.end()) return Status(Code::kNotFound, "Name or service not known");
    return std::vector<network::Address>{*network::ParseIpLiteral(it->second)};
  }

 private:
  std::map<std::string, std::string> names_;
  std::atomic<int>* lookups_;
};

network::Policy Rules(const nlohmann::json& j) {
  network::PolicyError error;
  auto p = network::ParsePolicy(j, "", &error);
  EXPECT_TRUE(p) << error.path << ": " << error.message;
  return p.value_or(network::Policy{});
}

class EgressGateTest : public ::testing::Test {
 protected:
  ~EgressGateTest() override {
    if (gate_) gate_->Close();
  }

  void Open(const network::Policy& policy, EgressOptions options = {}) {
    options.connect_timeout_ms = 200;
    // An allowed dial goes to a closed port on loopback: no test sends a
    // packet off this machine, and the dial still fails as an unrouted
    // address would.
    options.dial_for_test = [this](const network::Address& a) {
      std::lock_guard lock(dialled_mu_);
      dialled_.push_back(a.ToString());
      return *network::ParseIpLiteral("127.0.0.1");
    };
    if (options.head_timeout_ms == EgressOptions{}.head_timeout_ms) options.head_timeout_ms = 5000;
    service_ = std::make_unique<EgressService>(
        std::make_unique<FakeResolver>(
            std::map<std::string, std::string>{{"example.com", "10.1.2.3"},
                                               {"api.example.com", "192.0.2.10"}},
            &lookups_),
        log_, options);
    gate_ = Gate::Open(*service_, "sb1", channel_, policy);
    listen_ = channel_->WaitOp("egress.listen", 1000);
    ASSERT_TRUE(listen_);
  }

  // The agent announces a client connection; the gate attaches to it.
  std::shared_ptr<FakeAgentOp> Connect(uint64_t conn) {
    EXPECT_TRUE(listen_->Event({{"conn", conn}}));
    auto op = channel_->WaitOp("egress.attach", 1000);
    EXPECT_TRUE(op);
    if (op) {
      EXPECT_EQ(op->request().value("conn", uint64_t{0}), conn);
    }
    return op;
  }

  // The client sends `head`; returns the proxy's whole answer, then hangs up.
  std::string Ask(const std::shared_ptr<FakeAgentOp>& op, const std::string& head) {
    if (!op) return "";
    op->Data(proto::kStdout, head);
    std::string answer = op->ReadUntilEnd(2000);
    op->Respond(nlohmann::json::object());
    return answer;
  }

  // The log's entries of sb1, once `n` are there.
  std::vector<store::EgressEntry> Logged(size_t n) {
    std::vector<store::EgressEntry> entries;
    for (int i = 0; i < 1000 && (entries = log_.List("sb1", 0, 100)).size() < n; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return entries;
  }

  store::Db db_{":memory:"};
  store::EgressLogStore log_{db_};
  std::atomic<int> lookups_{0};
  std::mutex dialled_mu_;
  std::vector<std::string> dialled_;  // what dial_for_test was asked for
  std::unique_ptr<EgressService> service_;
  std::shared_ptr<FakeAgentChannel> channel_ = std::make_shared<FakeAgentChannel>();
  std::shared_ptr<Gate> gate_;
  std::shared_ptr<FakeAgentOp> listen_;
};

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

TEST_F(EgressGateTest, InternetOffIsRefusedWithoutALookupAndLogged) {
  Open(network::Policy{});
  auto answer = Ask(Connect(1), "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n");
  EXPECT_TRUE(StartsWith(answer, "HTTP/1.1 403")) << answer;
  EXPECT_NE(answer.find("X-Kiln-Egress: internet-off"), std::string::npos) << answer;
  EXPECT_EQ(lookups_, 0);  // a lookup leaks the name too
  auto log = Logged(1);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].verdict, "internet-off");
  EXPECT_EQ(log[0].method, "CONNECT");
  EXPECT_EQ(log[0].host, "example.com");
  EXPECT_EQ(log[0].port, 443);
  EXPECT_EQ(log[0].closed_by, "proxy");
  EXPECT_FALSE(log[0].open);
}

TEST_F(EgressGateTest, EachRefusalIsLoggedWithItsVerdict) {
  Open(Rules({{"internet", true},
              {"allow", {"example.com", "*.example.com"}},
              {"deny", {"bad.example.com"}}}));
  struct Case {
    std::string head, status, verdict, address;
    int lookups;  // after this case
  };
  const Case cases[] = {
      {"CONNECT other.org:443 HTTP/1.1\r\n\r\n", "403", "not-allowed", "", 0},
      {"CONNECT bad.example.com:443 HTTP/1.1\r\n\r\n", "403", "denied", "", 0},
      // Allowed by name, but it resolves to a private address.
      {"CONNECT example.com:443 HTTP/1.1\r\n\r\n", "403", "private-address", "10.1.2.3", 1},
      {"GET http://127.0.0.1:8080/ HTTP/1.1\r\n\r\n", "403", "private-address", "127.0.0.1", 1},
      {"CONNECT nx.example.com:443 HTTP/1.1\r\n\r\n", "502", "resolve-failed", "", 2},
  };
  uint64_t conn = 0;
  for (const Case& c : cases) {
    auto answer = Ask(Connect(++conn), c.head);
    EXPECT_TRUE(StartsWith(answer, "HTTP/1.1 " + c.status)) << c.head << answer;
    EXPECT_NE(answer.find("X-Kiln-Egress: " + c.verdict), std::string::npos) << answer;
    EXPECT_EQ(lookups_, c.lookups) << c.head;
  }
  auto log = Logged(std::size(cases));
  ASSERT_EQ(log.size(), std::size(cases));
  for (size_t i = 0; i < log.size(); ++i) {
    EXPECT_EQ(log[i].verdict, cases[i].verdict) << cases[i].head;
    EXPECT_EQ(log[i].address, cases[i].address) << cases[i].head;
    EXPECT_EQ(log[i].sandbox_id, "sb1");
  }
  EXPECT_EQ(log[3].method, "GET");
  EXPECT_EQ(log[3].port, 8080);
}

TEST_F(EgressGateTest, AnAllowedNameIsDialledAtTheAddressItWasCheckedAt) {
  // 192.0.2.0/24 (TEST-NET-1) is not refused by policy; the dial goes to
  // dial_for_test's closed port and fails, which shows the proxy allowed it
  // and dialled the address it checked.
  Open(Rules({{"internet", true}, {"allow", {"api.example.com"}}}));
  auto answer = Ask(Connect(1), "CONNECT api.example.com:1 HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(StartsWith(answer, "HTTP/1.1 502")) << answer;
  EXPECT_NE(answer.find("X-Kiln-Egress: connect-failed"), std::string::npos) << answer;
  auto log = Logged(1);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].verdict, "connect-failed");
  EXPECT_EQ(log[0].address, "192.0.2.10");
  EXPECT_EQ(lookups_, 1);
  std::lock_guard lock(dialled_mu_);
  EXPECT_EQ(dialled_, std::vector<std::string>{"192.0.2.10"});
}

TEST_F(EgressGateTest, APolicyChangeAppliesToAConnectionStillSendingItsHead) {
  Open(Rules({{"internet", true}}));
  auto op = Connect(1);
  ASSERT_TRUE(op);
  // (Split inside the request line: a head split after a whole line is
  // refused as malformed, see DISABLED_HeadSplitAfterAWholeLine.)
  op->Data(proto::kStdout, "CONNECT api.example.com:4");
  ASSERT_TRUE(fakes::WaitUntil([&] { return op->acked() > 0; }));  // the gate is reading it
  gate_->SetPolicy(network::Policy{});                             // internet off
  auto answer = Ask(op, "43 HTTP/1.1\r\n\r\n");
  EXPECT_NE(answer.find("X-Kiln-Egress: internet-off"), std::string::npos) << answer;
  EXPECT_EQ(lookups_, 0);
  auto log = Logged(1);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].verdict, "internet-off");
}

TEST_F(EgressGateTest, AClientThatSendsNoHeadIsAnswered) {
  EgressOptions options;
  options.head_timeout_ms = 100;
  Open(Rules({{"internet", true}}), options);
  auto op = Connect(1);
  ASSERT_TRUE(op);
  std::string answer = op->ReadUntilEnd(2000);
  op->Respond(nlohmann::json::object());
  EXPECT_TRUE(StartsWith(answer, "HTTP/1.1 408")) << answer;
  auto log = Logged(1);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].verdict, "bad-request");
  EXPECT_EQ(log[0].method, "?");
}

TEST_F(EgressGateTest, WhatIsNotAProxyRequestIsAnswered400) {
  Open(Rules({{"internet", true}}));
  auto answer = Ask(Connect(1), "GET /relative HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(StartsWith(answer, "HTTP/1.1 400")) << answer;
  auto log = Logged(1);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].verdict, "bad-request");
}

TEST_F(EgressGateTest, CloseEndsTheListenOpAndCutsOpenConnections) {
  Open(Rules({{"internet", true}}));
  auto op = Connect(1);
  ASSERT_TRUE(op);
  op->Data(proto::kStdout, "CONNECT api.example.com:4");
  ASSERT_TRUE(fakes::WaitUntil([&] { return op->acked() > 0; }));
  auto t0 = std::chrono::steady_clock::now();
  gate_->Close();  // returns once no thread of the gate is left
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_TRUE(listen_->cancelled());
  EXPECT_TRUE(op->cancelled());
  // Nothing listens any more.
  EXPECT_FALSE(listen_->Event({{"conn", 2}}));
  EXPECT_EQ(channel_->Count("egress.attach"), 1);
  EXPECT_TRUE(Logged(0).empty());  // it never got to a decision
  gate_->Close();                  // idempotent
}

TEST_F(EgressGateTest, AChannelThatEndsEndsTheListener) {
  Open(Rules({{"internet", true}}));
  auto op = Connect(1);
  ASSERT_TRUE(op);
  channel_->Die();
  EXPECT_TRUE(op->WaitOver(1000));
  auto t0 = std::chrono::steady_clock::now();
  gate_->Close();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_FALSE(listen_->cancelled());  // it ended with the channel, not by a cancel
  EXPECT_TRUE(listen_->over());
}

TEST_F(EgressGateTest, ConnectionsBeyondTheLimitAreClosedAtOnce) {
  EgressOptions options;
  options.max_open_per_sandbox = 1;
  Open(Rules({{"internet", true}}), options);
  auto first = Connect(1);
  ASSERT_TRUE(first);
  auto second = Connect(2);
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->WaitOver(1000));
  EXPECT_TRUE(second->cancelled());  // attached and cancelled: the agent closes it
  EXPECT_FALSE(first->over());       // the first one is still served
  auto answer = Ask(first, "CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n");
  EXPECT_NE(answer.find("X-Kiln-Egress: private-address"), std::string::npos) << answer;
}

}  // namespace
}  // namespace egress_gate_test
}  // namespace kiln::egress
