// Integers read from untrusted or damaged JSON (common/json_integer.h and
// the agent protocol's decoders): a float is refused, never cast. Each case
// is an input the fuzzers found (tests/fuzz/regressions).
#include "common/json_integer.h"

#include <gtest/gtest.h>

#include "control/sandbox_record.h"
#include "engine/agent_answer.h"
#include "proto/ops.h"
#include "store/snapshot_store.h"

namespace kiln {
namespace json_integer_test {
namespace {

using nlohmann::json;

TEST(JsonIntegerTest, ReadsIntegersAndRefusesFloats) {
  json j = {{"a", 7}, {"b", 1.18447e+21}, {"c", nullptr}, {"d", "7"}};
  EXPECT_EQ(JsonIntegerOr<int64_t>(j, "a", 0), 7);
  EXPECT_EQ(JsonIntegerOr<int64_t>(j, "c", 5), 5);
  EXPECT_EQ(JsonIntegerOr<int64_t>(j, "missing", 5), 5);
  EXPECT_THROW(JsonIntegerOr<uint64_t>(j, "b", 0), json::type_error);
  EXPECT_THROW(JsonIntegerOr<int>(j, "d", 0), json::type_error);
  EXPECT_THROW(JsonIntegerAt<int>(j, "missing"), json::out_of_range);
}

// fuzz_config_json: a sandbox record whose meter held 1.18e21 as cpuNs.
TEST(JsonIntegerTest, ADamagedSandboxRecordIsRefusedNotCast) {
  json record = {
      {"id", "sb_1"}, {"state", "running"}, {"createdMs", 1}, {"meter", {{"cpuNs", 1.18447e+21}}}};
  EXPECT_THROW(record.get<control::SandboxRecord>(), json::type_error);
  record["meter"]["cpuNs"] = 12;
  EXPECT_EQ(record.get<control::SandboxRecord>().meter.cpu_ns, 12u);
  record["expiresMs"] = 1e300;
  EXPECT_THROW(record.get<control::SandboxRecord>(), json::type_error);
}

TEST(JsonIntegerTest, ADamagedSnapshotRecordIsRefusedNotCast) {
  json record = {{"id", "snap_1"},        {"name", nullptr},    {"labels", json::object()},
                 {"sourceSandboxId", ""}, {"vcpu", 1},          {"memoryMiB", 512},
                 {"diskMiB", 1024},       {"retentionDays", 7}, {"createdMs", 1},
                 {"expiresMs", 2},        {"sizeBytes", 3},     {"captureMs", 4}};
  EXPECT_EQ(record.get<store::SnapshotRecord>().size_bytes, 3u);
  record["sizeBytes"] = -1e30;
  EXPECT_THROW(record.get<store::SnapshotRecord>(), json::type_error);
}

// An agent (inside the sandbox, so not trusted) answering an exit code of
// 1e30 gets a malformed-answer error, not undefined behaviour.
TEST(JsonIntegerTest, AnAgentsFloatForAnIntegerIsAMalformedAnswer) {
  auto exit = engine::DecodeAnswer<proto::ExecExit>(json{{"exitCode", 1e30}});
  ASSERT_FALSE(exit.ok());
  EXPECT_NE(exit.status().message().find("float"), std::string::npos) << exit.status().ToString();
  auto fine = engine::DecodeAnswer<proto::ExecExit>(json{{"exitCode", 3}});
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  EXPECT_EQ(fine->exit_code, 3);
}

}  // namespace
}  // namespace json_integer_test
}  // namespace kiln
