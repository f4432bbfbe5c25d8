#include "images/layers/layer_tar.h"

#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "images/layers/fs_tree.h"

namespace kiln::images {
namespace {

constexpr size_t kBlock = 1 << 16;

}  // namespace

Result<std::unique_ptr<LayerTarReader>> LayerTarReader::Open(const std::string& path) {
  std::unique_ptr<LayerTarReader> r(new LayerTarReader());
  r->fd_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!r->fd_)
    return ErrnoStatus(errno == ENOENT ? Code::kNotFound : Code::kIoError, "open layer " + path,
                       errno, path);
  r->blob_buf_.reset(new char[kBlock]);
  r->diff_buf_.reset(new char[kBlock]);

  // Only the compressions image layers use: no external filter programs.
  r->decoder_ = archive_read_new();
  archive_read_support_filter_gzip(r->decoder_);
  archive_read_support_filter_zstd(r->decoder_);
  archive_read_support_format_raw(r->decoder_);
  archive_entry* raw = nullptr;
  if (archive_read_open(r->decoder_, r.get(), nullptr, &ReadBlob, nullptr) != ARCHIVE_OK ||
      archive_read_next_header(r->decoder_, &raw) != ARCHIVE_OK) {
    const char* why = archive_error_string(r->decoder_);
    return Status(Code::kInvalidImage, "layer " + path + ": " + (why ? why : "empty"),
                  {{"path", path}});
  }
  r->tar_ = archive_read_new();
  archive_read_support_format_tar(r->tar_);
  if (archive_read_open(r->tar_, r.get(), nullptr, &ReadDiff, nullptr) != ARCHIVE_OK)
    return r->TarError("layer " + path);
  return r;
}

LayerTarReader::~LayerTarReader() {
  if (tar_) archive_read_free(tar_);
  if (decoder_) archive_read_free(decoder_);
}

la_ssize_t LayerTarReader::ReadBlob(archive* a, void* self, const void** buf) {
  auto* r = static_cast<LayerTarReader*>(self);
  ssize_t n;
  do {
    n = ::read(r->fd_.get(), r->blob_buf_.get(), kBlock);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    archive_set_error(a, errno, "read: %s", strerror(errno));
    return -1;
  }
  r->blob_hash_.Update(r->blob_buf_.get(), static_cast<size_t>(n));
  *buf = r->blob_buf_.get();
  return n;
}

la_ssize_t LayerTarReader::ReadDiff(archive* a, void* self, const void** buf) {
  auto* r = static_cast<LayerTarReader*>(self);
  la_ssize_t n = archive_read_data(r->decoder_, r->diff_buf_.get(), kBlock);
  if (n < 0) {
    const char* why = archive_error_string(r->decoder_);
    archive_set_error(a, EIO, "%s", why ? why : "decompression failed");
    return -1;
  }
  r->diff_hash_.Update(r->diff_buf_.get(), static_cast<size_t>(n));
  *buf = r->diff_buf_.get();
  return n;
}

Result<archive_entry*> LayerTarReader::Next() {
  archive_entry* entry = nullptr;
  int rc = archive_read_next_header(tar_, &entry);
  if (rc == ARCHIVE_EOF) return static_cast<archive_entry*>(nullptr);
  // ARCHIVE_WARN covers harmless oddities (unknown pax keywords); an entry
  // still came with it.
  if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) return TarError("reading the layer tar");
  return entry;
}

Status LayerTarReader::TarError(const std::string& what) const {
  const char* why = archive_error_string(tar_);
  return Status(Code::kInvalidImage, what + ": " + (why ? why : "malformed tar"));
}

Status LayerTarReader::Finish(std::string* blob_sha256, std::string* diff_id) {
  char buf[kBlock];
  la_ssize_t n;
  while ((n = archive_read_data(decoder_, buf, sizeof buf)) > 0)
    diff_hash_.Update(buf, static_cast<size_t>(n));
  if (n < 0) {
    const char* why = archive_error_string(decoder_);
    return Status(Code::kInvalidImage,
                  std::string("reading the layer after its tar: ") + (why ? why : "failed"));
  }
  const void* ignored;
  while ((n = ReadBlob(decoder_, this, &ignored)) > 0) {
  }
  if (n < 0) return ErrnoStatus(Code::kIoError, "reading the layer", errno);
  *blob_sha256 = blob_hash_.HexDigest();
  *diff_id = diff_hash_.HexDigest();
  return Status::Ok();
}

}  // namespace kiln::images
