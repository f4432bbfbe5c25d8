// Ids that become host paths, as types that parse only what they should.
//
// A tenant key chooses what a registry serves kilnd and what archives it
// imports, so a digest or id read from any of them may be `sha256:<x>/..`,
// `../../etc` or a name that is a symlink elsewhere. Every path kilnd builds
// under its state directory from such a value goes through one of these
// types; each has one Parse that accepts exactly its grammar and nothing
// else, and no way to make one from an unchecked string. A function that
// builds a host path takes the type, never a std::string.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// True for exactly `n` lowercase hex digits.
bool IsLowerHex(std::string_view s, size_t n);

// A SHA-256 digest: "sha256:" followed by 64 lowercase hex digits.
class Sha256Digest {
 public:
  // "sha256:<64 lowercase hex>" only; nullopt for anything else (upper
  // case, another algorithm, a suffix, a path).
  static std::optional<Sha256Digest> Parse(std::string_view text);
  // The 64 hex digits alone (how kiln names files by digest).
  static std::optional<Sha256Digest> FromHex(std::string_view hex);
  // The digest of `data`, computed here.
  static Sha256Digest Of(std::string_view data);

  const std::string& hex() const { return hex_; }
  std::string str() const { return "sha256:" + hex_; }

  auto operator<=>(const Sha256Digest&) const = default;

 private:
  explicit Sha256Digest(std::string hex) : hex_(std::move(hex)) {}
  std::string hex_;
};

// A lowercase UUID (8-4-4-4-12 hex digits): sandbox, snapshot and image ids.
class Uuid {
 public:
  static std::optional<Uuid> Parse(std::string_view text);
  const std::string& str() const { return text_; }
  auto operator<=>(const Uuid&) const = default;

 private:
  explicit Uuid(std::string text) : text_(std::move(text)) {}
  std::string text_;
};

// A layer in the image store: a SHA-256 in hex (a pulled or RUN layer's
// diff id, a COPY layer's step key) or kiln's built-in base,
// "base-<16 lowercase hex>" (its recipe's hash), which links to the base
// root. Both spellings are kiln's own; nothing else is a layer id.
class LayerId {
 public:
  static std::optional<LayerId> Parse(std::string_view text);
  static LayerId Of(const Sha256Digest& d) { return LayerId(d.hex()); }

  const std::string& str() const { return text_; }
  bool builtin() const { return text_.starts_with("base-"); }

  auto operator<=>(const LayerId&) const = default;

 private:
  explicit LayerId(std::string text) : text_(std::move(text)) {}
  std::string text_;
};

}  // namespace kiln
