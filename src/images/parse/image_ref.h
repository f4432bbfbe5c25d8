// Image references, parsed once at the API boundary so that nothing after
// handles raw strings.
//
// Two kinds of names reach kiln. An OCI reference names an image in a
// registry; its grammar is the distribution/reference one (what `docker pull`
// accepts):
//
//   reference      := name [ ":" tag ] [ "@" digest ]
//   name           := [ domain "/" ] path
//   domain         := host [ ":" port ]          host: DNS name, IPv4, or [IPv6]
//   path           := component ( "/" component )*
//   component      := [a-z0-9]+ ( separator [a-z0-9]+ )*
//   separator      := "." | "_" | "__" | "-"+
//   tag            := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
//   digest         := "sha256:" 64 lowercase hex digits
//
// The first component is a domain only when it contains '.' or ':' or is
// "localhost"; otherwise the image lives on Docker Hub and is normalised as
// Docker does ("python:3.12" is docker.io/library/python:3.12), so that one
// image has one spelling, which is the store's key.
//
// A kiln image is one built or imported into kiln and is named by its owner:
// an id, a name, a name and tag, or a name and version.
//
// Everything here is pure and thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kiln::images {

// An OCI image reference: [domain[:port]/]path[:tag][@sha256:hex], normalised as Docker does
// ("python:3.12" -> domain "docker.io", path "library/python", tag "3.12").
struct ImageRef {
  std::string domain, path;
  std::optional<std::string> tag, digest;
  // Canonical full form; ":latest" added when neither tag nor digest, e.g.
  // "docker.io/library/python:latest". A digest is kept after a tag
  // ("docker.io/library/python:3.12@sha256:...").
  std::string String() const;
  std::string Repository() const;  // domain/path
  // localhost, 127.0.0.0/8, [::1] (any port): such registries are reached
  // over plain HTTP, as Docker does for them; every other one needs TLS.
  bool IsLoopback() const;
  // The registry's host, lower case, without its port or v6 brackets.
  std::string Host() const;
  // The port the reference names, if it names one.
  std::optional<int> Port() const;
  bool operator==(const ImageRef&) const = default;
};
// kInvalidRequest naming what is wrong (the domain, a path component, the tag,
// the digest), with details {"reference": text}. At most 255 characters in the
// name (domain/path), as Docker enforces.
Result<ImageRef> ParseImageRef(std::string_view text);

// A kiln image named by a user: an id (UUID), "name" (its latest), "name:tag", or
// "name@version" (version >= 1). For an id, `name` holds the id (lower case) and
// is_id is set; a UUID-shaped text is always taken as an id.
struct KilnImageRef {
  std::string name;
  std::optional<std::string> tag;
  std::optional<int> version;
  bool is_id = false;
  bool operator==(const KilnImageRef&) const = default;
};
// kInvalidRequest naming the bad part (name, tag or version).
Result<KilnImageRef> ParseKilnImageRef(std::string_view text);

// Image names: 1-128 chars of [a-z0-9._-/], starting alnum. Tags: Docker's
// [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}. kInvalidRequest saying which rule fails.
Status ValidateImageName(std::string_view name);
Status ValidateTag(std::string_view tag);
// A named build context (COPY --from=NAME): 1-64 chars of [a-z0-9._-],
// starting alnum; it cannot look like a registry reference (no '/' or ':').
Status ValidateContextName(std::string_view name);

}  // namespace kiln::images
