// Inside the e2b front: what the sandbox plane (sandbox_plane.cc) hands to
// the services it routes to.
#pragma once

#include <memory>
#include <string>

#include "api/context.h"
#include "common/status.h"
#include "control/sandbox.h"

namespace kiln::api::e2b {

// One request into a sandbox, already authorized for it: the caller is the
// sandbox's owner (CallerOf(ex)), its activity is noted.
struct SandboxTarget {
  std::shared_ptr<control::Sandbox> sandbox;
  int port = 0;
  std::string target;  // what the port's server sees: "/process.Process/Start?x=1"
  std::string path;    // target without its query: "/process.Process/Start"
};

// envd on port 49983 (envd/): Connect RPC for process.Process and
// filesystem.Filesystem, GET/POST /files, GET /health.
void ServeEnvd(ApiContext& ctx, Exchange& ex, const SandboxTarget& t);
// An error of envd's, in the shape the request's client reads: a Connect
// error for an RPC path (in its stream's end message for a streaming one),
// E2B's JSON otherwise.
void SendEnvdError(Exchange& ex, const std::string& path, const Status& s);

// The code interpreter on port 49999 (interpreter_port.cc): POST /execute
// and /contexts, over kiln's interpreter.
void ServeInterpreterPort(ApiContext& ctx, Exchange& ex, const SandboxTarget& t);

}  // namespace kiln::api::e2b
