// A command's output collected to its end for one answer, under a cap.
// kiln's JSON exec and PandaStack's both answer this way; this is the one
// copy of the loop they shared.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "io/transfers.h"
#include "io/types.h"

namespace kiln::io {

// Output held to a cap per stream. The sandbox truncates there too, but
// kilnd keeps no more whatever an agent that root inside replaced sends.
class OutputCollector {
 public:
  explicit OutputCollector(uint64_t cap) : cap_(cap) {}
  // Keeps what fits of `data` (cap 0: all of it).
  void Add(OutputStream stream, std::string_view data);
  const std::string& text(OutputStream stream) const { return out_[Index(stream)]; }
  // Output was dropped here, past the cap.
  bool over(OutputStream stream) const { return over_[Index(stream)]; }

 private:
  static int Index(OutputStream s) { return s == OutputStream::kStderr ? 1 : 0; }
  uint64_t cap_;
  std::string out_[2];
  bool over_[2] = {false, false};
};

// Reads `run` until the command ends, keeping up to `cap` of each stream.
// Gives up at `deadline_ms` (MonotonicNowMs) with End::kDeadline; when
// `abandoned` says the caller left, cancels the command and answers
// End::kAbandoned. An error from the sandbox is its Status; a sandbox that
// went away is not_running.
Result<ExecResult> CollectExec(ExecStream& run, uint64_t cap, int64_t deadline_ms,
                               const std::function<bool()>& abandoned);

}  // namespace kiln::io
