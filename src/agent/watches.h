// File watches: an inotify descriptor per watch, owned by the agent with a
// bounded ring of its events, read by cursor (watch.read, a long poll like
// proc.output). kilnd keeps nothing about them, so a watch outlives a kilnd
// restart and travels with a snapshot, a fork or a pause.
//
// Bounds: kMaxRunningWatches running per sandbox; per watch its own maxWatches
// inotify descriptors (a `limit` notice when a tree needs more), a ring of
// kWatchRingItems events or kWatchRingBytes, a batch of kMaxWatchBatch; ended watches are
// kept (kMaxEndedWatches) so their readers see the end.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/event_loop.h"
#include "common/contract.h"
#include "proto/ops.h"

namespace kiln::agent {

class Agent;

inline constexpr size_t kMaxRunningWatches = contract::kWatchesPerSandbox;
inline constexpr size_t kMaxEndedWatches = 8;
inline constexpr size_t kWatchRingItems = 10000;
inline constexpr size_t kWatchRingBytes = 1 << 20;
inline constexpr size_t kMaxWatchBatch = 10000;
inline constexpr uint32_t kMaxWatchDescriptors = contract::kWatchMaxWatches.max;

class WatchTable {
 public:
  explicit WatchTable(Agent& agent);
  ~WatchTable();

  // The watch ops (proto::kWatchStart ... kWatchList); false if `op` is
  // none of them.
  bool Handle(uint32_t stream, const std::string& op, const nlohmann::json& req);
  void CancelWaiter(uint32_t stream);
  void CancelAllWaiters();

 private:
  struct Watch;

  void Start(uint32_t stream, const proto::WatchStartRequest& req);
  void Read(uint32_t stream, Watch& w, const proto::WatchReadRequest& req);
  void Answer(uint32_t stream, Watch& w, uint64_t cursor);
  void WakeWaiters(Watch& w);
  void Stop(uint32_t stream, const std::string& id);
  Watch* Find(uint32_t stream, const std::string& id);
  void EvictEnded();

  Agent& agent_;
  std::map<std::string, std::unique_ptr<Watch>> watches_;
  uint64_t next_seq_ = 1;
};

}  // namespace kiln::agent
