#include "api/console/console_files.h"

#include <fstream>
#include <iterator>
#include <system_error>

#include "common/digest.h"

namespace kiln::api {

namespace fs = std::filesystem;

namespace {

bool ValidSegment(std::string_view s) {
  if (s.empty() || s.size() > 128 || s.front() == '.') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'))
      return false;
  return true;
}

}  // namespace

bool ConsoleFiles::ValidName(std::string_view name) {
  size_t slash = name.find('/');
  if (slash == std::string_view::npos) return ValidSegment(name);
  return ValidSegment(name.substr(0, slash)) && ValidSegment(name.substr(slash + 1));
}

std::string ConsoleFiles::ContentTypeOf(std::string_view name) {
  static const std::pair<std::string_view, std::string_view> kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".woff2", "font/woff2"},
      {".txt", "text/plain; charset=utf-8"}};
  for (const auto& [ext, type] : kTypes)
    if (name.ends_with(ext)) return std::string(type);
  return "application/octet-stream";
}

Result<ConsoleFiles> ConsoleFiles::Load(const fs::path& dir) {
  ConsoleFiles out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  size_t total = 0;
  auto add = [&](const fs::path& path, const std::string& name) -> Status {
    std::error_code e;
    auto st = fs::symlink_status(path, e);
    if (e || !fs::is_regular_file(st) || !ValidName(name)) return Status();
    auto size = fs::file_size(path, e);
    if (e) return Status(Code::kInternal, "console file " + path.string() + ": " + e.message());
    if (size > kMaxFileBytes || (total += size) > kMaxTotalBytes || out.files_.size() >= kMaxFiles)
      return Status(Code::kInvalidRequest,
                    "--console-dir " + dir.string() + " is not a console build: " + path.string() +
                        " passes the limits (8 MiB a file, 64 MiB and 256 files in all)");
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof())
      return Status(Code::kInternal, "console file " + path.string() + " could not be read");
    Xxh3 digest;
    digest.Update(bytes);
    File f{std::move(bytes), ContentTypeOf(name), "\"" + digest.HexDigest().substr(0, 16) + "\""};
    out.files_.emplace(name, std::move(f));
    return Status();
  };
  for (const auto& top : fs::directory_iterator(dir, ec)) {
    std::string name = top.path().filename().string();
    std::error_code e;
    if (fs::is_directory(fs::symlink_status(top.path(), e)) && ValidSegment(name)) {
      for (const auto& sub : fs::directory_iterator(top.path(), e))
        if (Status s = add(sub.path(), name + "/" + sub.path().filename().string()); !s.ok())
          return s;
      continue;
    }
    if (Status s = add(top.path(), name); !s.ok()) return s;
  }
  if (ec) return Status(Code::kInternal, "--console-dir " + dir.string() + ": " + ec.message());
  return out;
}

const ConsoleFiles::File* ConsoleFiles::Find(std::string_view name) const {
  if (!ValidName(name)) return nullptr;
  auto it = files_.find(name);
  return it == files_.end() ? nullptr : &it->second;
}

}  // namespace kiln::api
