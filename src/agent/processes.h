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

namespace kiln::agent {

class Agent;

class ProcessTable {
 public:
  explicit ProcessTable(Agent& agent);
  ~ProcessTable();

  // proc.start, proc.list, proc.get, proc.output, proc.write, proc.signal
  void Handle(uint32_t stream, const std::string& op, const nlohmann::json& req);
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

  void Start(uint32_t stream, const nlohmann::json& req);
  void Output(uint32_t stream, Process& p, const nlohmann::json& req);
  void AnswerOutput(uint32_t stream, Process& p, uint64_t cursor, size_t max_bytes);
  void WakeWaiters(Process& p);
  nlohmann::json Info(const Process& p) const;
  Process* Find(const std::string& id);
  void EvictEnded();

  Agent& agent_;
  std::map<std::string, std::unique_ptr<Process>> procs_;
  uint64_t next_id_ = 1;
};

}  // namespace kiln::agent
