#include <string>
#include <vector>

#include "cli/cli.h"

int main(int argc, char** argv) {
  return kiln::cli::RunCli(std::vector<std::string>(argv + 1, argv + argc));
}
