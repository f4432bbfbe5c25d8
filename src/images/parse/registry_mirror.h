// An operator's pull-through mirror for one registry (--registry-mirror
// docker.io=http://127.0.0.1:5000), as dockerd's registry-mirrors and
// containerd's hosts.toml give one: every pull of that registry's images
// asks the mirror first, under the same repository, tag and digest (below
// the mirror's path prefix, if the URL has one), and falls back to the
// registry itself unless the operator said mirror-only
// (--registry-mirror-only). The image keeps its original name: a mirror is
// where bytes come from, not what the image is called.
//
// Parsed at start, so a spelling kilnd cannot use stops it there, naming
// the flag. Plain HTTP only for a mirror on loopback (as Docker treats a
// loopback registry); anything else is HTTPS. Whether kilnd may dial the
// mirror at all is --allow-registry's and the SSRF rules' to say, exactly
// as for a registry (image_puller.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "images/parse/image_ref.h"

namespace kiln::images {

struct RegistryMirror {
  std::string registry;     // the mirrored registry's domain as ImageRef spells it ("docker.io")
  std::string host;         // the mirror's host[:port], a reference domain ("127.0.0.1:5000")
  std::string prefix;       // path components the mirror serves the registry under ("" for none)
  bool plain_http = false;  // http:// (a loopback mirror)
  bool only = false;        // no fallback to the registry itself

  bool Mirrors(const ImageRef& ref) const { return ref.domain == registry; }
  // `ref` as the mirror serves it: the same path, tag and digest under the
  // mirror's host and prefix.
  ImageRef On(const ImageRef& ref) const;
  // "docker.io=http://127.0.0.1:5000": how the operator wrote it, for logs.
  std::string String() const;
};

// REGISTRY=URL. REGISTRY is a registry's domain ("docker.io", "ghcr.io",
// "host:5000"; Docker Hub's other spellings are docker.io); URL is
// https://HOST[:PORT][/PREFIX] or, for a loopback host, http://. No user,
// query or fragment. kInvalidRequest saying what is wrong.
Result<RegistryMirror> ParseRegistryMirror(std::string_view text);

// The flags as kilnd reads them: each --registry-mirror parsed, at most one
// per registry, and each --registry-mirror-only naming a mirrored
// registry. kInvalidRequest naming the flag and the value.
Result<std::vector<RegistryMirror>> ParseRegistryMirrors(const std::vector<std::string>& mirrors,
                                                         const std::vector<std::string>& only);

}  // namespace kiln::images
