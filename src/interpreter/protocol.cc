#include "interpreter/protocol.h"

#include <algorithm>
#include <utility>

#include "common/json_bounded.h"

namespace kiln::interpreter {

using nlohmann::json;

namespace {
constexpr std::pair<Language, std::string_view> kLanguageNames[] = {
    {Language::kPython, "python"},
    {Language::kJavaScript, "javascript"},
    {Language::kTypeScript, "typescript"},
    {Language::kR, "r"},
    {Language::kJava, "java"},
    {Language::kBash, "bash"}};
}  // namespace

std::optional<Language> ParseLanguage(std::string_view name) {
  for (const auto& [language, n] : kLanguageNames)
    if (n == name) return language;
  return std::nullopt;
}

std::string_view LanguageName(Language language) {
  for (const auto& [l, n] : kLanguageNames)
    if (l == language) return n;
  return "python";
}

bool RunsOnNode(Language language) {
  return language == Language::kJavaScript || language == Language::kTypeScript;
}

bool ValidContextId(std::string_view id) {
  if (id.empty() || id.size() > 63 || id[0] == '-') return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

namespace {

// Fields the kernel may omit; a present one of the wrong type voids the line.
bool GetString(const json& j, const char* key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}

bool GetInt(const json& j, const char* key, int64_t* out) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  if (!it->is_number_integer()) return false;
  *out = it->get<int64_t>();
  return true;
}

// Cuts *text to at most max bytes, not inside a UTF-8 character.
void CutUtf8(std::string* text, size_t max) {
  if (text->size() <= max) return;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>((*text)[n]) & 0xC0) == 0x80) --n;
  text->resize(n);
}

}  // namespace

std::optional<KernelMessage> ParseKernelLine(std::string_view line) {
  if (line.size() > kMaxLineBytes || line.empty() || line[0] != '{') return std::nullopt;
  std::optional<json> j = ParseJsonBounded(line, nullptr, 16);
  if (!j || !j->is_object()) return std::nullopt;
  std::string k;
  if (!GetString(*j, "k", &k)) return std::nullopt;
  KernelMessage m;
  m.bytes = line.size();
  bool ok = true;
  if (k == "ready") {
    m.kind = KernelMessage::kReady;
  } else if (k == "start" || k == "done") {
    m.kind = k == "start" ? KernelMessage::kStart : KernelMessage::kDone;
    ok = GetString(*j, "id", &m.id) && GetInt(*j, "n", &m.n);
    if (ok && m.kind == KernelMessage::kDone) {
      ok = GetString(*j, "status", &m.status);
      if (m.status != "ok" && m.status != "error" && m.status != "interrupted") m.status = "error";
      auto d = j->find("dropped");
      if (d != j->end() && d->is_object()) {
        for (const auto& [stream, v] : d->items())
          if (v.is_number_unsigned()) m.dropped += v.get<uint64_t>();
      }
    }
  } else if (k == "stdout" || k == "stderr") {
    m.kind = k == "stdout" ? KernelMessage::kStdout : KernelMessage::kStderr;
    ok = GetString(*j, "text", &m.text);
  } else if (k == "result") {
    m.kind = KernelMessage::kResult;
    auto main = j->find("main");
    m.main = main != j->end() && main->is_boolean() && main->get<bool>();
    auto data = j->find("data");
    if (data == j->end() || !data->is_object()) return std::nullopt;
    m.data = std::move(*data);
  } else if (k == "error") {
    m.kind = KernelMessage::kError;
    ok = GetString(*j, "name", &m.name) && GetString(*j, "value", &m.value) &&
         GetString(*j, "traceback", &m.traceback);
    CutUtf8(&m.name, 256);
    CutUtf8(&m.value, kMaxTracebackBytes);
    CutUtf8(&m.traceback, kMaxTracebackBytes);
  } else {
    return std::nullopt;
  }
  if (!ok) return std::nullopt;
  return m;
}

void LineSplitter::Feed(std::string_view bytes, std::vector<std::string>* lines) {
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    std::string_view piece = bytes.substr(0, nl);
    if (skipping_) {
      dropped_ += piece.size();
    } else if (partial_.size() + piece.size() > max_line_) {
      dropped_ += partial_.size() + piece.size();
      partial_.clear();
      skipping_ = true;
    } else {
      partial_.append(piece);
    }
    if (nl == std::string_view::npos) return;
    if (!skipping_) lines->push_back(std::move(partial_));
    partial_.clear();
    skipping_ = false;
    bytes.remove_prefix(nl + 1);
  }
}

void ExecutionBuilder::Overflow(std::string_view what, uint64_t bytes) {
  if (bytes == 0) return;
  for (auto& o : e_->overflow) {
    if (o["what"] == what) {
      o["droppedBytes"] = o["droppedBytes"].get<uint64_t>() + bytes;
      return;
    }
  }
  e_->overflow.push_back(json{{"what", what}, {"droppedBytes", bytes}});
}

json ExecutionBuilder::Apply(const KernelMessage& m) {
  switch (m.kind) {
    case KernelMessage::kStdout:
    case KernelMessage::kStderr: {
      bool out = m.kind == KernelMessage::kStdout;
      std::string& kept = out ? e_->stdout_text : e_->stderr_text;
      size_t room = kMaxStreamBytes - std::min(kMaxStreamBytes, kept.size());
      if (m.text.size() <= room) {
        kept += m.text;
      } else {
        std::string part = m.text;
        CutUtf8(&part, room);
        kept += part;
        Overflow(out ? "stdout" : "stderr", m.text.size() - part.size());
      }
      return json{{"k", out ? "stdout" : "stderr"}, {"text", m.text}};
    }
    case KernelMessage::kResult: {
      json result{{"main", m.main}, {"data", m.data}, {"refs", json::array()}};
      if (results_bytes_ + m.bytes > kMaxResultsBytes) {
        Overflow("results", m.bytes);
        return nullptr;
      }
      results_bytes_ += m.bytes;
      e_->results.push_back(result);
      json ev = std::move(result);
      ev["k"] = "result";
      return ev;
    }
    case KernelMessage::kError:
      e_->error = json{{"name", m.name}, {"value", m.value}, {"traceback", m.traceback}};
      return json{{"k", "error"}, {"name", m.name}, {"value", m.value}, {"traceback", m.traceback}};
    case KernelMessage::kDone:
      if (e_->status == "ok") e_->status = m.status;
      e_->execution_count = m.n;
      Overflow("kernel", m.dropped);
      return nullptr;
    case KernelMessage::kStart:
      e_->execution_count = m.n;
      return nullptr;
    case KernelMessage::kReady:
      return nullptr;
  }
  return nullptr;
}

}  // namespace kiln::interpreter
