// Endpoints on the operator's private network that sandboxes may reach:
// the trainer's adapter or an inference server of an RL cluster (kilnd
// --egress-allow-internal NAME=ADDR:PORT). Every other private, loopback or
// host address stays refused.
//
// A sandbox reaches one as it would reach a public host named NAME: its
// internet on, NAME (or ADDR) not in its deny list, and its allow list empty
// or naming NAME. Inside, NAME resolves to ADDR with no DNS query, and
// ADDR:PORT written as an address is the same endpoint; another port of
// ADDR is not. Pure and thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "network/address.h"

namespace kiln::network {

struct InternalEndpoint {
  std::string name;  // a host name, as NormalizeHost leaves it
  Address address;
  int port = 0;
};

// "trainer=10.0.0.5:18001", "llm=[fd00::7]:8000". kInvalidRequest naming
// the part that is wrong; the name must be a host name, not an address.
Result<InternalEndpoint> ParseInternalEndpoint(std::string_view text);

class InternalEndpoints {
 public:
  InternalEndpoints() = default;
  explicit InternalEndpoints(std::vector<InternalEndpoint> endpoints);

  const InternalEndpoint* ByName(std::string_view name) const;
  const InternalEndpoint* At(const Address& address, int port) const;
  bool empty() const { return endpoints_.empty(); }

 private:
  std::vector<InternalEndpoint> endpoints_;
};

}  // namespace kiln::network
