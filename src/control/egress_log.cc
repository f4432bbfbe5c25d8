#include "control/egress_log.h"

namespace kiln::control {

EgressLog::Page EgressLog::Read(const std::string& sandbox_id, int64_t after, int limit) const {
  Page page;
  // One entry past the page says whether another follows.
  page.entries = store_.List(sandbox_id, after, limit + 1);
  if (static_cast<int>(page.entries.size()) > limit) {
    page.entries.resize(static_cast<size_t>(limit));
    page.next_cursor = page.entries.back().seq;
  }
  return page;
}

}  // namespace kiln::control
