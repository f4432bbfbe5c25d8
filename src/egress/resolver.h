// Name resolution for the egress proxy. kilnd resolves each name once per
// connection and dials exactly the address it checked, so an answer that
// changes between check and dial (DNS rebinding) cannot slip through.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "network/address.h"

namespace kiln::egress {

class Resolver {
 public:
  virtual ~Resolver() = default;
  // The addresses of `host` (a normalized name), in the order to try them
  // (never empty); kNotFound with the resolver's words when there are none.
  virtual Result<std::vector<network::Address>> Resolve(const std::string& host) = 0;
};

// The host's resolver (getaddrinfo).
std::unique_ptr<Resolver> SystemResolver();

// Test-only (kilnd --test-resolver-file): answers from a file re-read on
// every lookup, one `name address [address...]` per line, `#` comments;
// names not in it do not exist. Lets the integration tests point names at
// their own test hosts and change an answer between two lookups.
std::unique_ptr<Resolver> FileResolver(std::string path);

// The host's own addresses (every interface's), refreshed at most every few
// seconds: the proxy never dials them, whatever the policy says.
class HostAddresses {
 public:
  std::vector<network::Address> Get();

 private:
  std::mutex mu_;
  int64_t read_ms_ = -1;
  std::vector<network::Address> cached_;
};

}  // namespace kiln::egress
