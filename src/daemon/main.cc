// kilnd: the kiln daemon. Serves the /v1 HTTP API and runs each sandbox in
// gVisor.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "api/console/console_files.h"
#include "api/front.h"
#include "api/http_server.h"
#include "api/stream_limit.h"
#include "common/heap.h"
#include "common/log.h"
#include "common/secret_box.h"
#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "control/egress_log.h"
#include "control/keys.h"
#include "control/previews.h"
#include "control/sandbox_manager.h"
#include "daemon/flags.h"
#include "daemon/fronts.h"
#include "daemon/housekeeping.h"
#include "daemon/layer_options.h"
#include "daemon/process_metrics.h"
#include "egress/egress.h"
#include "engine/runsc_engine.h"
#include "images/manager/built_images.h"
#include "images/manager/front_images.h"
#include "images/manager/image_manager.h"
#include "images/manager/pulled_images.h"
#include "images/manager/staged_builds.h"
#include "io/service.h"
#include "store/db.h"
#include "store/egress_log_store.h"
#include "store/idempotency_store.h"
#include "store/image_catalog.h"
#include "store/image_store.h"
#include "store/key_store.h"
#include "store/sandbox_store.h"
#include "store/snapshot_store.h"
#include "store/usage_store.h"

namespace {

kiln::api::HttpServer* g_server = nullptr;

// Every queued or streaming request holds a socket, and each sandbox a few
// pipes: the usual soft limit of 1024 open files would cap the queue long
// before memory does. Raise it to the hard limit, as servers do.
void RaiseOpenFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < 16384)
    kiln::LogInfo("open-file limit is low: queued creates past it wait in the listen backlog",
                  {{"limit", static_cast<uint64_t>(lim.rlim_cur)}});
}

