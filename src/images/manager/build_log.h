// An image build's log: numbered lines kept in memory while the build runs
// (the newest kMaxLines, at most kMaxMemoryBytes of text; older ones are
// dropped and reads say "truncated") and appended to a file, so the log of
// a finished build outlives the daemon. What a build prints is the
// tenant's to choose, so the file stops at kMaxFileBytes (one line says so;
// the newest lines stay in memory for the failed step's tail). Readers wait
// for new lines (follow) on a condition variable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::images {

struct LogLine {
  int64_t n = 0;  // from 1
  int64_t time_ms = 0;
  std::string stream;       // "system", "stdout", "stderr"
  std::optional<int> step;  // the step it belongs to (from 1)
  std::string text;
};
void to_json(nlohmann::json& j, const LogLine& l);

struct LogPage {
  std::vector<LogLine> lines;
  int64_t next_after = 0;
  bool truncated = false;  // lines after `after` were dropped
  bool done = false;       // the build has ended: no more lines will come
};

class BuildLog {
 public:
  static constexpr size_t kMaxLines = 20000;
  static constexpr size_t kMaxLineBytes = 4096;
  static constexpr size_t kMaxMemoryBytes = 4u << 20;
  static constexpr uint64_t kMaxFileBytes = 16u << 20;

  // Appends to `path` (created); reads back what it holds.
  explicit BuildLog(std::string path);

  // Splits `text` into lines (a partial last line waits for its end, per
  // stream) and adds them.
  void Write(const std::string& stream, std::optional<int> step, const std::string& text);
  void Line(const std::string& stream, std::optional<int> step, std::string text);
  // Flushes partial lines; no more lines come.
  void Close();

  // Lines after `after`, at most `limit`; waits until `deadline` for one
  // when there is none yet and the log is open.
  LogPage Read(int64_t after, size_t limit,
               std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);
  // The last `count` lines' text (a failed step's tail).
  std::vector<std::string> Tail(size_t count);

 private:
  void AddLocked(LogLine line);
  void Keep(LogLine line);  // in memory, within the caps

  std::mutex mu_;
  std::condition_variable cv_;
  std::string path_;
  std::ofstream file_;
  std::deque<LogLine> lines_;
  size_t memory_bytes_ = 0;  // text in lines_
  uint64_t file_bytes_ = 0;  // the file's size
  bool file_full_ = false;
  int64_t last_n_ = 0;
  bool closed_ = false;
  std::map<std::string, std::string> partial_;  // by stream
  std::optional<int> partial_step_;
};

}  // namespace kiln::images
