// COPY and ADD: files from a build context (or an earlier stage's root) into
// a new layer directory.
//
// The sources are untrusted (the context came from a client, a stage's root
// from a RUN in it): every lookup goes through OpenInRoot or *at calls with
// O_NOFOLLOW, so a symlink in a source can neither pull host files in nor be
// followed when copying; symlinks are copied as symlinks. The destination
// follows Docker's rules, read from `parent_root` (the image so far,
// read-only): a destination that is a symlink or goes through one (/bin ->
// usr/bin) is resolved inside parent_root, as it would be in the container.
//
// The layer directory holds files with their final owners and modes, ready
// to be stored as a layer; they are written by the layers library's
// LayerWriter (images/layers/layer_writer.h), as unpacked layers are.
// Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "images/context/dockerignore.h"

namespace kiln::images {

struct CopySpec {
  // The unpacked context, or an earlier stage's root (COPY --from).
  std::string source_root;
  // As written; globs (* ? [..]) allowed; relative to source_root.
  std::vector<std::string> sources;
  // Absolute in-image path (the builder resolved WORKDIR); a trailing "/" means a dir.
  std::string dest;
  std::optional<std::pair<uint32_t, uint32_t>> chown;  // uid, gid (resolved by image_users)
  std::optional<uint32_t> chmod;
  // ADD: a local tar archive source (plain/gz/bz2/xz, detected by content) is
  // extracted at dest. Extracted entries keep the archive's owners unless
  // chown is set (as Docker does); chmod does not apply to them; devices and
  // fifos in the archive are skipped.
  bool add = false;
  const DockerIgnore* ignore = nullptr;  // only for the context
  // What ADD may unpack in all, over every archive of the step: a small
  // compressed archive (or many of them) may expand without end, so the
  // builder passes the image's own limit (build.maxImageMiB).
  uint64_t max_unpacked_bytes = UINT64_MAX;
  uint64_t max_unpacked_files = 1000000;
};

// The content digest (lowercase hex sha256) of what a COPY would take: for
// each source in order and each of its matches (sorted), the match's path,
// then every entry under it with its path relative to the match, type, mode,
// size and the sha256 of its contents or its link target. No mtimes, owners
// or the spec's dest/chown/chmod (the builder keys those from the
// instruction's text). Nothing is copied: this is the build cache key part.
//
// kFileNotFound naming the source (details {"source": S}) when a source (or
// glob) matches nothing, or only what `ignore` excludes; a source that
// escapes source_root ("../x") or a malformed glob -> kInvalidRequest.
Result<std::string> CopySourcesDigest(const CopySpec& spec);

struct CopyStats {
  uint64_t files = 0;  // files and symlinks written (directories not counted)
  uint64_t bytes = 0;  // bytes of file contents written
};

// Copies into `layer_dir` (created if missing) with Docker's rules: a dir
// source copies its contents; several sources (or a glob with several
// matches), a dest ending in "/", or a dest that is a directory in
// `parent_root` (checked with OpenInRoot; "" means no parent, FROM scratch)
// or already in the layer means dest is a directory. Missing parent dirs are
// created (mode 0755, owner root, or the chown owner for dirs COPY creates,
// as Docker does); parents that exist in parent_root are recreated in the
// layer with their mode, owner and mtime there, so the layer does not change
// them (but for the mtime of one the copy then writes into, which becomes
// the time of the write). Files keep their mode (and mtime) unless chmod
// (which applies to copied directories too); owner root:root unless chown.
// Symlinks in the sources are copied as symlinks, never followed; devices
// and fifos are skipped. Errors as CopySourcesDigest, plus kInvalidArchive
// from an ADD archive and kIoError/kNoSpace naming the path.
Result<CopyStats> ApplyCopy(const CopySpec& spec, const std::string& parent_root,
                            const std::string& layer_dir);

}  // namespace kiln::images
