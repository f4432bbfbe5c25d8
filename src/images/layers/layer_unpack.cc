#include "images/layers/layer_unpack.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>

#include "common/unique_fd.h"
#include "images/layers/fs_tree.h"
#include "images/layers/layer_tar.h"
#include "images/layers/layer_writer.h"

namespace kiln::images {
namespace {

std::string StripAlgorithm(const std::string& digest) {
  return digest.rfind("sha256:", 0) == 0 ? digest.substr(7) : digest;
}

Result<LayerStats> Unpack(const std::string& tar_path, int root, const UnpackOptions& options) {
  auto reader = LayerTarReader::Open(tar_path);
  if (!reader.ok()) return reader.status();
  LayerWriter writer(options, root);
  for (;;) {
    auto entry = (*reader)->Next();
    if (!entry.ok()) return entry.status();
    if (*entry == nullptr) break;
    if (Status s = writer.Entry(**reader, *entry); !s.ok()) return s;
  }
  LayerStats& stats = writer.stats();
  if (Status s = (*reader)->Finish(&stats.blob_sha256, &stats.diff_id); !s.ok()) return s;
  if (options.expected_blob_sha256 &&
      StripAlgorithm(*options.expected_blob_sha256) != stats.blob_sha256)
    return Status(Code::kInvalidImage,
                  "layer " + tar_path + ": blob sha256 is " + stats.blob_sha256 + ", expected " +
                      *options.expected_blob_sha256,
                  {{"path", tar_path}});
  if (options.expected_diff_id && StripAlgorithm(*options.expected_diff_id) != stats.diff_id)
    return Status(Code::kInvalidImage,
                  "layer " + tar_path + ": diff id is " + stats.diff_id + ", expected " +
                      *options.expected_diff_id,
                  {{"path", tar_path}});
  if (Status s = writer.FinishDirs(); !s.ok()) return s;
  return stats;
}

}  // namespace

std::optional<std::string> CleanLayerPath(const std::string& path) {
  if (!path.empty() && path[0] == '/') return std::nullopt;
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string comp = path.substr(start, end - start);
    start = end + 1;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") {
      if (parts.empty()) return std::nullopt;
      parts.pop_back();
      continue;
    }
    parts.push_back(std::move(comp));
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "/") + p;
  return out;
}

Result<LayerStats> UnpackLayer(const std::string& tar_path, const std::string& dest_dir,
                               const UnpackOptions& options) {
  std::error_code ec;
  std::filesystem::path dest(dest_dir);
  if (dest.has_parent_path()) std::filesystem::create_directories(dest.parent_path(), ec);
  if (::mkdir(dest_dir.c_str(), 0755) != 0) {
    if (errno == EEXIST)
      return Status(Code::kFileExists, "layer directory " + dest_dir + " already exists",
                    {{"path", dest_dir}});
    return ErrnoStatus(Code::kIoError, "mkdir " + dest_dir, errno, dest_dir);
  }
  Result<LayerStats> result = [&]() -> Result<LayerStats> {
    UniqueFd root(::open(dest_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!root) return ErrnoStatus(Code::kIoError, "open " + dest_dir, errno, dest_dir);
    ::fchmod(root.get(), 0755);  // a "./" entry may say otherwise; the umask may not
    return Unpack(tar_path, root.get(), options);
  }();
  if (!result.ok()) (void)RemoveTreeAt(AT_FDCWD, dest_dir);
  return result;
}

}  // namespace kiln::images
