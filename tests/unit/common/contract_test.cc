// Every value of common/contract.h against the OpenAPI document it stands
// for (src/api/kiln/openapi.json, compiled in): changing either side alone fails.
#include "common/contract.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "api/kiln/openapi.h"

namespace kiln::contract {
namespace contract_test {
namespace {

using nlohmann::json;

const json& Doc() {
  static const json doc = json::parse(api::v1::kOpenApiJson);
  return doc;
}

std::string Schema(const std::string& name, const std::string& property) {
  return "/components/schemas/" + name + "/properties/" + property;
}

// The JSON pointer of the schema of `name`, a query parameter of the
// operation `method` `path`.
std::string ParameterSchema(const std::string& path, const std::string& method,
                            const std::string& name) {
  std::string escaped;
  for (char c : path) escaped += c == '/' ? std::string("~1") : std::string(1, c);
  std::string op = "/paths/" + escaped + "/" + method;
  const json& params = Doc().at(json::json_pointer(op + "/parameters"));
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].value("name", "") == name)
      return op + "/parameters/" + std::to_string(i) + "/schema";
  }
  ADD_FAILURE() << method << " " << path << " has no parameter " << name;
  return op + "/parameters/-";
}

struct IntCase {
  const char* constant;
  std::string schema;  // JSON pointer into the document
  IntField field;
  bool has_default;  // false: the field is required, the document names no default
};

TEST(ContractTest, IntFieldsMatchTheDocument) {
  const std::string kOutput = "/v1/sandboxes/{id}/processes/{pid}/output";
  const std::string kList = "/v1/sandboxes/{id}/files/list";
  const IntCase cases[] = {
      {"kVcpu", Schema("CreateSandboxRequest", "vcpu"), kVcpu, true},
      {"kMemoryMiB", Schema("CreateSandboxRequest", "memoryMiB"), kMemoryMiB, true},
      {"kDiskMiB", Schema("CreateSandboxRequest", "diskMiB"), kDiskMiB, true},
      {"kTimeoutSeconds", Schema("CreateSandboxRequest", "timeoutSeconds"), kTimeoutSeconds, true},
      {"kExtendSeconds", Schema("ExtendRequest", "seconds"), kExtendSeconds, false},
      {"kExecTimeoutMs", Schema("ExecRequest", "timeoutMs"), kExecTimeoutMs, true},
      {"kProcessTimeoutMs", Schema("StartProcessRequest", "timeoutMs"), kProcessTimeoutMs, true},
      {"kInterpreterTimeoutMs", Schema("InterpreterRunRequest", "timeoutMs"), kInterpreterTimeoutMs,
       true},
      {"kRetentionDays", Schema("SnapshotRequest", "retentionDays"), kRetentionDays, true},
      {"kPoolSize", Schema("PoolRequest", "size"), kPoolSize, false},
      {"kForkCount", Schema("ForkRequest", "count"), kForkCount, true},
      {"kOutputWaitMs", ParameterSchema(kOutput, "get", "waitMs"), kOutputWaitMs, true},
      {"kListDepth", ParameterSchema(kList, "get", "depth"), kListDepth, true},
      {"kWatchBatchMs", Schema("WatchRequest", "batchMs"), kWatchBatchMs, true},
      {"kWatchTimeoutMs", Schema("WatchRequest", "timeoutMs"), kWatchTimeoutMs, true},
      {"kWatchMaxWatches", Schema("WatchRequest", "maxWatches"), kWatchMaxWatches, true},
      {"kWatchWaitMs",
       ParameterSchema("/v1/sandboxes/{id}/files/watches/{wid}/events", "get", "waitMs"),
       kWatchWaitMs, true},
  };
  for (const IntCase& c : cases) {
    SCOPED_TRACE(std::string(c.constant) + " at " + c.schema);
    json::json_pointer ptr(c.schema);
    ASSERT_TRUE(Doc().contains(ptr));
    const json& s = Doc().at(ptr);
    EXPECT_EQ(s.value("type", ""), "integer");
    EXPECT_EQ(s.value("minimum", json()), json(c.field.min));
    EXPECT_EQ(s.value("maximum", json()), json(c.field.max));
    if (c.has_default) {
      EXPECT_EQ(s.value("default", json()), json(c.field.def));
    } else {
      EXPECT_FALSE(s.contains("default"));
      // .../properties/<name>: the schema two levels up must require it.
      std::string property = ptr.back();
      const json& object = Doc().at(ptr.parent_pointer().parent_pointer());
      auto requires_it = [&](const json& o) {
        const json& req = o.contains("required") ? o["required"] : json::array();
        return std::find(req.begin(), req.end(), property) != req.end();
      };
      // Required outright, or as one of the object's alternatives (oneOf).
      bool required = requires_it(object);
      for (const json& alt : object.value("oneOf", json::array())) required |= requires_it(alt);
      EXPECT_TRUE(required);
    }
  }
}

TEST(ContractTest, FileListLimitMatchesTheDocument) {
  const json& s = Doc().at(
      json::json_pointer(ParameterSchema("/v1/sandboxes/{id}/files/list", "get", "limit")));
  EXPECT_EQ(s.value("type", ""), "integer");
  EXPECT_EQ(s.value("minimum", json()), json(1));
  EXPECT_EQ(s.value("maximum", json()), json(kListLimitMax));
  EXPECT_FALSE(s.contains("default"));  // no limit unless asked
}

