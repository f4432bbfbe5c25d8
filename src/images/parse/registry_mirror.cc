#include "images/parse/registry_mirror.h"

#include <map>

#include "common/strings.h"

namespace kiln::images {

namespace {

Status MirrorRefused(std::string_view text, const std::string& why) {
  return Status(Code::kInvalidRequest,
                "'" + std::string(text) +
                    "' is not REGISTRY=URL (docker.io=https://mirror.example "
                    "or docker.io=http://127.0.0.1:5000): " +
                    why);
}

// Docker Hub answers to three names; references spell it docker.io.
std::string CanonicalRegistry(const std::string& domain) {
  if (domain == "index.docker.io" || domain == "registry-1.docker.io") return "docker.io";
  return domain;
}

}  // namespace

ImageRef RegistryMirror::On(const ImageRef& ref) const {
  ImageRef served = ref;
  served.domain = host;
  served.path = prefix.empty() ? ref.path : prefix + "/" + ref.path;
  return served;
}

std::string RegistryMirror::String() const {
  return registry + "=" + (plain_http ? "http://" : "https://") + host +
         (prefix.empty() ? "" : "/" + prefix);
}

Result<RegistryMirror> ParseRegistryMirror(std::string_view text) {
  size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return MirrorRefused(text, "no REGISTRY= before the URL");
  std::string registry = AsciiLower(text.substr(0, eq));
  std::string_view url = text.substr(eq + 1);
  // The registry: a reference's domain, read as one ("REGISTRY/x" parses).
  Result<ImageRef> named = ParseImageRef(registry + "/x");
  if (!named.ok() || (named->domain != registry && CanonicalRegistry(registry) != "docker.io"))
    return MirrorRefused(text, "'" + registry +
                                   "' is not a registry's domain (a host with a '.' or a port, or "
                                   "localhost)");
  RegistryMirror m;
  m.registry = CanonicalRegistry(registry);
  std::string_view rest;
  if (url.starts_with("https://")) {
    rest = url.substr(8);
  } else if (url.starts_with("http://")) {
    rest = url.substr(7);
    m.plain_http = true;
  } else {
    return MirrorRefused(text,
                         "the URL must start with https:// (or http:// for a loopback mirror)");
  }
  if (rest.find_first_of("@?#") != std::string_view::npos)
    return MirrorRefused(text, "the URL may not carry a user, a query or a fragment");
  size_t slash = rest.find('/');
  std::string host = AsciiLower(rest.substr(0, slash));
  std::string prefix;
  if (slash != std::string_view::npos) prefix = std::string(rest.substr(slash + 1));
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (host.empty()) return MirrorRefused(text, "the URL has no host");
  // The mirror's host and prefix, read as a reference's domain and path:
  // "HOST/PREFIX/x" must parse with HOST as its domain.
  std::string probe = host + "/" + (prefix.empty() ? "" : prefix + "/") + "x";
  Result<ImageRef> mirror = ParseImageRef(probe);
  if (!mirror.ok()) return MirrorRefused(text, mirror.status().message());
  if (mirror->domain != host)
    return MirrorRefused(text, "'" + host +
                                   "' is not a registry host (a DNS name with a '.', an "
                                   "address, or localhost; a port after ':')");
  m.host = host;
  m.prefix = prefix;
  if (m.plain_http && !mirror->IsLoopback())
    return MirrorRefused(text, "plain http:// is for a mirror on loopback only; use https://");
  return m;
}

Result<std::vector<RegistryMirror>> ParseRegistryMirrors(const std::vector<std::string>& mirrors,
                                                         const std::vector<std::string>& only) {
  std::vector<RegistryMirror> out;
  std::map<std::string, size_t> by_registry;
  for (const auto& text : mirrors) {
    Result<RegistryMirror> m = ParseRegistryMirror(text);
    if (!m.ok()) return Status(Code::kInvalidRequest, "--registry-mirror " + m.status().message());
    if (by_registry.count(m->registry))
      return Status(Code::kInvalidRequest, "--registry-mirror '" + text + "': " + m->registry +
                                               " has a mirror already (one per registry)");
    by_registry[m->registry] = out.size();
    out.push_back(*m);
  }
  for (const auto& text : only) {
    std::string registry = CanonicalRegistry(AsciiLower(text));
    auto it = by_registry.find(registry);
    if (it == by_registry.end())
      return Status(Code::kInvalidRequest,
                    "--registry-mirror-only '" + text +
                        "': no --registry-mirror names that registry (write its domain as the "
                        "mirror's REGISTRY, such as docker.io)");
    out[it->second].only = true;
  }
  return out;
}

}  // namespace kiln::images
