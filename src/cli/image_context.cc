#include "cli/image_context.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "common/archive_error.h"
#include "common/digest.h"
#include "images/context/dockerignore.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;
using images::DockerIgnore;

struct ArchiveDeleter {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct EntryDeleter {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

la_ssize_t AppendToString(archive*, void* out, const void* buf, size_t n) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(buf), n);
  return static_cast<la_ssize_t>(n);
}

struct Entry {
  std::string rel;
  fs::path full;
};

constexpr std::string_view kAlwaysKept[] = {".dockerignore", "Dockerfile"};

Status Walk(const fs::path& dir, const std::string& rel_dir, const DockerIgnore* ignore,
            std::vector<Entry>& out) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return Status(Code::kInvalidRequest, "cannot read " + dir.string() + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string rel = rel_dir.empty() ? name : rel_dir + "/" + name;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) {
      return Status(Code::kInvalidRequest, "cannot stat " + it->path().string());
    }
    const bool kept =
        std::find(std::begin(kAlwaysKept), std::end(kAlwaysKept), rel) != std::end(kAlwaysKept);
    const bool skip = ignore != nullptr && !kept && ignore->Excluded(rel);
    if (S_ISDIR(st.st_mode)) {
      if (!skip) out.push_back({rel, it->path()});
      if (!skip || ignore->HasExceptions()) {
        if (Status s = Walk(it->path(), rel, ignore, out); !s.ok()) return s;
      }
    } else if ((S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) && !skip) {
      out.push_back({rel, it->path()});
    }
  }
  if (ec) return Status(Code::kInvalidRequest, "cannot read " + dir.string() + ": " + ec.message());
  return Status::Ok();
}

Result<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(Code::kInvalidRequest, "cannot read " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status(Code::kInvalidRequest, "cannot read " + path.string());
  return ss.str();
}

}  // namespace

std::string StoredGzip(std::string_view data) {
  std::string out("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10);
  auto put16 = [&out](unsigned v) {
    out += static_cast<char>(v & 0xff);
    out += static_cast<char>((v >> 8) & 0xff);
  };
  auto put32 = [&out](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  std::size_t pos = 0;
  do {
    const std::size_t n = std::min<std::size_t>(0xffff, data.size() - pos);
    pos += n;
    out += static_cast<char>(pos >= data.size() ? 1 : 0);
    put16(static_cast<unsigned>(n));
    put16(static_cast<unsigned>(n) ^ 0xffffU);
    out.append(data.substr(pos - n, n));
  } while (pos < data.size());
  uLong crc = crc32(0L, Z_NULL, 0);
  for (std::size_t off = 0; off < data.size(); off += 1U << 30) {
    const std::size_t n = std::min<std::size_t>(1U << 30, data.size() - off);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + off), static_cast<uInt>(n));
  }
  put32(static_cast<std::uint32_t>(crc));
  put32(static_cast<std::uint32_t>(data.size() & 0xffffffffU));
  return out;
}

Result<PackedContext> PackContext(const std::string& dir,
                                  const std::optional<std::string>& dockerignore) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status(Code::kInvalidRequest, "context " + dir + " is not a directory");
  }
  std::optional<std::string> rules = dockerignore;
  const fs::path ignore_file = fs::path(dir) / ".dockerignore";
  if (!rules && fs::is_regular_file(ignore_file, ec)) {
    Result<std::string> text = ReadFile(ignore_file);
    if (!text.ok()) return text.status();
    rules = std::move(*text);
  }
  std::optional<DockerIgnore> ignore;
  if (rules && !rules->empty()) {
    Result<DockerIgnore> parsed = DockerIgnore::Parse(*rules);
    if (!parsed.ok()) return parsed.status();
    ignore = std::move(*parsed);
  }
  std::vector<Entry> entries;
  if (Status s = Walk(dir, "", ignore ? &*ignore : nullptr, entries); !s.ok()) return s;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.rel < b.rel; });

  std::string tar;
  std::unique_ptr<archive, ArchiveDeleter> a(archive_write_new());
  archive_write_set_format_ustar(a.get());
  archive_write_add_filter_none(a.get());
  archive_write_set_bytes_per_block(a.get(), 0);  // no padding past the end blocks
  if (archive_write_open2(a.get(), &tar, nullptr, AppendToString, nullptr, nullptr) != ARCHIVE_OK) {
    return Status(Code::kInternal, std::string("libarchive: ") + ArchiveError(a.get()));
  }
  for (const auto& e : entries) {
    struct stat st {};
    if (::lstat(e.full.c_str(), &st) != 0) {
      return Status(Code::kInvalidRequest, "cannot stat " + e.full.string());
    }
    std::unique_ptr<archive_entry, EntryDeleter> entry(archive_entry_new());
    archive_entry_set_pathname(entry.get(), e.rel.c_str());
    archive_entry_set_perm(entry.get(), st.st_mode & 07777);
    archive_entry_set_uid(entry.get(), 0);
    archive_entry_set_gid(entry.get(), 0);
    archive_entry_set_mtime(entry.get(), 0, 0);
    std::string data;
    if (S_ISDIR(st.st_mode)) {
      archive_entry_set_filetype(entry.get(), AE_IFDIR);
      archive_entry_set_size(entry.get(), 0);
    } else if (S_ISLNK(st.st_mode)) {
      const fs::path target = fs::read_symlink(e.full, ec);
      if (ec) return Status(Code::kInvalidRequest, "cannot read link " + e.full.string());
      if (target.string().size() > 100) {
        return Status(Code::kInvalidRequest,
                      "symlink target too long for a ustar archive: " + e.rel);
      }
      archive_entry_set_filetype(entry.get(), AE_IFLNK);
      archive_entry_set_symlink(entry.get(), target.c_str());
      archive_entry_set_size(entry.get(), 0);
    } else {
      Result<std::string> content = ReadFile(e.full);
      if (!content.ok()) return content.status();
      data = std::move(*content);
      archive_entry_set_filetype(entry.get(), AE_IFREG);
      archive_entry_set_size(entry.get(), static_cast<la_int64_t>(data.size()));
    }
    if (archive_write_header(a.get(), entry.get()) != ARCHIVE_OK) {
      return Status(Code::kInvalidRequest, "cannot pack " + e.rel + ": " + ArchiveError(a.get()));
    }
    if (!data.empty() && archive_write_data(a.get(), data.data(), data.size()) !=
                             static_cast<la_ssize_t>(data.size())) {
      return Status(Code::kInternal, "cannot pack " + e.rel + ": " + ArchiveError(a.get()));
    }
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK) {
    return Status(Code::kInternal, std::string("libarchive: ") + ArchiveError(a.get()));
  }
  PackedContext out;
  out.bytes = StoredGzip(tar);
  out.digest = "sha256:" + Sha256Hex(out.bytes);
  return out;
}

}  // namespace kiln::cli
