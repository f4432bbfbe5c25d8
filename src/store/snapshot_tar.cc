#include "store/snapshot_tar.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>

#include "common/archive_error.h"

namespace kiln::store {

namespace {

// ustar header fields (offset, length).
constexpr size_t kName = 0, kNameLen = 100;
constexpr size_t kMode = 100, kUid = 108, kGid = 116, kSize = 124, kMtime = 136;
constexpr size_t kChecksum = 148, kType = 156, kMagic = 257, kVersion = 263;

void PutOctal(char* field, size_t len, uint64_t value) {
  // len-1 digits and a NUL.
  std::string digits(len - 1, '0');
  for (size_t i = len - 1; i-- > 0 && value;) {
    digits[i] = static_cast<char>('0' + (value & 7));
    value >>= 3;
  }
  std::memcpy(field, digits.data(), len - 1);
  field[len - 1] = '\0';
}

uint64_t HeaderSum(const char* block) {
  uint64_t sum = 0;
  for (size_t i = 0; i < kTarBlock; ++i)
    sum += (i >= kChecksum && i < kChecksum + 8) ? ' ' : static_cast<unsigned char>(block[i]);
  return sum;
}

// "./a//b" -> "a/b"; "" for a path that is absolute, has a "..", or names
// nothing.
std::string CleanName(const std::string& raw) {
  if (raw.empty() || raw[0] == '/') return "";
  std::string out;
  size_t start = 0;
  while (start <= raw.size()) {
    size_t slash = raw.find('/', start);
    if (slash == std::string::npos) slash = raw.size();
    std::string part = raw.substr(start, slash - start);
    if (part == "..") return "";
    if (!part.empty() && part != ".") out += (out.empty() ? "" : "/") + part;
    start = slash + 1;
  }
  return out;
}

const char* KindOf(archive_entry* e) {
  if (archive_entry_hardlink(e)) return "a hard link";
  switch (archive_entry_filetype(e)) {
    case AE_IFLNK:
      return "a symbolic link";
    case AE_IFCHR:
    case AE_IFBLK:
      return "a device";
    case AE_IFDIR:
      return "a directory";
    case AE_IFIFO:
      return "a fifo";
    default:
      return "of an unknown type";
  }
}

Status Invalid(std::string message) { return Status(Code::kInvalidArchive, std::move(message)); }

}  // namespace

std::string TarFileHeader(std::string_view name, uint64_t size, int64_t mtime_s) {
  std::string block(kTarBlock, '\0');
  char* b = block.data();
  std::memcpy(b + kName, name.data(), std::min(name.size(), kNameLen - 1));
  PutOctal(b + kMode, 8, 0644);
  PutOctal(b + kUid, 8, 0);
  PutOctal(b + kGid, 8, 0);
  if (size < (1ull << 33)) {
    PutOctal(b + kSize, 12, size);
  } else {
    b[kSize] = static_cast<char>(0x80);
    for (int i = 11; i > 0; --i, size >>= 8) b[kSize + i] = static_cast<char>(size & 0xff);
  }
  PutOctal(b + kMtime, 12, static_cast<uint64_t>(std::max<int64_t>(mtime_s, 0)));
  b[kType] = '0';
  std::memcpy(b + kMagic, "ustar", 6);
  std::memcpy(b + kVersion, "00", 2);
  uint64_t sum = HeaderSum(b);
  PutOctal(b + kChecksum, 7, sum);
  b[kChecksum + 7] = ' ';
  return block;
}

std::string TarPadding(uint64_t size) {
  return std::string((kTarBlock - size % kTarBlock) % kTarBlock, '\0');
}

std::string TarEnd() { return std::string(2 * kTarBlock, '\0'); }

namespace {

// libarchive's view of the body: it pulls chunks through Read. Counts what
// it was given, and where the last non-zero byte was, so that the end of
// the tar can be checked (libarchive stops at the first zero block, and at
// a body that simply ends).
struct Pull {
  explicit Pull(const TarSource& s) : source(s) {}

  const TarSource& source;
  std::string chunk;          // what libarchive reads now; kept until the next Read
  uint64_t supplied = 0;      // bytes of the body taken so far
  uint64_t last_nonzero = 0;  // one past the last non-zero byte taken
  bool ended = false;         // the source said the body ended
  std::exception_ptr thrown;  // what the source threw, passed on after libarchive

  // Next non-empty chunk into `chunk`; false at the body's end.
  bool Next() {
    while (!ended) {
      chunk.clear();
      if (!source(&chunk)) {
        ended = true;
        break;
      }
      if (chunk.empty()) continue;
      for (size_t i = chunk.size(); i-- > 0;) {
        if (chunk[i] != '\0') {
          last_nonzero = supplied + i + 1;
          break;
        }
      }
      supplied += chunk.size();
      return true;
    }
    return false;
  }

