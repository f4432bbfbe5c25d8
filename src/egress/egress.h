// kilnd's side of every sandbox's network: the egress proxy.
//
// A sandbox has no network interface. Its agent listens on 127.0.0.1 as an
// HTTP proxy and hands each connection to kilnd over the agent channel; a
// Gate (one per running sandbox) reads the proxy request, checks it against
// the sandbox's policy, dials the checked address on the host and carries
// the bytes. Every attempt is logged. A policy change re-checks the open
// connections and cuts those the new policy refuses.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "egress/resolver.h"
#include "engine/agent_channel.h"
#include "engine/agent_client.h"
#include "network/policy.h"
#include "store/egress_log_store.h"

namespace kiln::egress {

class Tunnel;

struct EgressOptions {
  int connect_timeout_ms = 10000;
  int head_timeout_ms = 30000;  // for the client to send its request head
  int max_open_per_sandbox = 256;
  // The operator's private endpoints sandboxes may reach
  // (network/internal_endpoints.h); none by default.
  network::InternalEndpoints internal;
  // Tests only: the address a tunnel connects to instead of the one it
  // checked (logged as checked), so that a unit test sees an allowed dial
  // without a packet leaving the machine.
  std::function<network::Address(const network::Address&)> dial_for_test;
};

// What every gate shares; outlives them.
class EgressService {
 public:
  EgressService(std::unique_ptr<Resolver> resolver, store::EgressLogStore& log,
                EgressOptions options = {});

  Resolver& resolver() { return *resolver_; }
  HostAddresses& host_addresses() { return host_addresses_; }
  store::EgressLogStore& log() { return log_; }
  const EgressOptions& options() const { return options_; }

 private:
  std::unique_ptr<Resolver> resolver_;
  HostAddresses host_addresses_;
  store::EgressLogStore& log_;
  EgressOptions options_;
};

// One running sandbox's egress: listens on its agent channel until Close().
class Gate : public std::enable_shared_from_this<Gate> {
 public:
  static std::shared_ptr<Gate> Open(EgressService& service, std::string sandbox_id,
                                    std::shared_ptr<engine::AgentChannel> conn,
                                    const network::Policy& policy);
  ~Gate();

  // Applies a new policy now: later connections are checked against it, and
  // open ones it refuses are cut.
  void SetPolicy(const network::Policy& policy);
  // Cuts every connection and stops listening; returns when no thread of
  // this gate is left.
  void Close();

  // For tunnels.
  EgressService& service() { return service_; }
  const std::string& sandbox_id() const { return sandbox_id_; }
  std::shared_ptr<const network::Matcher> matcher() const;
  // Registers a connection that is carrying bytes; false if the gate closed.
  bool Register(const std::shared_ptr<Tunnel>& t);
  void Unregister(const Tunnel* t);

 private:
  Gate(EgressService& service, std::string sandbox_id, std::shared_ptr<engine::AgentChannel> conn,
       const network::Policy& policy);
  void ListenLoop();
  void Serve(uint64_t conn_id);

  EgressService& service_;
  const std::string sandbox_id_;
  engine::AgentClient agent_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<const network::Matcher> matcher_;
  std::map<const Tunnel*, std::shared_ptr<Tunnel>> open_;
  std::optional<engine::EgressListener> listen_;
  std::thread listener_;
  int workers_ = 0;  // threads serving a connection
  bool closed_ = false;
};

}  // namespace kiln::egress
