// Writing entries into a layer directory: the one place a layer's files are
// made, whether they come from a layer tar (UnpackLayer, layer_unpack.h) or
// from the files a COPY or ADD takes (images/context/copy_step.cc). Internal
// to the images libraries.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"
#include "images/layers/layer_tar.h"
#include "images/layers/layer_unpack.h"

namespace kiln::images {

// True if `path` is `prefix` or lies under it (both cleaned, relative).
bool HasPathPrefix(const std::string& path, const std::string& prefix);

// One entry as a writer that is not a tar describes it: a file, directory
// or symlink with the owner, mode and times it is to have in the layer.
struct LayerNode {
  mode_t type = S_IFREG;  // S_IFREG, S_IFDIR or S_IFLNK
  mode_t mode = 0644;     // permission bits, setuid, setgid and sticky included
  uid_t uid = 0;          // owner and group: set only when kiln runs as root
  gid_t gid = 0;
  // UTIME_OMIT (in tv_nsec) leaves a time as the creation made it.
  timespec atime{0, UTIME_OMIT};
  timespec mtime{0, UTIME_OMIT};
  std::string link_target;  // S_IFLNK
};

// The state of one layer directory being written: entries go under the
// directory `root` (an open fd the caller keeps). Every path is walked from
// `root` with O_NOFOLLOW, so an entry can never be written through a
// symlink, whatever earlier entries made. Owners are set only as root
// (without root what is written is the caller's own), always before the
// mode, so that setuid bits survive; a directory's times (and, for Put, its
// mode) wait for FinishDirs, after everything that goes into it.
// Not thread-safe.
class LayerWriter {
 public:
  // `options` must outlive the writer; only Entry reads it (a caller of Put
  // alone passes UnpackOptions{}).
  LayerWriter(const UnpackOptions& options, int root) : options_(options), root_(root) {}

  // From a layer tar: writes the entry whose header `e` is, taking its data
  // from `reader`, with layer_unpack.h's rules (whiteouts, hard links,
  // skipped prefixes and devices, xattrs, options.max_bytes).
  Status Entry(LayerTarReader& reader, archive_entry* e);

  // How OpenDir treats the directories it must create, and a component in
  // its way.
  struct DirWalk {
    // The owner, mode and times of a directory OpenDir created at `path`
    // (cleaned, relative), set on it at once. Null: mode 0755 whatever the
    // umask, the writer's own owner, times as the creation made them.
    std::function<LayerNode(const std::string& path)> made;
    // The error for `path` (the part of `dir` walked so far) being a symlink
    // or not a directory. Null: kInvalidImage naming the entry and `path`.
    std::function<Status(const std::string& path)> blocked;
  };
  // Opens the directory `dir` (cleaned, relative; "" for the root) without
  // following symlinks, creating missing components when `create`.
  // `entry` names what it is opened for, in errors.
  Result<UniqueFd> OpenDir(const std::string& dir, bool create, const std::string& entry,
                           const DirWalk& walk = {});

  // From elsewhere (COPY): writes `node` as `name` in the open directory
  // `parent`. `path` is its path in the layer (relative, or absolute as the
  // image sees it), for errors and for FinishDirs. What is there is
  // removed, except a directory where a directory goes, which is kept with
  // what it holds. A file's contents are written by `write_data` on its fd.
  // A directory is given its owner now and its mode and times by
  // FinishDirs (a 0555 one must still take its entries); its fd is
  // returned, to write them into. Other types give an invalid fd.
  Result<UniqueFd> Put(int parent, const std::string& name, const std::string& path,
                       const LayerNode& node,
                       const std::function<Status(int fd)>& write_data = nullptr);

  // Gives the directories Entry and Put made since the last call their
  // times (and Put's their modes), deepest first: writing into a directory
  // changes its mtime. A directory a later entry replaced is passed over.
  Status FinishDirs();
  LayerStats& stats() { return stats_; }

 private:
  // What FinishDirs gives a directory.
  struct DirFinish {
    std::optional<mode_t> mode;  // Put's; Entry sets the mode at once
    timespec times[2];           // atime, mtime
  };

  Status Replace(int parent, const std::string& name, bool keep_dir, const std::string& entry);
  Status WriteFile(LayerTarReader& reader, archive_entry* e, int fd, const std::string& entry);
  // Owner, mode (not a symlink's), the xattrs of `xattrs` (a tar entry; may
  // be null) and, but for a directory, times. `fd` is the open file or
  // directory, or -1 for symlinks and fifos.
  Status SetMetadata(const LayerNode& node, archive_entry* xattrs, int parent,
                     const std::string& name, int fd, const std::string& entry);
  Status SetXattrs(archive_entry* e, int parent, const std::string& name, int fd,
                   const std::string& entry);
  // Makes `node` (a file, symlink or fifo) as `name` in `parent`: Replace,
  // create, `write_data` for a file, then SetMetadata.
  Status Place(int parent, const std::string& name, const std::string& path, const LayerNode& node,
               archive_entry* xattrs, const std::function<Status(int fd)>& write_data);
  // Makes the directory `name` in `parent` (kept if there): its owner (and,
  // unless `mode_last`, its mode and xattrs) now, its times in FinishDirs.
  Result<UniqueFd> PlaceDir(int parent, const std::string& name, const std::string& path,
                            const LayerNode& node, archive_entry* xattrs, bool mode_last);
  Status MakeWhiteout(int parent, const std::string& name, const std::string& entry);
  Status HardLink(archive_entry* e, int parent, const std::string& name, const std::string& entry);

  const UnpackOptions& options_;
  int root_;
  LayerStats stats_;
  std::set<std::string> whiteout_devices_, skipped_;  // for hard links to them
  std::map<std::string, DirFinish> dirs_;             // by cleaned relative path; "" the root
  bool root_user_ = ::geteuid() == 0;
};

}  // namespace kiln::images
