// Fuzzes kilnd's side of the agent channel: what a sandbox's agent (which
// the sandbox's code may have replaced) writes to kilnd. The bytes go
// through the frame decoder with the agent's payload limit, the resync to
// a session marker, the reassembly of fragmented events and responses, and
// the typed decoding of every answer kilnd reads (engine/agent_answer.h),
// as AgentConnection::ReadLoop and AgentClient do: with its caps on one
// message and on unfinished ones, and its depth-bounded JSON parser.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/json_bounded.h"
#include "engine/agent_answer.h"
#include "engine/agent_conn.h"
#include "fuzz_util.h"
#include "proto/frame.h"
#include "proto/ops.h"

namespace kiln::fuzz {
namespace {

using nlohmann::json;

template <typename... Answers>
void DecodeAll(const json& body) {
  (static_cast<void>(engine::DecodeAnswer<Answers>(body)), ...);
}

void DecodeMessage(const std::string& whole) {
  std::optional<json> parsed = ParseJsonBounded(whole);
  if (!parsed) return;
  const json& body = *parsed;
  DecodeAll<proto::ExecStarted, proto::ExecExit, proto::Pong, proto::Configured, proto::OomKilled,
            proto::FileReadStart, proto::FileReadDone, proto::FileWritten, proto::FileList,
            proto::FileStat, proto::FileEntry, proto::FileRemoved, proto::ProcessInfo,
            proto::ProcessList, proto::OutputPage, proto::ProcWritten, proto::EgressConn,
            proto::EgressClosed>(body);
  if (proto::IsError(body)) static_cast<void>(engine::StatusFromAgentError(body));
}

}  // namespace
}  // namespace kiln::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::string_view input = fuzz::AsText(data, size);
  proto::FrameDecoder dec(proto::kMaxAgentPayload);
  // The caps are scaled down 256 times so inputs of fuzzing size reach them.
  proto::Reassembler messages(engine::AgentConnection::kMaxMessage >> 8,
                              engine::AgentConnection::kMaxPartial >> 8);
  // The first 8 bytes pick the session nonce; a stream without its marker
  // is skipped, as after a daemon restart.
  uint64_t nonce = 0;
  if (input.size() >= 8) {
    for (int i = 0; i < 8; ++i) nonce = nonce << 8 | static_cast<uint8_t>(input[i]);
    input.remove_prefix(8);
  }
  // Fed in pieces of varying size, as reads from a FIFO arrive.
  size_t piece = 1 + (size % 61);
  bool synced = (nonce & 1) == 0;
  while (!input.empty()) {
    size_t n = std::min(piece, input.size());
    dec.Feed(input.substr(0, n));
    input.remove_prefix(n);
    if (!synced) {
      synced = dec.SkipToSync(nonce);
      if (!synced) continue;
    }
    while (auto f = dec.Next()) {
      if (f->type == proto::FrameType::kWindow) {
        static_cast<void>(proto::DecodeWindow(f->payload));
      } else if (f->type == proto::FrameType::kEvent || f->type == proto::FrameType::kResponse) {
        if (auto whole = messages.Add(*f)) fuzz::DecodeMessage(*whole);
        if (messages.error()) return 0;  // kilnd breaks the channel here
      }
    }
    if (dec.error()) break;
  }
  return 0;
}
