// A sandbox's egress log as the fronts read it: pages, oldest first, each
// after the cursor the previous one ended at. The gates write the log
// (egress/egress.h); this service is its read side, so that no front reads
// the store (store::EgressLogStore).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/egress_log_store.h"

namespace kiln::control {

class EgressLog {
 public:
  explicit EgressLog(const store::EgressLogStore& store) : store_(store) {}

  struct Page {
    std::vector<store::EgressEntry> entries;
    // Where the next page starts (the last entry's seq); nullopt when no
    // entry follows this page.
    std::optional<int64_t> next_cursor;
  };
  // At most `limit` (>= 1) entries of `sandbox_id` after cursor `after`
  // (0: from the first).
  Page Read(const std::string& sandbox_id, int64_t after, int limit) const;

 private:
  const store::EgressLogStore& store_;
};

}  // namespace kiln::control
