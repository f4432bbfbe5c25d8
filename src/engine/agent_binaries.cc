#include "engine/agent_binaries.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/digest.h"

namespace kiln::engine {

namespace fs = std::filesystem;

AgentBinaries::AgentBinaries(std::string dir, std::string current)
    : dir_(std::move(dir)), source_(std::move(current)) {
  std::optional<Sha256Digest> digest = Sha256Digest::FromHex(FileSha256Hex(source_));
  if (!digest) return;
  std::string path = dir_ + "/" + digest->hex();
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    // Copied, then renamed: a copy cut short is never taken for the build.
    fs::create_directories(dir_, ec);
    std::string tmp = path + ".partial";
    fs::remove(tmp, ec);
    if (!fs::copy_file(source_, tmp, ec) || ::chmod(tmp.c_str(), 0555) != 0) return;
    fs::rename(tmp, path, ec);
    if (ec) return;
  }
  current_ = digest;
}

std::string AgentBinaries::PathOf(const std::optional<Sha256Digest>& digest) const {
  return digest ? dir_ + "/" + digest->hex() : source_;
}

Result<std::optional<Sha256Digest>> AgentBinaries::Of(const std::string& checkpoint) const {
  std::optional<Sha256Digest> digest = MarkOf(checkpoint);
  if (!digest) return current_;
  std::error_code ec;
  if (digest == current_ || fs::is_regular_file(PathOf(digest), ec)) return digest;
  return Status(Code::kStartupFailed, "the checkpoint was taken with kiln-agent " + digest->str() +
                                          ", which this host does not have (it runs " +
                                          (current_ ? current_->str() : "an unrecorded build") +
                                          "): restore it on the host that took it");
}

void AgentBinaries::Mark(const std::string& dir, const std::optional<Sha256Digest>& digest) {
  std::string path = dir + "/" + kAgentMarker;
  if (digest) {
    std::ofstream(path) << digest->hex() << "\n";
  } else {
    std::error_code ec;
    fs::remove(path, ec);
  }
}

std::optional<Sha256Digest> AgentBinaries::MarkOf(const std::string& dir) {
  // At most the digest and its newline: an imported checkpoint's marker is
  // a tenant's file.
  char text[65] = {};
  std::ifstream(dir + "/" + kAgentMarker).read(text, sizeof text);
  return Sha256Digest::FromHex(std::string_view(text, 64));
}

}  // namespace kiln::engine
