#include "egress/resolver.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/time.h"

namespace kiln::egress {

using network::Address;

namespace {

void AddUnique(std::vector<Address>* out, const Address& a) {
  if (std::find(out->begin(), out->end(), a) == out->end()) out->push_back(a);
}

class GetaddrinfoResolver : public Resolver {
 public:
  Result<std::vector<Address>> Resolve(const std::string& host) override {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    addrinfo* res = nullptr;
    int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
    std::vector<Address> out;
    if (rc != 0) return Status(Code::kNotFound, gai_strerror(rc));
    for (addrinfo* p = res; p; p = p->ai_next) {
      if (auto a = Address::FromSockaddr(p->ai_addr)) AddUnique(&out, *a);
    }
    freeaddrinfo(res);
    if (out.empty()) return Status(Code::kNotFound, "no address");
    return out;
  }
};

class TestFileResolver : public Resolver {
 public:
  explicit TestFileResolver(std::string path) : path_(std::move(path)) {}

  Result<std::vector<Address>> Resolve(const std::string& host) override {
    std::ifstream in(path_);
    std::string line;
    while (std::getline(in, line)) {
      line = line.substr(0, line.find('#'));
      std::istringstream words(line);
      std::string name, addr;
      if (!(words >> name) || name != host) continue;
      std::vector<Address> out;
      while (words >> addr) {
        if (auto a = network::ParseIpLiteral(addr)) AddUnique(&out, *a);
      }
      if (out.empty()) return Status(Code::kNotFound, "no address");
      return out;
    }
    return Status(Code::kNotFound, "Name or service not known");
  }

 private:
  std::string path_;
};

}  // namespace

std::unique_ptr<Resolver> SystemResolver() { return std::make_unique<GetaddrinfoResolver>(); }

std::unique_ptr<Resolver> FileResolver(std::string path) {
  return std::make_unique<TestFileResolver>(std::move(path));
}

std::vector<Address> HostAddresses::Get() {
  constexpr int64_t kRefreshMs = 5000;
  std::lock_guard lock(mu_);
  int64_t now = MonotonicNowMs();
  if (read_ms_ >= 0 && now - read_ms_ < kRefreshMs) return cached_;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    cached_.clear();
    for (ifaddrs* p = list; p; p = p->ifa_next) {
      if (!p->ifa_addr) continue;
      if (auto a = Address::FromSockaddr(p->ifa_addr)) AddUnique(&cached_, *a);
    }
    freeifaddrs(list);
    read_ms_ = now;
  }
  return cached_;
}

}  // namespace kiln::egress
