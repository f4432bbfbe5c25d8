// A layer tar read once, hashed twice. A layer is named by two digests: the
// blob's (the bytes as stored, maybe compressed; what manifests list) and the
// diff id (the uncompressed tar; what the config's rootfs lists). Both are
// computed while the entries are read, so a pulled layer is never read twice.
#pragma once

#include <archive.h>

#include <memory>
#include <string>

#include "common/digest.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace kiln::images {

// Not thread-safe; one reader per tar.
class LayerTarReader {
 public:
  // Opens `path`; gzip and zstd are recognized from the bytes, anything else
  // is read as a plain tar. kNotFound/kIoError if unreadable.
  static Result<std::unique_ptr<LayerTarReader>> Open(const std::string& path);
  ~LayerTarReader();
  LayerTarReader(const LayerTarReader&) = delete;
  LayerTarReader& operator=(const LayerTarReader&) = delete;

  // The next entry's header, owned by the reader until the next call; nullptr
  // after the last entry. kInvalidImage for a corrupt or truncated tar.
  Result<archive_entry*> Next();
  // The reader to take the current entry's data from (archive_read_data_block).
  archive* tar() { return tar_; }
  // A kInvalidImage status with libarchive's message for the tar's last error.
  Status TarError(const std::string& what) const;

  // After Next() returned nullptr: reads what follows the tar's end (padding)
  // into both digests and gives them as lowercase hex.
  Status Finish(std::string* blob_sha256, std::string* diff_id);

 private:
  LayerTarReader() = default;
  static la_ssize_t ReadBlob(archive*, void* self, const void** buf);
  static la_ssize_t ReadDiff(archive*, void* self, const void** buf);

  UniqueFd fd_;
  // The stored bytes run through `decoder_` (raw format: the decompressed
  // stream as one entry), whose output feeds `tar_`.
  archive* decoder_ = nullptr;
  archive* tar_ = nullptr;
  Sha256 blob_hash_, diff_hash_;
  std::unique_ptr<char[]> blob_buf_, diff_buf_;
};

}  // namespace kiln::images
