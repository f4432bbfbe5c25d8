#include "images/manager/build_log.h"

#include "common/time.h"

namespace kiln::images {

using nlohmann::json;

void to_json(json& j, const LogLine& l) {
  j = json{{"n", l.n},
           {"time", FormatTime(l.time_ms)},
           {"stream", l.stream},
           {"step", l.step ? json(*l.step) : json(nullptr)},
           {"text", l.text}};
}

namespace {

// A line as the file keeps it: {"n":1,"t":ms,"s":"stdout","p":2,"x":"text"}.
// Only the strings go through nlohmann-json (for their escaping): a json
// object per line made a build that prints 8 MB take two minutes in the
// sanitized daemon, nearly all of it building and freeing those objects.
std::string StoredLine(const LogLine& l) {
  std::string out = "{\"n\":" + std::to_string(l.n) + ",\"t\":" + std::to_string(l.time_ms);
  out += ",\"s\":" + json(l.stream).dump();
  if (l.step) out += ",\"p\":" + std::to_string(*l.step);
  out += ",\"x\":" + json(l.text).dump(-1, ' ', false, json::error_handler_t::replace);
  out += '}';
  return out;
}

}  // namespace

BuildLog::BuildLog(std::string path) : path_(std::move(path)) {
  {
    std::ifstream in(path_);
    std::string text;
    while (std::getline(in, text)) {
      file_bytes_ += text.size() + 1;
      json j = json::parse(text, nullptr, false);  // kilnd's own file
      if (!j.is_object()) continue;
      LogLine l;
      l.n = j.value("n", int64_t{0});
      l.time_ms = j.value("t", int64_t{0});
      l.stream = j.value("s", "system");
      if (j.contains("p") && j["p"].is_number()) l.step = j["p"].get<int>();
      l.text = j.value("x", "");
      if (l.text.size() > kMaxLineBytes) l.text.resize(kMaxLineBytes);
      last_n_ = l.n;
      Keep(std::move(l));
    }
    closed_ = last_n_ > 0;  // a log read back belongs to an ended build
  }
  file_full_ = file_bytes_ >= kMaxFileBytes;
  file_.open(path_, std::ios::app);
}

void BuildLog::Keep(LogLine line) {
  memory_bytes_ += line.text.size();
  lines_.push_back(std::move(line));
  while (lines_.size() > kMaxLines || (memory_bytes_ > kMaxMemoryBytes && lines_.size() > 1)) {
    memory_bytes_ -= lines_.front().text.size();
    lines_.pop_front();
  }
}

void BuildLog::AddLocked(LogLine line) {
  line.n = ++last_n_;
  line.time_ms = NowMs();
  if (line.text.size() > kMaxLineBytes) line.text.resize(kMaxLineBytes);
  if (!file_full_) {
    std::string text = StoredLine(line);
    if (file_bytes_ + text.size() + 1 >= kMaxFileBytes) {
      file_full_ = true;
      text = json{{"n", line.n},
                  {"t", line.time_ms},
                  {"s", "system"},
                  {"x", "the build log reached " + std::to_string(kMaxFileBytes >> 20) +
                            " MiB: later lines are not kept"}}
                 .dump();
    }
    file_ << text << '\n';
    file_bytes_ += text.size() + 1;
  }
  Keep(std::move(line));
}

void BuildLog::Line(const std::string& stream, std::optional<int> step, std::string text) {
  std::lock_guard lock(mu_);
  if (closed_) return;
  AddLocked(LogLine{0, 0, stream, step, std::move(text)});
  file_.flush();
  cv_.notify_all();
}

void BuildLog::Write(const std::string& stream, std::optional<int> step, const std::string& text) {
  std::lock_guard lock(mu_);
  if (closed_) return;
  std::string& part = partial_[stream];
  part += text;
  size_t start = 0, nl;
  while ((nl = part.find('\n', start)) != std::string::npos) {
    std::string line = part.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    AddLocked(LogLine{0, 0, stream, step, std::move(line)});
    start = nl + 1;
  }
  part.erase(0, start);
  if (part.size() > kMaxLineBytes) {
    AddLocked(LogLine{0, 0, stream, step, part});
    part.clear();
  }
  file_.flush();
  cv_.notify_all();
}

void BuildLog::Close() {
  std::lock_guard lock(mu_);
  if (closed_) return;
  for (auto& [stream, part] : partial_) {
    if (!part.empty()) AddLocked(LogLine{0, 0, stream, std::nullopt, part});
  }
  partial_.clear();
  closed_ = true;
  file_.flush();
  cv_.notify_all();
}

LogPage BuildLog::Read(int64_t after, size_t limit,
                       std::optional<std::chrono::steady_clock::time_point> deadline) {
  std::unique_lock lock(mu_);
  if (deadline) cv_.wait_until(lock, *deadline, [&] { return closed_ || last_n_ > after; });
  LogPage page;
  page.next_after = after;
  int64_t first = lines_.empty() ? last_n_ + 1 : lines_.front().n;
  page.truncated = after + 1 < first && after < last_n_;
  for (const auto& l : lines_) {
    if (l.n <= after) continue;
    if (page.lines.size() >= limit) break;
    page.lines.push_back(l);
    page.next_after = l.n;
  }
  page.done = closed_ && page.next_after >= last_n_;
  return page;
}

std::vector<std::string> BuildLog::Tail(size_t count) {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  size_t from = lines_.size() > count ? lines_.size() - count : 0;
  for (size_t i = from; i < lines_.size(); ++i) out.push_back(lines_[i].text);
  return out;
}

}  // namespace kiln::images