  // libarchive's read callback: no exception may cross libarchive's C frames.
  static la_ssize_t Read(archive*, void* self, const void** buffer) {
    auto* p = static_cast<Pull*>(self);
    *buffer = nullptr;
    try {
      if (!p->Next()) return 0;
    } catch (...) {
      p->thrown = std::current_exception();
      return -1;
    }
    *buffer = p->chunk.data();
    return static_cast<la_ssize_t>(p->chunk.size());
  }
};

using ReadArchive = std::unique_ptr<archive, decltype(&archive_read_free)>;

// A header libarchive refused: what it means depends on where the body is.
Status HeaderError(archive* a, const Pull& pull, int entries, uint64_t end,
                   const std::string& entry) {
  std::string why = ArchiveError(a);
  if (entries == 0) {
    if (pull.supplied == 0) return Invalid("the body is empty: not a tar");
    if (pull.ended && pull.supplied < kTarBlock)
      return Invalid("the body is not a tar: it ends before its first header");
    return Invalid("the body is not a tar: no tar header at its start (" + why + ")");
  }
  // The body ended within the next header (or within a pax or GNU long
  // name header's data, which libarchive calls truncated too).
  if (pull.ended && (pull.supplied < end + kTarBlock || why.find("runcated") != std::string::npos))
    return Invalid("the tar is truncated: it ends at byte " + std::to_string(pull.supplied) +
                   " before its end-of-archive marker");
  return Invalid("the tar has a damaged header at byte " + std::to_string(end) + " (after entry " +
                 entry + "): " + why);
}

Status ReadEntries(archive* a, Pull& pull, TarSink& sink) {
  int entries = 0;
  std::string entry;  // the last entry's name
  uint64_t end = 0;   // where the last entry's data and padding ended
  for (;;) {
    archive_entry* e = nullptr;
    int rc = archive_read_next_header(a, &e);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK) return HeaderError(a, pull, entries, end, entry);
    const char* path = archive_entry_pathname(e);
    std::string raw = path ? path : "";
    if (archive_entry_hardlink(e) || archive_entry_filetype(e) != AE_IFREG)
      return Invalid("tar entry " + raw + " is " + KindOf(e) +
                     ": a snapshot tar holds only regular files");
    std::string name = CleanName(raw);
    if (name.empty())
      return Invalid("tar entry \"" + raw +
                     "\" has an absolute path, a \"..\" or no name: refused");
    if (!archive_entry_size_is_set(e) || archive_entry_size(e) < 0)
      return Invalid("tar entry " + name + " has a garbled size");
    uint64_t size = static_cast<uint64_t>(archive_entry_size(e));
    ++entries;
    entry = name;
    if (Status s = sink.BeginEntry(name, size); !s.ok()) return s;
    uint64_t got = 0;
    for (;;) {
      const void* buf = nullptr;
      size_t n = 0;
      la_int64_t offset = 0;
      rc = archive_read_data_block(a, &buf, &n, &offset);
      if (rc == ARCHIVE_EOF) break;
      if (rc != ARCHIVE_OK) {
        if (pull.ended)
          return Invalid("the tar is truncated: it ends inside entry " + name + " at byte " +
                         std::to_string(pull.supplied));
        return Invalid("tar entry " + name + " cannot be read: " + ArchiveError(a));
      }
      // A GNU sparse entry skips its holes: not a file kiln wrote.
      if (offset < 0 || static_cast<uint64_t>(offset) != got)
        return Invalid("tar entry " + name + " is sparse: a snapshot tar holds only plain files");
      got += n;
      if (got > size) return Invalid("tar entry " + name + " has more data than its size");
      if (Status s = sink.EntryData(std::string_view(static_cast<const char*>(buf), n)); !s.ok())
        return s;
    }
    if (got != size)
      return Invalid("tar entry " + name + " holds " + std::to_string(got) + " of its " +
                     std::to_string(size) + " bytes");
    if (Status s = sink.EndEntry(); !s.ok()) return s;
    // libarchive has consumed the entry's data and padding by now.
    end = static_cast<uint64_t>(archive_filter_bytes(a, 0));
  }
  // What follows the last entry must be the end-of-archive marker (two zero
  // blocks) and then only zeros, however much of it libarchive looked at.
  while (pull.Next()) {
  }
  if (pull.supplied == 0) return Invalid("the body is empty: not a tar");
  if (pull.last_nonzero > end)
    return Invalid("the tar has data after its end-of-archive marker (at byte " +
                   std::to_string(end) + ")");
  if (pull.supplied < end + 2 * kTarBlock)
    return Invalid("the tar is truncated: it ends at byte " + std::to_string(pull.supplied) +
                   " before its end-of-archive marker");
  return Status::Ok();
}

}  // namespace

Status ReadTar(const TarSource& source, TarSink& sink) {
  Pull pull{source};
  Status result;
  {
    ReadArchive a(archive_read_new(), archive_read_free);
    if (!a) return Status(Code::kIoError, "libarchive: out of memory");
    // Tar only: a snapshot tar is never compressed, and no other format's
    // parser should see these bytes.
    archive_read_support_format_tar(a.get());
    if (archive_read_open(a.get(), &pull, nullptr, &Pull::Read, nullptr) != ARCHIVE_OK)
      result = HeaderError(a.get(), pull, 0, 0, "");
    else
      result = ReadEntries(a.get(), pull, sink);
  }
  if (pull.thrown) std::rethrow_exception(pull.thrown);
  return result;
}

}  // namespace kiln::store
