#include "engine/agent_channel.h"

#include "common/time.h"

namespace kiln::engine {

using nlohmann::json;

json RoundTrip(AgentChannel& channel, const json& request, int timeout_ms) {
  auto op = channel.Start(request);
  AgentStream::Message m;
  int64_t deadline = MonotonicNowMs() + timeout_ms;
  for (;;) {
    int64_t left = deadline - MonotonicNowMs();
    if (left <= 0 || !op->Next(&m, static_cast<int>(left)))
      return json{{"error",
                   {{"code", "agent_timeout"}, {"message", "the sandbox's agent did not answer"}}}};
    if (m.kind == AgentStream::Message::kData) op->Ack(static_cast<uint32_t>(m.data.size()));
    if (m.kind == AgentStream::Message::kResponse) return m.body;
    if (m.kind == AgentStream::Message::kClosed)
      return json{{"error", {{"code", "not_running"}, {"message", "the sandbox is not running"}}}};
  }
}

}  // namespace kiln::engine
