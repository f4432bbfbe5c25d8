#include "egress/egress.h"

#include <system_error>

#include "common/log.h"
#include "common/metrics.h"
#include "egress/tunnel.h"

namespace kiln::egress {

EgressService::EgressService(std::unique_ptr<Resolver> resolver, store::EgressLogStore& log,
                             EgressOptions options)
    : resolver_(std::move(resolver)), log_(log), options_(options) {
  metrics::Describe("kiln_egress_connections_total", "counter",
                    "Connections attempted through sandbox egress proxies, by verdict.");
  metrics::Describe("kiln_egress_bytes_total", "counter",
                    "Bytes carried by egress proxies (out: sandbox to internet; in: back).");
  metrics::Describe("kiln_egress_open_connections", "gauge",
                    "Connections egress proxies are carrying now.");
}

std::shared_ptr<Gate> Gate::Open(EgressService& service, std::string sandbox_id,
                                 std::shared_ptr<engine::AgentChannel> conn,
                                 const network::Policy& policy) {
  std::shared_ptr<Gate> g(new Gate(service, std::move(sandbox_id), std::move(conn), policy));
  g->listen_.emplace(g->agent_.EgressListen());
  g->listener_ = std::thread([raw = g.get()] { raw->ListenLoop(); });
  return g;
}

Gate::Gate(EgressService& service, std::string sandbox_id,
           std::shared_ptr<engine::AgentChannel> conn, const network::Policy& policy)
    : service_(service),
      sandbox_id_(std::move(sandbox_id)),
      agent_(std::move(conn)),
      matcher_(std::make_shared<const network::Matcher>(policy)) {}

Gate::~Gate() {
  Close();
  if (listener_.joinable()) listener_.detach();  // only if Close() ran on the listener itself
}

std::shared_ptr<const network::Matcher> Gate::matcher() const {
  std::lock_guard lock(mu_);
  return matcher_;
}

void Gate::SetPolicy(const network::Policy& policy) {
  auto m = std::make_shared<const network::Matcher>(policy);
  std::vector<std::shared_ptr<Tunnel>> open;
  {
    std::lock_guard lock(mu_);
    matcher_ = m;
    for (auto& [raw, t] : open_) open.push_back(t);
  }
  auto own = service_.host_addresses().Get();
  for (auto& t : open) t->Recheck(*m, own);
}

bool Gate::Register(const std::shared_ptr<Tunnel>& t) {
  std::lock_guard lock(mu_);
  if (closed_) return false;
  open_[t.get()] = t;
  metrics::Inc("kiln_egress_open_connections", {}, 1);
  return true;
}

void Gate::Unregister(const Tunnel* t) {
  std::lock_guard lock(mu_);
  if (open_.erase(t)) metrics::Inc("kiln_egress_open_connections", {}, -1);
}

void Gate::ListenLoop() {
  for (uint64_t id; listen_->Next(&id);) {
    std::lock_guard lock(mu_);
    if (closed_) break;
    if (workers_ >= service_.options().max_open_per_sandbox) {
      // A sandbox opening connections without end gets no thread for each:
      // attaching and cancelling at once makes the agent close the socket.
      agent_.EgressAttach(id).Cancel();
      metrics::Inc("kiln_egress_connections_total", {{"verdict", "too-many-connections"}});
      continue;
    }
    ++workers_;
    try {
      std::thread([self = shared_from_this(), id] { self->Serve(id); }).detach();
    } catch (const std::system_error&) {
      // No thread to spare: this connection is refused, kilnd goes on.
      --workers_;
      agent_.EgressAttach(id).Cancel();
      metrics::Inc("kiln_egress_connections_total", {{"verdict", "no-thread"}});
    }
  }
}

void Gate::Serve(uint64_t conn_id) {
  auto tunnel = std::make_shared<Tunnel>(*this, agent_.EgressAttach(conn_id));
  tunnel->Run();
  tunnel.reset();
  std::lock_guard lock(mu_);
  --workers_;
  cv_.notify_all();
}

void Gate::Close() {
  std::vector<std::shared_ptr<Tunnel>> open;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    for (auto& [raw, t] : open_) open.push_back(t);
  }
  if (listen_) listen_->Cancel();
  for (auto& t : open) t->Cut("sandbox");
  open.clear();
  if (listener_.joinable() && listener_.get_id() != std::this_thread::get_id()) listener_.join();
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return workers_ == 0; });
}

}  // namespace kiln::egress
