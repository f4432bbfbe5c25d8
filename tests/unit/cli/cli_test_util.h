// Test-only helpers shared by the kiln CLI unit tests.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/errors.h"
#include "unit/support/temp_dir.h"

namespace kiln::testutil {

// The usage error parse_command_line gives for args, or "(no error)".
inline std::string CommandLineError(const std::vector<std::string>& args) {
  try {
    cli::ParseCommandLine(args);
  } catch (const cli::UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

// The verb's parsed flags and positionals.
inline cli::ParsedArgs VerbArgs(const std::vector<std::string>& args) {
  return cli::ParseCommandLine(args).args;
}

// Runs kiln with stdout and stderr in files (so neither is a terminal).
struct CliRun {
  int status;
  std::string out, err;
};
inline CliRun RunCaptured(const std::vector<std::string>& args) {
  const TempDir dir("kiln-cli-cmd");
  std::string out_path = dir / "out", err_path = dir / "err";
  int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int saved_out = ::dup(STDOUT_FILENO), saved_err = ::dup(STDERR_FILENO);
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(err_fd, STDERR_FILENO);
  int status = cli::RunCli(args);
  ::dup2(saved_out, STDOUT_FILENO);
  ::dup2(saved_err, STDERR_FILENO);
  for (int fd : {out_fd, err_fd, saved_out, saved_err}) ::close(fd);
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  return CliRun{status, slurp(out_path), slurp(err_path)};
}

}  // namespace kiln::testutil
