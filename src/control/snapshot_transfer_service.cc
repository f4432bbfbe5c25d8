#include "control/snapshot_transfer_service.h"

#include <filesystem>

#include "common/contract.h"
#include "common/thread_nice.h"
#include "common/time.h"
#include "network/policy.h"

namespace kiln::control {

using nlohmann::json;

namespace transfer_checks {
namespace {

// An issue as a create's body reader (api::FieldReader) words it.
void AddIssue(json& issues, const std::string& field, const std::string& message) {
  issues.push_back(json{{"path", "body." + field}, {"message", message}});
}

// A create's "labels": at most kLabelsMax, keys 1 to kLabelKeyMax bytes,
// values at most kLabelValueMax; the first bad entry is the issue.
void CheckLabels(const std::map<std::string, std::string>& labels, json& issues) {
  if (labels.size() > static_cast<size_t>(contract::kLabelsMax)) {
    AddIssue(issues, "labels",
             "must have at most " + std::to_string(contract::kLabelsMax) + " entries");
    return;
  }
  for (const auto& [key, value] : labels) {
    if (key.empty() || key.size() > static_cast<size_t>(contract::kLabelKeyMax)) {
      AddIssue(issues, "labels." + key,
               "key must be 1 to " + std::to_string(contract::kLabelKeyMax) + " bytes");
      return;
    }
    if (value.size() > static_cast<size_t>(contract::kLabelValueMax)) {
      AddIssue(issues, "labels." + key,
               "value must be at most " + std::to_string(contract::kLabelValueMax) + " bytes");
      return;
    }
  }
}

// A create's "network" rules (null: none).
void CheckNetwork(const json& network, json& issues) {
  if (network.is_null()) return;
  network::PolicyError error;
  if (!network::ParsePolicy(network, "network", &error))
    AddIssue(issues, error.path.empty() ? "network" : error.path, error.message);
}

}  // namespace
}  // namespace transfer_checks

Status CheckImportedRecord(const store::SnapshotRecord& record) {
  json issues = json::array();
  transfer_checks::CheckLabels(record.labels, issues);
  transfer_checks::CheckNetwork(record.network, issues);
  if (issues.empty()) return Status::Ok();
  std::string message;
  for (const auto& issue : issues) {
    if (!message.empty()) message += "; ";
    message += issue["path"].get<std::string>() + ": " + issue["message"].get<std::string>();
  }
  return Status(Code::kInvalidArchive, "kiln-snapshot.json: record: " + message,
                json{{"issues", issues}});
}

store::TransferHost SnapshotTransferService::Host() const {
  return {sandboxes_.EngineInfo().version,
          std::filesystem::path(sandboxes_.snapshots().base_rootfs()).filename().string()};
}

Result<store::SnapshotExport> SnapshotTransferService::Export(
    const store::SnapshotRecord& snapshot, const std::set<std::string>& skip_layers) {
  std::vector<store::TransferLayer> layers;
  if ((snapshot.image || !snapshot.rootfs.empty()) && layers_) {
    auto found = layers_->TransferLayers(snapshot);
    if (!found.ok()) return found.status();
    layers = std::move(found).value();
  }
  return store::SnapshotExport::Prepare(sandboxes_.snapshots().store(), snapshot, Host(),
                                        std::move(layers), skip_layers);
}

Result<store::ImportResult> SnapshotTransferService::Import(const std::string& owner,
                                                            std::optional<uint64_t> declared_bytes,
                                                            const store::TarSource& body) {
  if (declared_bytes && *declared_bytes > kMaxImportBytes)
    return Status(Code::kPayloadTooLarge, "an imported snapshot's tar is at most 64 GiB");
  store::ImportRequest request{owner, Host(), StableNowMs(), CheckImportedRecord,
                               layers_ ? layers_->NewLayerSink(owner) : nullptr};
  store::SnapshotImport import(sandboxes_.snapshots().store(), std::move(request));
  Result<store::ImportResult> done = [&] {
    ScopedThreadNice below_sandboxes(10);  // checksums and unpacking on this thread
    return import.Run(body);
  }();
  if (done.ok() && done->created) sandboxes_.snapshots().Imported(done->record);
  return done;
}

json SnapshotTransferService::TransferableLayers() {
  return layers_ ? layers_->TransferableLayers() : json::array();
}

}  // namespace kiln::control
