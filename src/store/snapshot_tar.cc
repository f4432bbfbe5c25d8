#include "store/snapshot_tar.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::store {

namespace {

// ustar header fields (offset, length).
constexpr size_t kName = 0, kNameLen = 100;
constexpr size_t kMode = 100, kUid = 108, kGid = 116, kSize = 124, kMtime = 136;
constexpr size_t kChecksum = 148, kType = 156, kMagic = 257, kVersion = 263;
constexpr size_t kPrefix = 345, kPrefixLen = 155;

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

// An octal field (leading spaces, ending at a NUL or space), or GNU base-256.
bool ParseNumber(const char* field, size_t len, uint64_t* out) {
  auto* u = reinterpret_cast<const unsigned char*>(field);
  if (u[0] & 0x80) {
    if (u[0] != 0x80) return false;  // negative or too large
    uint64_t v = 0;
    for (size_t i = 1; i < len; ++i) {
      if (v >> 56) return false;
      v = (v << 8) | u[i];
    }
    *out = v;
    return true;
  }
  size_t i = 0;
  while (i < len && field[i] == ' ') ++i;
  uint64_t v = 0;
  bool digits = false;
  for (; i < len && field[i] != '\0' && field[i] != ' '; ++i) {
    if (field[i] < '0' || field[i] > '7' || (v >> 60)) return false;
    v = v * 8 + static_cast<uint64_t>(field[i] - '0');
    digits = true;
  }
  *out = v;
  return digits;
}

std::string Field(const char* block, size_t at, size_t len) {
  const char* p = block + at;
  return std::string(p, strnlen(p, len));
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

const char* KindOf(char type) {
  switch (type) {
    case '1':
      return "a hard link";
    case '2':
      return "a symbolic link";
    case '3':
    case '4':
      return "a device";
    case '5':
      return "a directory";
    case '6':
      return "a fifo";
    case 'x':
    case 'g':
      return "a pax header";
    case 'L':
    case 'K':
      return "a GNU long name";
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

Status TarReader::Fail(Status s) {
  state_ = State::kFailed;
  failed_ = s;
  return s;
}

Status TarReader::Header(const char* b) {
  if (std::all_of(b, b + kTarBlock, [](char c) { return c == '\0'; })) {
    if (++zero_blocks_ == 2) state_ = State::kEnd;
    return Status::Ok();
  }
  std::string where = "at byte " + std::to_string(offset_);
  if (zero_blocks_ > 0) return Fail(Invalid("the tar has an entry after a zero block " + where));
  uint64_t want_sum = 0;
  bool ustar = std::memcmp(b + kMagic, "ustar", 5) == 0;
  if (!ustar || !ParseNumber(b + kChecksum, 8, &want_sum) || want_sum != HeaderSum(b)) {
    if (entries_ == 0 && offset_ == 0)
      return Fail(Invalid("the body is not a tar: no ustar header at its start"));
    return Fail(Invalid("the tar has a damaged header " + where +
                        (entry_.empty() ? "" : " (after entry " + entry_ + ")")));
  }
  std::string raw = Field(b, kName, kNameLen);
  if (std::string prefix = Field(b, kPrefix, kPrefixLen); !prefix.empty()) raw = prefix + "/" + raw;
  char type = b[kType];
  if (type != '0' && type != '\0')
    return Fail(Invalid("tar entry " + raw + " is " + KindOf(type) +
                        ": a snapshot tar holds only regular files"));
  std::string name = CleanName(raw);
  if (name.empty())
    return Fail(
        Invalid("tar entry \"" + raw + "\" has an absolute path, a \"..\" or no name: refused"));
  uint64_t size = 0;
  if (!ParseNumber(b + kSize, 12, &size))
    return Fail(Invalid("tar entry " + name + " has a garbled size"));
  ++entries_;
  entry_ = name;
  remaining_ = size;
  if (Status s = sink_.BeginEntry(name, size); !s.ok()) return Fail(s);
  if (size == 0) {
    if (Status s = sink_.EndEntry(); !s.ok()) return Fail(s);
    return Status::Ok();
  }
  state_ = State::kData;
  return Status::Ok();
}

Status TarReader::Feed(std::string_view data) {
  while (!data.empty()) {
    switch (state_) {
      case State::kFailed:
        return failed_;
      case State::kHeader: {
        size_t take = std::min(data.size(), kTarBlock - block_.size());
        block_.append(data.substr(0, take));
        data.remove_prefix(take);
        if (block_.size() < kTarBlock) break;
        std::string block = std::move(block_);
        block_.clear();
        if (Status s = Header(block.data()); !s.ok()) return s;
        offset_ += kTarBlock;
        break;
      }
      case State::kData: {
        size_t take = static_cast<size_t>(std::min<uint64_t>(data.size(), remaining_));
        if (Status s = sink_.EntryData(data.substr(0, take)); !s.ok()) return Fail(s);
        data.remove_prefix(take);
        offset_ += take;
        remaining_ -= take;
        if (remaining_ == 0) {
          if (Status s = sink_.EndEntry(); !s.ok()) return Fail(s);
          remaining_ = (kTarBlock - offset_ % kTarBlock) % kTarBlock;
          state_ = remaining_ ? State::kPadding : State::kHeader;
        }
        break;
      }
      case State::kPadding: {
        size_t take = static_cast<size_t>(std::min<uint64_t>(data.size(), remaining_));
        data.remove_prefix(take);
        offset_ += take;
        remaining_ -= take;
        if (remaining_ == 0) state_ = State::kHeader;
        break;
      }
      case State::kEnd:
        // What follows the end marker is the writer's record padding: zeros.
        if (std::any_of(data.begin(), data.end(), [](char c) { return c != '\0'; }))
          return Fail(Invalid("the tar has data after its end-of-archive marker"));
        offset_ += data.size();
        data = {};
        break;
    }
  }
  return state_ == State::kFailed ? failed_ : Status::Ok();
}

Status TarReader::Finish() {
  switch (state_) {
    case State::kFailed:
      return failed_;
    case State::kEnd:
      return Status::Ok();
    case State::kData:
    case State::kPadding:
      return Fail(Invalid("the tar is truncated: it ends inside entry " + entry_ + " at byte " +
                          std::to_string(offset_)));
    case State::kHeader:
      break;
  }
  if (offset_ == 0 && block_.empty()) return Fail(Invalid("the body is empty: not a tar"));
  if (entries_ == 0 && zero_blocks_ == 0)
    return Fail(Invalid("the body is not a tar: it ends before its first header"));
  return Fail(Invalid("the tar is truncated: it ends at byte " + std::to_string(offset_) +
                      " before its end-of-archive marker"));
}

}  // namespace kiln::store
