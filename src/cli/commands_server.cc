// kiln server: the daemon ships next to the client, so run that one rather
// than whatever kilnd happens to be on PATH.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "cli/commands.h"
#include "cli/output.h"

namespace kiln::cli {

int CmdServer(const std::vector<std::string>& args) {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    WriteAll(STDERR_FILENO, "kiln: cannot find where kiln is installed: " + ec.message() + "\n");
    return 1;
  }
  const std::string daemon = (self.parent_path() / "kilnd").string();

  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(daemon.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(daemon.c_str(), argv.data());

  // Only reached when exec failed.
  WriteAll(STDERR_FILENO,
           "kiln: cannot start the daemon " + daemon + ": " + std::strerror(errno) + "\n");
  return 1;
}

}  // namespace kiln::cli
