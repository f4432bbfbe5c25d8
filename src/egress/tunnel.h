// One connection through a sandbox's egress proxy, served on its own thread:
// read the proxy request, decide, dial the checked address, carry bytes both
// ways (a second thread carries host -> sandbox), log the outcome.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "engine/agent_streams.h"
#include "network/address.h"
#include "network/policy.h"
#include "store/egress_log_store.h"

namespace kiln::egress {

class Gate;

class Tunnel : public std::enable_shared_from_this<Tunnel> {
 public:
  Tunnel(Gate& gate, engine::ByteLink link);
  ~Tunnel();

  // Serves the connection to its end; returns when both directions ended.
  void Run();
  // Checks the open connection against a (new) policy; cuts it if refused.
  void Recheck(const network::Matcher& matcher, const std::vector<network::Address>& own);
  // Ends the connection now (policy change, sandbox stopped).
  void Cut(const std::string& closed_by);

 private:
  void Serve();
  bool cut();
  bool ReadHead(std::string* rest);
  // Answers the client from the proxy itself and logs a refused attempt.
  void Refuse(int status, std::string_view verdict, const std::string& text);
  // Dials the first allowed address; sets entry_.verdict/address.
  bool Decide();
  Status Dial(const network::Address& a);
  void Pump(const std::string& early_bytes);

  Gate& gate_;
  engine::ByteLink link_;
  int64_t start_mono_ms_;
  store::EgressEntry entry_;
  std::string upstream_head_;
  bool connect_ = false;
  std::mutex mu_;  // guards what Cut() and Recheck() read from other threads
  network::Address dialled_;
  bool dialled_set_ = false;
  int fd_ = -1;
  std::string cut_by_;
  std::atomic<int64_t> bytes_out_{0}, bytes_in_{0};
};

}  // namespace kiln::egress
