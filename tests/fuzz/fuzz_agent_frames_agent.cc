// Fuzzes the agent's side of its channel: the frames kilnd writes (with the
// daemon's payload limit), the reassembly of fragmented requests, and the
// typed decoding of every request the agent serves (src/proto/ops.h), as
// agent/channel.cc and agent/agent.cc do before acting on one. The agent
// itself is not linked: acting on a request runs commands.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/base64.h"
#include "fuzz_util.h"
#include "proto/frame.h"
#include "proto/ops.h"
#include "proto/signals.h"

namespace kiln::fuzz {
namespace {

using nlohmann::json;

template <typename T>
void Decode(const json& req) {
  try {
    static_cast<void>(req.get<T>());
  } catch (const json::exception&) {
    // answered invalid_request
  }
}

void DecodeRequest(const std::string& whole) {
  json req = json::parse(whole, nullptr, false);
  if (req.is_discarded() || !req.is_object()) return;
  Decode<proto::ExecRequest>(req);
  Decode<proto::ConfigureRequest>(req);
  Decode<proto::FileReadRequest>(req);
  Decode<proto::FileWriteRequest>(req);
  Decode<proto::FileListRequest>(req);
  Decode<proto::FileStatRequest>(req);
  Decode<proto::FileMkdirRequest>(req);
  Decode<proto::FileRemoveRequest>(req);
  Decode<proto::FileRenameRequest>(req);
  Decode<proto::ArchiveGetRequest>(req);
  Decode<proto::ArchivePutRequest>(req);
  Decode<proto::ProcStartRequest>(req);
  Decode<proto::ProcGetRequest>(req);
  Decode<proto::ProcOutputRequest>(req);
  Decode<proto::ProcResizeRequest>(req);
  Decode<proto::EgressAttachRequest>(req);
  try {
    auto write = req.get<proto::ProcWriteRequest>();
    static_cast<void>(Base64Decode(write.base64));
  } catch (const json::exception&) {
  }
  try {
    auto signal = req.get<proto::ProcSignalRequest>();
    static_cast<void>(proto::SignalNumber(signal.signal));
  } catch (const json::exception&) {
  }
}

}  // namespace
}  // namespace kiln::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::string_view input = fuzz::AsText(data, size);
  proto::FrameDecoder dec(proto::kMaxDaemonPayload);
  proto::Reassembler requests;
  size_t piece = 1 + (size % 4096);  // a FIFO read takes what is there
  while (!input.empty()) {
    size_t n = std::min(piece, input.size());
    dec.Feed(input.substr(0, n));
    input.remove_prefix(n);
    while (auto f = dec.Next()) {
      switch (f->type) {
        case proto::FrameType::kHello:
          static_cast<void>(nlohmann::json::parse(f->payload, nullptr, false));
          requests.Clear();
          break;
        case proto::FrameType::kRequest:
          if (auto whole = requests.Add(*f)) fuzz::DecodeRequest(*whole);
          break;
        case proto::FrameType::kCancel:
          requests.Drop(f->stream);
          break;
        case proto::FrameType::kWindow:
          static_cast<void>(proto::DecodeWindow(f->payload));
          break;
        default:
          break;
      }
    }
    if (dec.error()) {
      // The agent starts over at the next read (channel.cc).
      dec = proto::FrameDecoder(proto::kMaxDaemonPayload);
    }
  }
  return 0;
}
