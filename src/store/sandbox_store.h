// The durable sandbox table: every sandbox's record (see
// control::Sandbox::Record), written at each lifecycle change, so that a
// restarted kilnd knows what it ran and can re-adopt or account for it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/db.h"

namespace kiln::store {

class SandboxStore {
 public:
  explicit SandboxStore(Db& db);

  // Inserts or replaces the record of record["id"].
  void Put(const nlohmann::json& record);
  void Put(const std::vector<nlohmann::json>& records);  // one transaction
  void Remove(const std::string& id);
  // Sandboxes not yet stopped, oldest first.
  std::vector<nlohmann::json> Live() const;
  // The newest `limit` stopped ones, oldest first.
  std::vector<nlohmann::json> RecentlyStopped(size_t limit) const;
  // Forgets stopped sandboxes that ended before `ms`.
  void DeleteStoppedBefore(int64_t ms);

 private:
  Db& db_;
};

}  // namespace kiln::store