// `kilnd --version`: kiln's version and the runsc it would use.
int PrintVersion(const kiln::daemon::Flags& flags) {
  kiln::StartChildReaper();  // RunProcess hands children to the reaper
  std::string version = kiln::engine::RunscVersion(flags.runsc);
  std::printf("kilnd %s\n", KILN_VERSION);
  std::printf(
      "runsc %s %s%s\n", version.empty() ? "(cannot run)" : version.c_str(), flags.runsc.c_str(),
      version == KILN_RUNSC_VERSION ? " (pinned)" : " (not the pinned " KILN_RUNSC_VERSION ")");
  return version.empty() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  kiln::heap::UseOneArena();
  kiln::daemon::Flags flags;
  if (int rc = kiln::daemon::ParseFlags(argc, argv, &flags, std::cout, std::cerr); rc >= 0)
    return rc;
  if (flags.version) return PrintVersion(flags);
  kiln::daemon::FillDefaultPaths(&flags);
  signal(SIGPIPE, SIG_IGN);
  RaiseOpenFileLimit();
  // Block SIGTERM/SIGINT before any thread starts, so that only the
  // shutdown thread below ever receives them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  kiln::StartChildReaper();

  // Before anything touches the state directory: a kilnd that cannot start
  // one sandbox refuses to start, saying which runsc and what is wrong.
  if (auto probe = kiln::engine::ProbeRunsc(flags.runsc); !probe.ok()) {
    kiln::LogError("cannot start: " + probe.status().message() +
                       "; build the pinned one with `make setup` (scripts/build-runsc.sh), "
                       "or name another with --runsc PATH",
                   {{"runsc", flags.runsc}});
    return 1;
  }
  kiln::engine::RunscEngine engine(
      {flags.state_dir, flags.runsc, flags.platform, flags.agent, 30000, KILN_RUNSC_VERSION});
  kiln::engine::EngineInfo engine_info = engine.Info();
  if (engine_info.version.empty()) {
    kiln::LogError(
        "runsc cannot run: build the pinned one with `make setup` "
        "(scripts/build-runsc.sh), or name another with --runsc PATH",
        {{"runsc", flags.runsc}});
    return 1;
  }
  if (!engine_info.pinned())
    kiln::LogWarn("runsc is not the pinned version: kiln is built and tested with the pinned one",
                  {{"runsc", flags.runsc},
                   {"version", engine_info.version},
                   {"pinned", engine_info.pinned_version}});
  std::string rootfs;
  try {
    rootfs = kiln::store::EnsureBaseImage(flags.image_dir,
                                          std::filesystem::weakly_canonical(flags.image_recipe));
  } catch (const std::exception& e) {
    kiln::LogError("no base image", {{"error", e.what()}});
    return 1;
  }
  kiln::control::CapacityLimits limits = kiln::daemon::CapacityLimitsFrom(flags);
  kiln::control::ManagerOptions options;
  try {
    options = kiln::daemon::ManagerOptionsFrom(flags, limits);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kilnd: --prices: %s\n", e.what());
    return 2;
  }
  // One daemon per state directory: a second one would adopt, and then
  // fight over, the first one's sandboxes.
  // Image roots and layers hold what tenants' images hold, setuid-root
  // binaries and file capabilities included: no host user but root may
  // reach into them (nor into snapshots, sandboxes' disks, the database).
  // The folders above the roots are closed, not the roots (a root's own
  // mode is the sandbox's "/").
  for (const std::string& dir : {flags.state_dir, flags.image_dir}) {
    std::filesystem::create_directories(dir);
    if (::chmod(dir.c_str(), 0700) != 0)
      kiln::LogWarn("cannot close a state folder to other users",
                    {{"path", dir}, {"error", strerror(errno)}});
  }
  kiln::UniqueFd lock_fd(
      ::open((flags.state_dir + "/kilnd.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock_fd || ::flock(lock_fd.get(), LOCK_EX | LOCK_NB) < 0) {
    kiln::LogError("another kilnd uses this state directory", {{"stateDir", flags.state_dir}});
    return 1;
  }
  // kilnd.clean is written by a clean stop and removed at start: when it is
  // missing next to an existing database, the last kilnd crashed (or was
  // killed) and re-adoptions count towards the crash-loop limit.
  std::string clean_mark = flags.state_dir + "/kilnd.clean";
  options.after_crash =
      std::filesystem::exists(flags.state_dir + "/kiln.db") && !std::filesystem::exists(clean_mark);
  std::filesystem::remove(clean_mark);
  std::unique_ptr<kiln::store::Db> db;
  try {
    db = std::make_unique<kiln::store::Db>(flags.state_dir + "/kiln.db");
    ::chmod((flags.state_dir + "/kiln.db").c_str(), 0600);
  } catch (const std::exception& e) {
    kiln::LogError("cannot open the state database", {{"error", e.what()}});
    return 1;
  }
  kiln::store::KeyStore keys(*db);
  kiln::store::IdempotencyStore idempotency(*db);
  kiln::store::UsageStore usage(*db);
  kiln::store::SandboxStore records(*db);
  kiln::store::EgressLogStore egress_log(*db);
  egress_log.CloseAllOpen();  // connections of a daemon that died ended with it
  std::unique_ptr<kiln::egress::Resolver> resolver;
  if (flags.test_resolver_file.empty()) {
    resolver = kiln::egress::SystemResolver();
  } else {
    kiln::LogWarn("egress names come from a test resolver file",
                  {{"file", flags.test_resolver_file}});
    resolver = kiln::egress::FileResolver(flags.test_resolver_file);
  }
  kiln::egress::EgressService egress(std::move(resolver), egress_log,
                                     kiln::daemon::EgressOptionsFrom(flags));
  for (const std::string& endpoint : flags.egress_internal)
    kiln::LogInfo("sandboxes may reach an internal endpoint",
                  {{"event", "egress.internal"}, {"endpoint", endpoint}});
  std::string admin_key_file =
      flags.admin_key_file.empty() ? flags.state_dir + "/admin.key" : flags.admin_key_file;
  std::string admin_id = keys.EnsureLocalAdminKey(admin_key_file);
  // Bind before re-adopting sandboxes: a daemon that cannot serve must not
  // take over (and on exit stop) what it cannot manage.
  std::unique_ptr<kiln::api::HttpServer> server;
  kiln::api::ApiFront* front_ptr = nullptr;
  try {
    server = std::make_unique<kiln::api::HttpServer>(
        flags.listen, [&front_ptr](kiln::api::Exchange& ex) { front_ptr->Handle(ex); },
        kiln::daemon::ServerLimitsFrom(flags));
    server->Listen();
  } catch (const std::exception& e) {
    kiln::LogError("cannot serve", {{"listen", flags.listen}, {"error", e.what()}});
    return 1;
  }
  kiln::store::SnapshotStore snapshots(flags.state_dir + "/snapshots");
  kiln::control::Capacity capacity(limits);
  // Re-adopts what an earlier kilnd left running (see SandboxManager).
  kiln::control::SandboxManager sandboxes(
      {engine, rootfs, snapshots, records, usage, capacity, &egress}, options);
  auto secrets = kiln::SecretBox::Open(flags.state_dir + "/secrets.key");
  if (!secrets.ok()) {
    kiln::LogError("cannot open the secrets key", {{"error", secrets.status().ToString()}});
    return 1;
  }
  kiln::store::ImageCatalog image_catalog(*db, &*secrets);
  kiln::images::ImageManagerOptions image_options =
      kiln::daemon::ImageOptionsFrom(flags, rootfs, egress);
  kiln::images::ImageManager images(image_options, image_catalog, sandboxes, engine);
  kiln::images::StagedBuilds staged_builds(images, secrets->Derive("template upload links"),
                                           image_options.store_dir + "/staged");
  kiln::api::StreamLimiter streams(flags.max_streams_per_sandbox);
  kiln::api::RateLimiter rate_limiter({flags.rate_limit, flags.rate_burst});
  kiln::launch::Launcher launcher(sandboxes, &images);
  // An autoWake is charged as a wake is: under the launcher's spending check.
  kiln::io::Service io([&launcher](const std::string& key, std::optional<int64_t> limit) {
    return launcher.CheckSpendingLimit(key, limit);
  });
  kiln::api::StreamLimiter port_connections(flags.max_port_connections);
  kiln::api::RelayRegistry relays;
  // The services the fronts call in place of the stores (api/context.h).
  kiln::control::Keys key_service(keys);
  kiln::control::EgressLog egress_pages(egress_log);
  kiln::store::PreviewStore preview_store(*db);
  kiln::control::Previews previews(
      preview_store, key_service,
      {flags.allow_public_previews, [&relays](const std::string& sandbox_id, int port) {
         relays.Cut(kiln::api::RelayKey(sandbox_id, port));
       }});
  kiln::api::TerminalTickets terminal_tickets;
  kiln::images::FrontImages front_images(
      images,
      [&key_service]() -> std::optional<std::string> {
        auto operators = key_service.Operators();
        if (operators.empty()) return std::nullopt;
        return operators.front().id;
      },
      kiln::daemon::FrontImagesFrom(flags));
  kiln::images::PulledImages pulled_images(images);
  kiln::images::BuiltImages built_images(images);
  kiln::api::ApiContext ctx{sandboxes, launcher, io, key_service, egress_pages, &images, &streams};
  ctx.tickets = &terminal_tickets;
  ctx.staged_builds = &staged_builds;
  ctx.front_images = &front_images;
  ctx.pulled_images = &pulled_images;
  ctx.built_images = &built_images;
  ctx.e2b_image_metadata_key = flags.e2b_image_metadata_key;
  ctx.previews = &previews;
  ctx.relays = &relays;
  ctx.sandbox_token_key = secrets->Derive("e2b sandbox access tokens");
  ctx.ports = kiln::daemon::PortSettingsFrom(flags);
  ctx.ports.connections = &port_connections;
  kiln::daemon::AddProcessCollectors();  // GET /metrics shows them beside the routes' own
  auto console_files = kiln::api::ConsoleFiles::Load(flags.console_dir);
  if (!console_files.ok()) {
    std::cerr << "kilnd: " << console_files.status().message() << "\n";
    return 2;
  }
  kiln::api::Router router;
  kiln::daemon::AddFrontRoutes(router, ctx, kiln::daemon::SandboxFusionOptionsFrom(flags),
                               *console_files);
  kiln::api::ApiFront front(router, keys, idempotency, &rate_limiter);
  kiln::daemon::ConfigureFront(front, ctx);
  front_ptr = &front;
  kiln::daemon::StartDatabasePruning(idempotency, usage, egress_log);
  kiln::daemon::StartHeapTrimming();

  g_server = server.get();
  // SIGTERM/SIGINT: stop accepting, then stop every sandbox (in ~SandboxManager).
  std::thread([set] {
    int sig;
    sigwait(&set, &sig);
    kiln::LogInfo("shutting down", {{"signal", sig}});
    g_server->Stop();
  }).detach();
  kiln::LogInfo(
      "kilnd listening",
      {{"listen", flags.listen},
       {"stateDir", flags.state_dir},
       {"image", rootfs},
       {"runsc", engine_info.binary},
       {"runscVersion", engine_info.version},
       {"adminKeyId", admin_id},
       {"adminKeyFile", admin_key_file},
       {"memoryBudgetMiB", limits.memory_budget_mib()},
       {"diskBudgetMiB", limits.disk_budget_mib()},
       {"vcpuBudget", limits.vcpu_budget()},
       {"poolMemoryBudgetMiB", kiln::daemon::PoolMemoryMib(flags, limits)},
       {"console", console_files->empty() ? std::string("not built") : flags.console_dir}});
  server->Run();
  // Stopping the sandboxes first ends requests blocked on them; then the
  // connections drain before anything they use is destroyed.
  images.Shutdown();
  sandboxes.Shutdown("host_stopped");
  engine.ReleaseSharedState();
  if (!server->Drain(10000)) {
    kiln::LogWarn("requests still running at exit", nlohmann::json::object());
    std::ofstream(clean_mark) << "";
    std::_Exit(0);
  }
  std::ofstream(clean_mark) << "";
  return 0;
}
