// Writing one layer tar's entries into a layer directory: the part of
// UnpackLayer (layer_unpack.h) that touches the file system. Internal.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"
#include "images/layers/layer_tar.h"
#include "images/layers/layer_unpack.h"

namespace kiln::images {

// True if `path` is `prefix` or lies under it (both cleaned, relative).
bool HasPathPrefix(const std::string& path, const std::string& prefix);

// The state of one UnpackLayer call: entries are written under the
// directory `root` (an open fd the caller keeps) as they come from the tar.
// Every path is walked from `root` with O_NOFOLLOW, so an entry can never be
// written through a symlink, whatever earlier entries made.
class LayerWriter {
 public:
  LayerWriter(const UnpackOptions& options, int root) : options_(options), root_(root) {}

  // Writes the entry whose header `e` is, taking its data from `reader`.
  Status Entry(LayerTarReader& reader, archive_entry* e);
  // Gives directories their mtimes, which writing into them changed.
  Status FinishDirTimes();
  LayerStats& stats() { return stats_; }

 private:
  // Opens the directory `dir` (cleaned, relative; "" for the root) without
  // following symlinks, creating missing components (0755) when `create`.
  Result<UniqueFd> OpenParent(const std::string& dir, bool create, const std::string& entry);
  Status Replace(int parent, const std::string& name, bool keep_dir, const std::string& entry);
  Status WriteFile(LayerTarReader& reader, archive_entry* e, int fd, const std::string& entry);
  Status SetMetadata(archive_entry* e, int parent, const std::string& name, int fd,
                     const std::string& entry);
  Status SetXattrs(archive_entry* e, int parent, const std::string& name, int fd,
                   const std::string& entry);
  Status MakeWhiteout(int parent, const std::string& name, const std::string& entry);
  Status HardLink(archive_entry* e, int parent, const std::string& name, const std::string& entry);

  const UnpackOptions& options_;
  int root_;
  LayerStats stats_;
  std::set<std::string> whiteout_devices_, skipped_;  // for hard links to them
  std::map<std::string, struct timespec[2]> dir_times_;
  bool root_user_ = ::geteuid() == 0;
};

}  // namespace kiln::images
