#include "api/terminal_tickets.h"

#include <gtest/gtest.h>

namespace kiln::api {
namespace {

TEST(TerminalTicketsTest, OpensItsOwnSandboxOnce) {
  TerminalTickets tickets;
  auto t = tickets.Issue("key_a", "sbx1", 1000);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->token.size(), 4u + 64u);
  EXPECT_EQ(t->token.rfind("tkt_", 0), 0u);
  EXPECT_EQ(t->expires_at_ms, 1000 + TerminalTickets::kLifetimeMs);
  EXPECT_EQ(tickets.Redeem(t->token, "sbx1", 2000), std::optional<std::string>("key_a"));
  EXPECT_EQ(tickets.Redeem(t->token, "sbx1", 2000), std::nullopt);  // spent
}

TEST(TerminalTicketsTest, AnotherSandboxSpendsItWithoutOpening) {
  TerminalTickets tickets;
  auto t = tickets.Issue("key_a", "sbx1", 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(tickets.Redeem(t->token, "sbx2", 1), std::nullopt);
  EXPECT_EQ(tickets.Redeem(t->token, "sbx1", 2), std::nullopt);
}

TEST(TerminalTicketsTest, ExpiresAfterItsLifetime) {
  TerminalTickets tickets;
  auto t = tickets.Issue("key_a", "sbx1", 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(tickets.Redeem(t->token, "sbx1", TerminalTickets::kLifetimeMs), std::nullopt);
}

TEST(TerminalTicketsTest, UnknownTokensOpenNothing) {
  TerminalTickets tickets;
  ASSERT_TRUE(tickets.Issue("key_a", "sbx1", 0).ok());
  EXPECT_EQ(tickets.Redeem("", "sbx1", 1), std::nullopt);
  EXPECT_EQ(tickets.Redeem("tkt_00", "sbx1", 1), std::nullopt);
}

TEST(TerminalTicketsTest, AKeyHoldsABoundedNumber) {
  TerminalTickets tickets;
  for (size_t i = 0; i < TerminalTickets::kMaxPerKey; ++i)
    ASSERT_TRUE(tickets.Issue("key_a", "sbx1", 0).ok());
  auto refused = tickets.Issue("key_a", "sbx1", 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kRateLimited);
  EXPECT_TRUE(tickets.Issue("key_b", "sbx1", 0).ok());  // others are not held up
  // Expired ones free their room.
  EXPECT_TRUE(tickets.Issue("key_a", "sbx1", TerminalTickets::kLifetimeMs).ok());
  EXPECT_EQ(tickets.outstanding(), 1u);
}

TEST(TerminalTicketsTest, FoundAmongTheOfferedProtocols) {
  EXPECT_EQ(TicketOfProtocols("runtime.terminal.v1, runtime.ticket.tkt_ab"),
            std::optional<std::string>("tkt_ab"));
  EXPECT_EQ(TicketOfProtocols("runtime.ticket.x,runtime.terminal.v1"),
            std::optional<std::string>("x"));
  EXPECT_EQ(TicketOfProtocols("runtime.terminal.v1"), std::nullopt);
  EXPECT_EQ(TicketOfProtocols("runtime.ticket."), std::nullopt);
  EXPECT_EQ(TicketOfProtocols(""), std::nullopt);
}

}  // namespace
}  // namespace kiln::api
