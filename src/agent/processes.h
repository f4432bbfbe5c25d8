// Background processes (an environment's server): they outlive the request
// that started them; their latest output is kept in a ring for readers.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/command.h"
#include "agent/output_ring.h"
#include "proto/ops.h"

namespace kiln::agent {

class Agent;

class ProcessTable {
 public:
  explicit ProcessTable(Agent& agent);
  ~ProcessTable();

  // The process ops (proto::kProcStart ... kProcSignal); false if `op` is
  // none of them.
  bool Handle(uint32_t stream, const std::string& op, const nlohmann::json& req);
  void CancelWaiter(uint32_t stream);
  void CancelAllWaiters();

 private:
  struct Process;
  struct Waiter {
    uint32_t stream;
    uint64_t cursor;
    size_t max_bytes;
    EventLoop::TimerId timer;
  };

  void Start(uint32_t stream, const proto::ProcStartRequest& request);
  void Output(uint32_t stream, Process& p, const proto::ProcOutputRequest& req);
  void Write(uint32_t stream, Process& p, const proto::ProcWriteRequest& req);
  void Signal(uint32_t stream, Process& p, const std::string& name);
  void Resize(uint32_t stream, Process& p, const proto::TerminalSize& size);
  void AnswerOutput(uint32_t stream, Process& p, uint64_t cursor, size_t max_bytes);
  void WakeWaiters(Process& p);
  proto::ProcessInfo Info(const Process& p) const;
  Process* Find(const std::string& id);
  // The process, or nullptr having answered not_found.
  Process* Find(uint32_t stream, const std::string& id);
  void EvictEnded();

  Agent& agent_;
  std::map<std::string, std::unique_ptr<Process>> procs_;
  uint64_t next_id_ = 1;
};

}  // namespace kiln::agent
