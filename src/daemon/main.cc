// kilnd: the kiln daemon. Serves the /v1 HTTP API and runs each sandbox in
// gVisor.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "api/http_server.h"
#include "api/routes.h"
#include "common/log.h"
#include "common/subprocess.h"
#include "control/sandbox_manager.h"
#include "engine/runsc_engine.h"
#include "store/image_store.h"
#include "store/snapshot_store.h"

namespace {

struct Flags {
  std::string listen = "127.0.0.1:7070";
  std::string state_dir = "/var/lib/kiln";
  std::string image_dir;  // default <state_dir>/images
  std::string runsc = "runsc";
  std::string platform = "systrap";
  std::string agent;         // default: kiln-agent beside kilnd
  std::string image_recipe;  // default: <repo>/images/base/build.sh
  int pool_size = 0;         // ready copies kept for every new snapshot
};

std::string ExeDir() { return std::filesystem::canonical("/proc/self/exe").parent_path(); }

void Usage() {
  std::fprintf(stderr,
               "usage: kilnd [--listen HOST:PORT] [--state-dir DIR] [--image-dir DIR]\n"
               "             [--runsc PATH] [--platform systrap|ptrace] [--agent PATH] "
               "[--image-recipe PATH] [--pool-size N]\n");
}

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string value;
    size_t eq = a.find('=');
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (a != "--help" && i + 1 < argc) {
      value = argv[++i];
    }
    if (a == "--listen")
      f->listen = value;
    else if (a == "--state-dir")
      f->state_dir = value;
    else if (a == "--image-dir")
      f->image_dir = value;
    else if (a == "--runsc")
      f->runsc = value;
    else if (a == "--platform")
      f->platform = value;
    else if (a == "--agent")
      f->agent = value;
    else if (a == "--image-recipe")
      f->image_recipe = value;
    else if (a == "--pool-size")
      f->pool_size = std::atoi(value.c_str());
    else {
      std::fprintf(stderr, "kilnd: unknown flag %s\n", a.c_str());
      return false;
    }
    if (value.empty()) {
      std::fprintf(stderr, "kilnd: %s needs a value\n", a.c_str());
      return false;
    }
  }
  return true;
}

kiln::api::HttpServer* g_server = nullptr;

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    Usage();
    return 2;
  }
  if (flags.image_dir.empty()) flags.image_dir = flags.state_dir + "/images";
  if (flags.agent.empty()) flags.agent = ExeDir() + "/kiln-agent";
  if (flags.image_recipe.empty()) flags.image_recipe = ExeDir() + "/../../images/base/build.sh";
  signal(SIGPIPE, SIG_IGN);
  // Block SIGTERM/SIGINT before any thread starts, so that only the
  // shutdown thread below ever receives them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  kiln::StartChildReaper();

  std::string rootfs;
  try {
    rootfs = kiln::store::EnsureBaseImage(flags.image_dir,
                                          std::filesystem::weakly_canonical(flags.image_recipe));
  } catch (const std::exception& e) {
    kiln::LogError("no base image", {{"error", e.what()}});
    return 1;
  }
  kiln::engine::RunscEngine engine({flags.state_dir, flags.runsc, flags.platform, flags.agent});
  // Sandboxes left by an earlier kilnd: their channels are gone with it
  // until restart recovery re-adopts them, so clean them up.
  for (const auto& id : engine.List()) {
    kiln::LogWarn("removing a sandbox left by an earlier daemon", {{"sandboxId", id}});
    engine.Destroy(id);
  }
  kiln::store::SnapshotStore snapshots(flags.state_dir + "/snapshots");
  kiln::control::SandboxManager sandboxes(engine, rootfs, snapshots, flags.pool_size);
  kiln::api::ApiContext ctx{sandboxes};
  kiln::api::Router router;
  kiln::api::AddSandboxRoutes(router, ctx);
  kiln::api::AddExecRoutes(router, ctx);
  kiln::api::AddProcessRoutes(router, ctx);
  kiln::api::AddFileRoutes(router, ctx);
  kiln::api::AddSnapshotRoutes(router, ctx);

  kiln::api::HttpServer server(flags.listen, [&](kiln::api::Exchange& ex) { router.Dispatch(ex); });
  g_server = &server;
  // SIGTERM/SIGINT: stop accepting, then stop every sandbox (in ~SandboxManager).
  std::thread([set] {
    int sig;
    sigwait(&set, &sig);
    kiln::LogInfo("shutting down", {{"signal", sig}});
    g_server->Stop();
  }).detach();
  kiln::LogInfo("kilnd listening",
                {{"listen", flags.listen}, {"stateDir", flags.state_dir}, {"image", rootfs}});
  try {
    server.Run();
  } catch (const std::exception& e) {
    kiln::LogError("cannot serve", {{"listen", flags.listen}, {"error", e.what()}});
    return 1;
  }
  return 0;
}
