#include "daemon/flags.h"

#include <cctype>

#include <CLI/CLI.hpp>

#include "images/manager/front_image_recipes.h"
#include "images/parse/registry_mirror.h"
#include "images/parse/registry_pattern.h"
#include "network/internal_endpoints.h"

namespace kiln::daemon {

int ParseFlags(int argc, const char* const* argv, Flags* f, std::ostream& out, std::ostream& err) {
  CLI::App app{"kilnd: the kiln daemon. Serves the /v1 HTTP API and runs each sandbox in gVisor.",
               "kilnd"};
  app.get_formatter()->column_width(36);
  app.add_option("--listen", f->listen, "HOST:PORT to serve the API on")->capture_default_str();
  app.add_option("--state-dir", f->state_dir, "database, sandboxes, snapshots, admin key")
      ->capture_default_str();
  app.add_option("--image-dir", f->image_dir, "root filesystems (default STATE_DIR/images)");
  app.add_option("--runsc", f->runsc, "the runsc binary (default: the pinned build)")
      ->capture_default_str();
  app.add_option("--platform", f->platform, "gVisor platform")
      ->check(CLI::IsMember({"systrap", "ptrace"}))
      ->capture_default_str();
  app.add_option("--agent", f->agent, "kiln-agent binary (default: beside kilnd)");
  app.add_option("--image-recipe", f->image_recipe,
                 "base image recipe (default: images/base/build.sh of the source tree)");
  app.add_option("--image-storage-mib", f->image_storage_mib,
                 "image layers may use this much disk in all (0: no limit)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--context-storage-mib", f->context_storage_mib,
                 "uploaded build contexts one key may keep (unused ones go after a day)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--image-builds", f->image_builds, "image builds run at once (others queue)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--pool-size", f->pool_size, "ready copies kept for every new snapshot")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--pool-memory-mib", f->pool_memory_mib,
                 "memory for warm pools sized by demand (default: a 16th of host memory; 0: "
                 "no such pools, only pinned ones)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--pool-idle-seconds", f->pool_idle_seconds,
                 "a demand-sized pool not asked for this long goes back to zero")
      ->check(CLI::Range(1, 86400 * 30))
      ->capture_default_str();
  app.add_flag("--warm-copies", f->warm_copies,
               "a restored copy forks and reaps a child before use, taking part of its first "
               "command's cost (its next PID is then one past the source's)");
  app.add_option("--pool-max-size", f->pool_max_size, "the largest size of one demand-sized pool")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--host-memory-mib", f->host_memory_mib,
                 "memory to plan with (default: MemTotal less 1 GiB)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--host-vcpus", f->host_vcpus, "CPUs to plan with (default: the host's)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--memory-overcommit", f->memory_overcommit,
                 "reserved memory may total host memory x this")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--host-disk-mib", f->host_disk_mib,
                 "state disk to plan sandboxes' disks (diskMiB) with (default: the size of the "
                 "state directory's file system)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--disk-overcommit", f->disk_overcommit,
                 "reserved diskMiB may total the state disk x this (a sandbox's disk grows only "
                 "as it writes)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--cpu-overcommit", f->cpu_overcommit, "reserved vCPUs may total host CPUs x this")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--key-sandbox-limit", f->key_sandboxes, "sandboxes one API key may run at once")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  app.add_option("--prices", f->prices, "JSON price table (docs/guide.md, Metering and cost)")
      ->check(CLI::ExistingFile);
  app.add_option("--meter-interval-ms", f->meter_interval_ms, "how often sandboxes are metered")
      ->check(CLI::Range(100, 3600000))
      ->capture_default_str();
  app.add_option("--admin-key-file", f->admin_key_file,
                 "where the local admin key is kept (default STATE_DIR/admin.key)");
  app.add_option("--request-timeout-seconds", f->request_timeout_s,
                 "a request's headers (and a JSON body) must arrive within this; a body must "
                 "progress within it (else 408); an answer, a streamed chunk or a relayed byte "
                 "must progress within it and a WebSocket message go out within it, else the "
                 "connection is cut")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--idle-timeout-seconds", f->idle_timeout_s,
                 "keep-alive connections with no request for this long are closed")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--websocket-idle-seconds", f->websocket_idle_s,
                 "a WebSocket from which nothing arrives for this long is closed; kilnd pings "
                 "at half of it, so a client that answers pings stays up")
      ->check(CLI::Range(2, 86400))
      ->capture_default_str();
  app.add_option("--key-waiting-creates", f->key_waiting_creates,
                 "creates of one API key that may wait for room at once; past it a create "
                 "answers 429 at once")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-connections", f->max_connections,
                 "open connections at once, idle ones included (past it: 503 server_busy)")
      ->check(CLI::Range(16, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-connections-per-address", f->max_connections_per_address,
                 "open connections from one client address (past it: 503 server_busy for that "
                 "address only)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--rate-limit", f->rate_limit,
                 "requests/s per API key, and per client address without a valid key; admin "
                 "keys are not limited (0: off)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  app.add_option("--rate-burst", f->rate_burst,
                 "requests a caller may send at once after a pause (0: 2 x --rate-limit)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-streams-per-sandbox", f->max_streams_per_sandbox,
                 "open streams (exec streams, output follows, terminals, downloads) per sandbox "
                 "(0: no cap)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-port-connections", f->max_port_connections,
                 "open connections into one sandbox's ports: HTTP relays and tunnel streams "
                 "(0: no cap)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--console-dir", f->console_dir,
                 "the web console's built files, served at /ui (default: ../console from "
                 "kilnd's folder, else the repo's build/console)");
  app.add_option("--relay-idle-seconds", f->relay_idle_s,
                 "an HTTP request relayed into a sandbox's port (an upgraded WebSocket too) "
                 "with no byte either way for this long is cut")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--sandboxfusion-image", f->sandboxfusion_image,
                 "the image SandboxFusion's run_code runs programs in: a name or reference "
                 "resolved under the caller's key")
      ->capture_default_str();
  app.add_option("--sandboxfusion-pool", f->sandboxfusion_pool,
                 "warm copies of that image kept ready (its pool; 0: leave it as set)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--sandboxfusion-concurrency", f->sandboxfusion_concurrency,
                 "programs SandboxFusion's front runs at once; more wait their turn, since its "
                 "timeouts are wall-clock (0: two per host CPU)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app.add_option("--sandboxfusion-key-concurrency", f->sandboxfusion_key_concurrency,
                 "of those, the most one API key holds at once, so other keys find a slot "
                 "(0: three quarters, at least 1; equal to --sandboxfusion-concurrency for a "
                 "single trainer's key)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app.add_option("--sandboxfusion-queue", f->sandboxfusion_queue,
                 "programs of one API key that may wait for a slot at once (past it: 504 "
                 "rate_limited with Retry-After, which verl retries); a waiting program's body "
                 "is read only once it has its slot")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--preview-domain", f->preview_domain,
                 "host names {port}-{sandbox}.DOMAIN on kilnd's listener reach a sandbox's port "
                 "(localhost: browsers and curl resolve *.localhost to loopback)")
      ->check([](const std::string& d) -> std::string {
        if (d.empty() || d.size() > 200 || d.front() == '.' || d.back() == '.') return "a domain";
        for (char c : d)
          if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-')
            return "letters, digits, '.' and '-' only";
        return "";
      })
      ->capture_default_str();
  app.add_option("--preview-url", f->preview_url,
                 "how previews' URLs start, scheme and port around the host name, as "
                 "SCHEME or SCHEME:PORT (https behind a TLS proxy with wildcard DNS; default: "
                 "http and the listener's port)");
  app.add_flag("--allow-public-previews", f->allow_public_previews,
               "let keys share a port publicly (no token); off, every preview needs its token");
  app.add_option("--allow-registry", f->allowed_registries,
                 "a registry pulled from directly though it is private or on loopback (plain "
                 "HTTP on loopback): HOST (any port) or HOST:PORT ([V6]:PORT), that port only; "
                 "repeat for more. Others: HTTPS, public addresses only")
      ->check([](const std::string& v) -> std::string {
        auto p = kiln::images::ParseRegistryPattern(v);
        return p.ok() ? "" : p.status().message();
      });
  app.add_option("--front-image", f->front_images,
                 "NAME=FILE: a front's default image (E2B's code-interpreter-v1, SandboxFusion's "
                 "--sandboxfusion-image) that kilnd builds on first need, from FILE's JSON "
                 "{recipe, network?, buildTimeoutSeconds?} instead of kiln's own; or one more")
      ->check([](const std::string& v) -> std::string {
        auto d = kiln::images::ReadFrontImageFlag(v);
        return d.ok() ? "" : d.status().message();
      });
  app.add_option("--registry-mirror", f->registry_mirrors,
                 "a pull-through mirror, REGISTRY=URL (docker.io=https://mirror.example, or "
                 "http:// for one on loopback): pulls of REGISTRY's images ask it first, then "
                 "REGISTRY itself; repeat for more registries. --allow-registry and the "
                 "private-address rules apply to the mirror as to any registry");
  app.add_option("--registry-mirror-only", f->registry_mirror_only,
                 "REGISTRY: pull its images through its --registry-mirror alone, never from "
                 "REGISTRY itself; repeat for more");
  app.add_option("--egress-allow-internal", f->egress_internal,
                 "NAME=ADDR:PORT: a private endpoint (a trainer's adapter, an inference "
                 "server) that sandboxes reach as a public host NAME: with internet on, NAME "
                 "not denied and their allow list empty or naming it; every other private "
                 "address stays refused. Repeat for more")
      ->check([](const std::string& v) -> std::string {
        auto e = kiln::network::ParseInternalEndpoint(v);
        return e.ok() ? "" : e.status().message();
      });
  app.add_option("--e2b-image-metadata-key", f->e2b_image_metadata_key,
                 "KEY: an E2B create whose metadata has KEY and whose template is base (the "
                 "SDKs' default) boots "
                 "the image its value names: the caller's kiln image of that name, else an OCI "
                 "reference pulled once as the caller's image (slime's image routing)")
      ->check([](const std::string& v) -> std::string {
        if (v.empty() || v.size() > 63) return "KEY must be 1 to 63 characters";
        return "";
      });
  app.add_option("--max-lease-seconds", f->max_lease_seconds,
                 "the longest lease a create, extend or timeout may ask for, on every front")
      ->check(CLI::Range(60, 86400))
      ->capture_default_str();
  app.add_option("--test-resolver-file", f->test_resolver_file,
                 "tests only: egress names resolved from this file, not DNS");
  app.add_flag("--version", f->version, "print kiln's version and the runsc it uses, and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "kilnd: " << e.what() << "\n(kilnd --help lists the flags)\n";
    return 2;
  }
  // Flags read together: a mirror-only registry needs its mirror.
  auto mirrors = kiln::images::ParseRegistryMirrors(f->registry_mirrors, f->registry_mirror_only);
  if (!mirrors.ok()) {
    err << "kilnd: " << mirrors.status().message() << "\n(kilnd --help lists the flags)\n";
    return 2;
  }
  return -1;
}

}  // namespace kiln::daemon
