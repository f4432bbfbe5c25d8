// Who the sandbox's commands run as, and in what environment: the image's
// USER, WORKDIR and ENV. kilnd passes it in PID 1's environment
// (KILN_RUN_AS, JSON; see engine::RunAs), so an image built by anyone works
// without kiln baked into it. A restored copy keeps the one it started with.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::agent {

struct RunAs {
  uid_t uid = 1000;
  gid_t gid = 1000;
  std::string user = "user";
  std::string home = "/workspace";
  std::string workdir = "/workspace";
  // The image's ENV ("K=V"), PATH among them.
  std::vector<std::string> env = {
      "PATH=/workspace/.local/bin:/workspace/.npm-global/bin:/usr/local/bin:/usr/bin:/bin"};
};

// Reads KILN_RUN_AS once (kiln's base image defaults when it is absent or
// malformed) and keeps it for the agent's life.
const RunAs& TheRunAs();

// The shell for `command`: /bin/bash, else /bin/sh; "" in an image with
// neither (then only argv works).
std::string Shell();

// Connects to 127.0.0.1:port (and [::1]) every 50 ms until one accepts or
// timeout_ms pass: 0 when ready, 1 when not.
int WaitForPort(int port, int64_t timeout_ms);

}  // namespace kiln::agent
