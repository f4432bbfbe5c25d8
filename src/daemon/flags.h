// kilnd's command-line flags, parsed with CLI11.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace kiln::daemon {

struct Flags {
  std::string listen = "127.0.0.1:7070";
  std::string state_dir = "/var/lib/kiln";
  std::string image_dir;                // default <state_dir>/images
  std::string runsc = KILN_RUNSC_PATH;  // the pinned build (scripts/build-runsc.sh)
  std::string platform = "systrap";
  std::string agent;                   // default: kiln-agent beside kilnd
  std::string image_recipe;            // default: <repo>/images/base/build.sh
  std::string console_dir;             // default: ../console beside kilnd's folder
  int64_t image_storage_mib = 51200;   // layers of every image together
  int image_builds = 2;                // image builds run at once
  int64_t context_storage_mib = 2048;  // uploaded build contexts, per key
  int pool_size = 0;                   // ready copies kept for every new snapshot
  int64_t pool_memory_mib = -1;        // demand-sized pools' budget (-1: host/16, 0: off)
  int pool_idle_seconds = 300;         // an unasked pool goes back to zero after this
  int pool_max_size = 32;              // one demand-sized pool's largest size
  bool warm_copies = false;            // restored copies ready their first process
  int64_t host_memory_mib = 0;         // default: MemTotal less 1 GiB for the host
  int host_vcpus = 0;                  // default: the host's CPUs
  double memory_overcommit = 12.0;
  int64_t host_disk_mib = 0;  // default: the size of the state directory's file system
  double disk_overcommit = 64.0;
  double cpu_overcommit = 256.0;
  int key_sandboxes = 1000;
  std::string prices;  // JSON price table file
  int meter_interval_ms = 5000;
  std::string admin_key_file;  // default <state_dir>/admin.key
  // Limits under abuse (docs/guide.md, "Limits under abuse").
  int request_timeout_s = 30;              // headers + start of body; body progress
  int idle_timeout_s = 60;                 // keep-alive connections with no request
  int max_connections = 16384;             // open connections, idle ones included
  int max_connections_per_address = 2048;  // of them from one client address
  double rate_limit = 0;                   // requests/s per API key (and address); 0: off
  int rate_burst = 0;                      // 0: 2 x rate
  int max_streams_per_sandbox = 64;        // long-lived streams open on one sandbox
  int websocket_idle_s = 60;               // a WebSocket with nothing from its client
  int key_waiting_creates = 256;           // creates of one key waiting for room
  // Reaching in (ports, previews, tunnels).
  int max_port_connections = 256;            // open connections into one sandbox's ports
  int relay_idle_s = 600;                    // a relay with no byte either way
  std::string preview_domain = "localhost";  // {port}-{id}.<this> reaches a port
  std::string preview_url;                   // how preview URLs start; default http://, listen port
  bool allow_public_previews = false;
  // SandboxFusion's front: the language image (a name under the caller's
  // key) and the warm copies of it kept ready.
  std::string sandboxfusion_image = "sandboxfusion";
  // Fronts' default images an operator defines or replaces: NAME=FILE each
  // (images/manager/front_image_recipes.h).
  std::vector<std::string> front_images;
  int sandboxfusion_pool = 2;
  int sandboxfusion_concurrency = 0;
  int sandboxfusion_key_concurrency = 0;  // 0: three quarters of the above
  int sandboxfusion_queue = 256;          // requests of one key waiting for a slot
  // Registries pulled from directly (private or loopback ones; plain HTTP
  // on loopback): a host name or address each. Others: HTTPS to public
  // addresses only, through a network of the pull's own.
  std::vector<std::string> allowed_registries;
  // Pull-through mirrors, REGISTRY=URL each (images/parse/registry_mirror.h),
  // and the registries pulled through their mirror alone.
  std::vector<std::string> registry_mirrors;
  std::vector<std::string> registry_mirror_only;
  // The longest lease any front may ask for or extend to, seconds.
  int max_lease_seconds = 86400;
  // Private endpoints sandboxes may reach, NAME=ADDR:PORT each
  // (network/internal_endpoints.h).
  std::vector<std::string> egress_internal;
  // E2B's creates: the metadata key whose value names the image to boot
  // (slime's image routing), "" for none.
  std::string e2b_image_metadata_key;
  // Tests only: resolve egress names from this file instead of DNS.
  std::string test_resolver_file;
  bool version = false;  // print versions and exit
};

// Parses argv into *flags. Returns -1 to go on, or the exit status for a
// run that ends here: 0 after --help (printed to `out`), 2 after a bad flag
// or value (the message, naming the flag, printed to `err`).
int ParseFlags(int argc, const char* const* argv, Flags* flags, std::ostream& out,
               std::ostream& err);

}  // namespace kiln::daemon
