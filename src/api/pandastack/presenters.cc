// How kiln's sandboxes, snapshots, files and images look in PandaStack's
// answers (the keys its client's from_dict methods read).
#include "api/pandastack/pandastack.h"
#include "common/time.h"

namespace kiln::api::pandastack {

using nlohmann::json;

std::string StatusName(control::SandboxState state) {
  switch (state) {
    case control::SandboxState::kStarting:
      return "starting";
    case control::SandboxState::kRunning:
      return "running";
    case control::SandboxState::kPausing:
      return "pausing";
    case control::SandboxState::kPaused:
      return "paused";
    case control::SandboxState::kResuming:
      return "resuming";
    case control::SandboxState::kStopping:
      return "stopping";
    case control::SandboxState::kStopped:
      return "stopped";
  }
  return "stopped";
}

json SandboxJson(const control::SandboxRecord& r, const SandboxExtras& extras) {
  const control::SandboxSpec& spec = r.spec;
  json boot_ms = r.ready_ms ? json(r.ready_ms - r.created_ms) : json(nullptr);
  return json{{"id", r.id},
              {"template", extras.template_name},
              {"cpu", spec.shape.vcpu},
              {"memory_mb", spec.shape.memory_mib},
              {"status", StatusName(r.state)},
              // kiln sandboxes have no address of their own on the host.
              {"guest_ip", nullptr},
              {"created_at", FormatTime(r.created_ms)},
              {"metadata", spec.labels},
              {"from_snapshot", extras.from_snapshot ? json(*extras.from_snapshot) : json(nullptr)},
              {"boot_ms", boot_ms},
              {"boot_mode", spec.snapshot ? "restore" : "cold"},
              {"persistent", spec.persistent},
              {"expires_at", FormatTime(r.expires_ms)},
              {"name", spec.name ? json(*spec.name) : json(nullptr)}};
}

json LifecycleJson(const control::SandboxRecord& r, int64_t now_ms) {
  bool paused = r.state == control::SandboxState::kPaused;
  // A paused sandbox's lease clock is stopped: what it had left is kept.
  int64_t left_ms = paused ? r.paused_lease_ms : std::max<int64_t>(0, r.expires_ms - now_ms);
  return json{{"id", r.id},
              {"status", StatusName(r.state)},
              {"ttl_seconds", (left_ms + 999) / 1000},
              {"expires_at", paused ? json(nullptr) : json(FormatTime(r.expires_ms))},
              {"persistent", r.spec.persistent},
              {"lease_seconds", r.spec.timeout_seconds},
              {"on_lease_end", r.spec.persistent || r.spec.pause_on_lease_end ? "pause" : "stop"},
              {"idle_pause_seconds", r.spec.idle_pause_seconds}};
}

json SnapshotJson(const store::SnapshotRecord& r, const std::string& template_name) {
  return json{{"id", r.id},
              {"snapshot_id", r.id},
              {"sandbox_id", r.source_sandbox_id},
              {"template", template_name},
              {"size_bytes", r.size_bytes},
              {"name", r.name ? json(*r.name) : json(nullptr)},
              {"created_at", FormatTime(r.created_ms)},
              {"expires_at", FormatTime(r.expires_ms)}};
}

json FileInfoJson(const io::FileEntry& e) {
  return json{{"name", e.name}, {"path", e.path}, {"is_dir", e.type == io::FileType::kDirectory},
              {"size", e.size}, {"mode", e.mode}, {"mtime", e.modified_ms / 1000}};
}

json TemplateJson(const images::ImageRecord& image) {
  bool builtin = image.source == images::ImageSource::kBuiltin;
  return json{{"name", image.name},
              {"id", image.id},
              {"size_bytes", image.size_bytes},
              {"is_global", builtin},
              {"workspace", builtin ? json(nullptr) : json(image.owner)},
              {"description", builtin ? "kiln's built-in image" : "a kiln image"},
              {"meta", {{"version", image.version}, {"tags", image.tags}}}};
}

}  // namespace kiln::api::pandastack
