// The API contract's defaults and bounds, written once. kilnd validates
// requests with them, the CLI prints them, and tests/unit/common/contract_test.cc
// checks each against src/api/kiln/openapi.json (and the SDKs' tests check theirs
// against the same file), so the document and the code cannot drift apart.
#pragma once

#include <cstdint>

namespace kiln::contract {

// An integer field: accepted range and the value when it is absent.
struct IntField {
  int64_t min;
  int64_t max;
  int64_t def;
};

// CreateSandboxRequest
inline constexpr IntField kVcpu{1, 16, 2};
inline constexpr IntField kMemoryMiB{128, 65536, 2048};
inline constexpr IntField kDiskMiB{64, 65536, 4096};
// The lease: kTimeoutSeconds.max is the most kilnd allows (a day);
// --max-lease-seconds may lower it, and every front reads its leases with
// LeaseSeconds(that maximum).
inline constexpr IntField kTimeoutSeconds{60, 86400, 1800};
inline constexpr int64_t kMaxCostMicrosMax = int64_t{1} << 50;
inline constexpr int kSandboxNameMax = 64;
inline constexpr int kSandboxEnvValueMax = 32 * 1024;
// ExtendRequest
inline constexpr IntField kExtendSeconds{1, 86400, 0};  // required: no default

// kTimeoutSeconds under an operator's lower maximum (--max-lease-seconds):
// the default lease never exceeds it.
constexpr IntField LeaseSeconds(int64_t max) {
  int64_t m = max < kTimeoutSeconds.min ? kTimeoutSeconds.min
                                        : (max > kTimeoutSeconds.max ? kTimeoutSeconds.max : max);
  return IntField{kTimeoutSeconds.min, m, kTimeoutSeconds.def < m ? kTimeoutSeconds.def : m};
}

// ExecRequest / StartProcessRequest
inline constexpr IntField kExecTimeoutMs{1, 86400000, 60000};
inline constexpr IntField kProcessTimeoutMs{0, 86400000, 0};  // 0 = no limit
// An interpreter run (interpreter:run); 0 = no limit.
inline constexpr IntField kInterpreterTimeoutMs{0, 86400000, 60000};
inline constexpr int kArgvMax = 4096;
inline constexpr int kCommandMax = 1 << 20;
inline constexpr int kCommandEnvValueMax = 128 * 1024;
inline constexpr int kPathMax = 4096;
inline constexpr int kStdinMax = 64 << 20;        // stdin, :write data
inline constexpr int kStdinBase64Max = 96 << 20;  // stdinBase64, :write base64
// How far past its own timeoutMs a command may take to answer: killing a
// large process tree inside gVisor is not instant. The SDKs wait this long
// beyond timeoutMs before giving up on an answer.
inline constexpr int64_t kExecGraceMs = 30000;
// What a JSON CommandResult carries of each stream (the rest is truncated):
// 64 KiB, or 1 MiB for a command whose timeoutMs is over 60 s.
inline constexpr uint64_t kExecOutputCap = 64 * 1024;
inline constexpr uint64_t kExecLongOutputCap = 1024 * 1024;
inline constexpr int64_t kExecLongCapAfterMs = 60000;
constexpr uint64_t ExecOutputCap(int64_t timeout_ms) {
  return timeout_ms > kExecLongCapAfterMs ? kExecLongOutputCap : kExecOutputCap;
}

// GET …/files/list: depth, and how many entries `limit` may ask for.
inline constexpr IntField kListDepth{1, 16, 1};
inline constexpr int64_t kListLimitMax = 10000;  // the agent lists at most 10,000 entries
inline constexpr int kGlobMax = 4096;

// SnapshotRequest, PoolRequest, ForkRequest
inline constexpr IntField kRetentionDays{1, 365, 7};
inline constexpr int kSnapshotNameMax = 128;
inline constexpr IntField kPoolSize{0, 64, 0};
inline constexpr IntField kForkCount{1, 10, 1};

// Labels (every resource)
inline constexpr int kLabelsMax = 32;
inline constexpr int kLabelKeyMax = 63;
inline constexpr int kLabelValueMax = 256;

// CreateKeyRequest
inline constexpr int kKeyNameMax = 128;

// Process output: a long poll waits at most this long.
inline constexpr IntField kOutputWaitMs{0, 30000, 0};

// File watches (the reference's bounds: ≤ 4 per sandbox, timeout default
// 1 h, ≤ 1 day, 0 = until stopped, waitMs ≤ 8000).
inline constexpr IntField kWatchBatchMs{0, 10000, 100};
inline constexpr IntField kWatchTimeoutMs{0, 86400000, 3600000};
// inotify watch descriptors one watch may hold (a directory each).
inline constexpr IntField kWatchMaxWatches{1, 65536, 8192};
inline constexpr IntField kWatchWaitMs{0, 8000, 0};
inline constexpr int kWatchesPerSandbox = 4;  // running at once; the agent's kMaxRunningWatches
inline constexpr int kWatchGlobs = 32;        // include or exclude patterns, each
inline constexpr int kWatchGlobMax = 256;     // characters in one
// A follow ends with `continue` after this long, so the client reconnects.
inline constexpr int64_t kWatchFollowSliceMs = 110000;

}  // namespace kiln::contract