struct LimitCase {
  const char* constant;
  std::string schema;
  const char* keyword;  // maximum, maxLength, maxItems, maxProperties or x-kiln-...
  int64_t value;
};

TEST(ContractTest, LimitsMatchTheDocument) {
  const LimitCase cases[] = {
      {"kMaxCostMicrosMax", Schema("CreateSandboxRequest", "maxCostMicros"), "maximum",
       kMaxCostMicrosMax},
      {"kSandboxNameMax", Schema("CreateSandboxRequest", "name"), "maxLength", kSandboxNameMax},
      {"kSandboxEnvValueMax", Schema("CreateSandboxRequest", "env") + "/additionalProperties",
       "maxLength", kSandboxEnvValueMax},
      {"kArgvMax", Schema("ExecRequest", "argv"), "maxItems", kArgvMax},
      {"kArgvMax", Schema("StartProcessRequest", "argv"), "maxItems", kArgvMax},
      {"kCommandMax", Schema("ExecRequest", "command"), "maxLength", kCommandMax},
      {"kCommandMax", Schema("StartProcessRequest", "command"), "maxLength", kCommandMax},
      {"kCommandEnvValueMax", Schema("ExecRequest", "env") + "/additionalProperties", "maxLength",
       kCommandEnvValueMax},
      {"kCommandEnvValueMax", Schema("StartProcessRequest", "env") + "/additionalProperties",
       "maxLength", kCommandEnvValueMax},
      {"kPathMax", Schema("ExecRequest", "cwd"), "maxLength", kPathMax},
      {"kPathMax", Schema("StartProcessRequest", "cwd"), "maxLength", kPathMax},
      {"kPathMax", Schema("MkdirRequest", "path"), "maxLength", kPathMax},
      {"kPathMax", Schema("RemoveRequest", "path"), "maxLength", kPathMax},
      {"kPathMax", Schema("RenameRequest", "from"), "maxLength", kPathMax},
      {"kPathMax", Schema("RenameRequest", "to"), "maxLength", kPathMax},
      {"kStdinMax", Schema("ExecRequest", "stdin"), "maxLength", kStdinMax},
      {"kStdinMax", Schema("WriteRequest", "data"), "maxLength", kStdinMax},
      {"kStdinBase64Max", Schema("ExecRequest", "stdinBase64"), "maxLength", kStdinBase64Max},
      {"kStdinBase64Max", Schema("WriteRequest", "base64"), "maxLength", kStdinBase64Max},
      {"kExecGraceMs", Schema("ExecRequest", "timeoutMs"), "x-kiln-grace-ms", kExecGraceMs},
      {"kExecOutputCap", Schema("CommandResult", "stdout"), "x-kiln-max-bytes",
       static_cast<int64_t>(kExecOutputCap)},
      {"kExecOutputCap", Schema("CommandResult", "stderr"), "x-kiln-max-bytes",
       static_cast<int64_t>(kExecOutputCap)},
      {"kExecLongOutputCap", Schema("CommandResult", "stdout"), "x-kiln-long-max-bytes",
       static_cast<int64_t>(kExecLongOutputCap)},
      {"kExecLongOutputCap", Schema("CommandResult", "stderr"), "x-kiln-long-max-bytes",
       static_cast<int64_t>(kExecLongOutputCap)},
      {"kExecLongCapAfterMs", Schema("CommandResult", "stdout"), "x-kiln-long-after-timeout-ms",
       kExecLongCapAfterMs},
      {"kSnapshotNameMax", Schema("SnapshotRequest", "name"), "maxLength", kSnapshotNameMax},
      {"kLabelsMax", "/components/schemas/Labels", "maxProperties", kLabelsMax},
      {"kLabelKeyMax", "/components/schemas/Labels", "x-kiln-key-max-length", kLabelKeyMax},
      {"kLabelValueMax", "/components/schemas/Labels/additionalProperties", "maxLength",
       kLabelValueMax},
      {"kKeyNameMax", Schema("CreateKeyRequest", "name"), "maxLength", kKeyNameMax},
  };
  for (const LimitCase& c : cases) {
    SCOPED_TRACE(std::string(c.constant) + " at " + c.schema + " " + c.keyword);
    json::json_pointer ptr(c.schema);
    ASSERT_TRUE(Doc().contains(ptr));
    EXPECT_EQ(Doc().at(ptr).value(c.keyword, json()), json(c.value));
  }
}

// Each IntField is a range with its default inside it.
TEST(ContractTest, DefaultsLieInTheirRanges) {
  for (const IntField& f :
       {kVcpu, kMemoryMiB, kDiskMiB, kTimeoutSeconds, kExecTimeoutMs, kProcessTimeoutMs,
        kInterpreterTimeoutMs, kRetentionDays, kPoolSize, kForkCount, kOutputWaitMs, kWatchBatchMs,
        kWatchTimeoutMs, kWatchMaxWatches, kWatchWaitMs}) {
    EXPECT_LE(f.min, f.def);
    EXPECT_LE(f.def, f.max);
  }
}

}  // namespace
}  // namespace contract_test
}  // namespace kiln::contract
