// One map of families under a shared_mutex. Series live in a deque (stable
// addresses, no moves) and hold atomics, so updating a series that exists needs
// only the shared lock; only the first update of a new series takes it exclusively.
#include "common/metrics.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string_view>
#include <unordered_map>

namespace kiln::metrics {
namespace {

// Up to 30 minutes: image builds take minutes (kiln_image_build_seconds).
constexpr std::array<double, 18> kBucketBounds = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800};

struct Series {
  explicit Series(std::string l) : labels(std::move(l)) {}
  const std::string labels;        // rendered (a="x",b="y"): also the lookup key
  std::atomic<double> value{0};    // counter or gauge value; histogram sum
  std::atomic<uint64_t> count{0};  // histogram only
  std::array<std::atomic<uint64_t>, kBucketBounds.size()> buckets{};  // not cumulative
};

struct Family {
  std::string type;
  std::string help;
  bool described = false;
  std::deque<Series> series;                            // first-seen order
  std::unordered_map<std::string_view, Series*> index;  // keys view Series::labels
  std::vector<std::function<void(const Emit&)>> collectors;
};

struct Registry {
  std::shared_mutex mu;
  std::map<std::string, Family, std::less<>> families;  // sorted, as Render wants
};

Registry& Reg() {
  static auto* reg = new Registry;  // never destroyed: threads may update it during exit
  return *reg;
}

void AppendNumber(std::string* out, double v) {
  if (std::isnan(v) || std::isinf(v)) {
    out->append(std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf");
    return;
  }
  char buf[32];
  // Shortest text that parses back to the same double: "3", "0.25", "1e+21".
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, res.ptr);
}

// The format escapes backslash and newline everywhere, double quote in label values.
void AppendEscaped(std::string* out, std::string_view s, bool quote) {
  for (char c : s) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '"' && quote) {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

std::string LabelKey(const Labels& labels) {
  std::string key;
  for (const auto& [name, value] : labels) {
    if (!key.empty()) key.push_back(',');
    key.append(name).append("=\"");
    AppendEscaped(&key, value, true);
    key.push_back('"');
  }
  return key;
}

// Appends `name{labels,extra} value`; `extra` is the histogram's le="..." label.
void AppendSample(std::string* out, std::string_view name, std::string_view labels,
                  std::string_view extra, double v) {
  out->append(name);
  if (!labels.empty() || !extra.empty()) {
    out->push_back('{');
    out->append(labels);
    if (!labels.empty() && !extra.empty()) out->push_back(',');
    out->append(extra);
    out->push_back('}');
  }
  out->push_back(' ');
  AppendNumber(out, v);
  out->push_back('\n');
}

// Caller holds reg.mu exclusively. `type` applies only if the family is new.
Family& GetFamily(Registry& reg, const std::string& name, const char* type) {
  auto [it, inserted] = reg.families.try_emplace(name);
  if (inserted) it->second.type = type;
  return it->second;
}

// Runs `fn` on the series, creating its family and itself on first use.
template <typename Fn>
void WithSeries(const std::string& name, const char* type, const Labels& labels, Fn fn) {
  Registry& reg = Reg();
  std::string key = LabelKey(labels);
  {
    std::shared_lock lock(reg.mu);
    auto fam = reg.families.find(name);
    if (fam != reg.families.end()) {
      auto it = fam->second.index.find(key);
      if (it != fam->second.index.end()) return fn(*it->second);
    }
  }
  std::unique_lock lock(reg.mu);  // another thread may have created it meanwhile
  Family& fam = GetFamily(reg, name, type);
  auto it = fam.index.find(key);
  if (it == fam.index.end()) {
    Series& s = fam.series.emplace_back(std::move(key));
    it = fam.index.emplace(s.labels, &s).first;
  }
  fn(*it->second);
}

}  // namespace

void Describe(const std::string& name, const std::string& type, const std::string& help) {
  Registry& reg = Reg();
  std::unique_lock lock(reg.mu);
  Family& fam = reg.families[name];
  if (fam.described) return;
  fam.described = true;
  fam.type = type;  // overrides the type guessed from an earlier Inc/Set/Observe
  fam.help = help;
}

void Inc(const std::string& name, const Labels& labels, double by) {
  WithSeries(name, "counter", labels, [by](Series& s) { s.value.fetch_add(by); });
}

void Set(const std::string& name, const Labels& labels, double value) {
  WithSeries(name, "gauge", labels, [value](Series& s) { s.value.store(value); });
}

void Observe(const std::string& name, const Labels& labels, double seconds) {
  // First bucket with seconds <= bound (le is inclusive); NaN lands only in +Inf.
  size_t b = 0;
  while (b < kBucketBounds.size() && !(seconds <= kBucketBounds[b])) ++b;
  WithSeries(name, "histogram", labels, [&](Series& s) {
    // Bucket before count (seq_cst): Render reads count first, so it never sees a
    // count that some bucket lacks, only the reverse, which it clamps.
    if (b < kBucketBounds.size()) s.buckets[b].fetch_add(1);
    s.value.fetch_add(seconds);
    s.count.fetch_add(1);
  });
}

void AddCollector(const std::string& name, std::function<void(const Emit&)> collect) {
  Registry& reg = Reg();
  std::unique_lock lock(reg.mu);
  GetFamily(reg, name, "gauge").collectors.push_back(std::move(collect));
}

std::string Render() {
  Registry& reg = Reg();
  // Collectors run unlocked: they may take their own locks or update metrics.
  std::vector<std::pair<std::string, std::function<void(const Emit&)>>> collectors;
  {
    std::shared_lock lock(reg.mu);
    for (const auto& [name, fam] : reg.families) {
      for (const auto& c : fam.collectors) collectors.emplace_back(name, c);
    }
  }
  std::map<std::string, std::string, std::less<>> collected;  // name -> sample lines
  for (const auto& [family, collect] : collectors) {
    // A named copy: clang 14 cannot capture a structured binding.
    const std::string& name = family;
    std::string& lines = collected[name];
    collect([&](const Labels& labels, double v) {
      AppendSample(&lines, name, LabelKey(labels), "", v);
    });
  }

  std::string out;
  std::shared_lock lock(reg.mu);
  for (const auto& [name, fam] : reg.families) {
    auto extra = collected.find(name);
    bool has_extra = extra != collected.end() && !extra->second.empty();
    if (fam.series.empty() && !has_extra) continue;
    if (!fam.help.empty()) {
      out.append("# HELP ").append(name).push_back(' ');
      AppendEscaped(&out, fam.help, false);
      out.push_back('\n');
    }
    out.append("# TYPE ").append(name).append(" ").append(fam.type).push_back('\n');
    for (const Series& s : fam.series) {
      if (fam.type != "histogram") {
        AppendSample(&out, name, s.labels, "", s.value.load());
        continue;
      }
      uint64_t count = s.count.load();
      uint64_t cumulative = 0;
      for (size_t i = 0; i < kBucketBounds.size(); ++i) {
        cumulative = std::min(count, cumulative + s.buckets[i].load());
        std::string le = "le=\"";
        AppendNumber(&le, kBucketBounds[i]);
        le.push_back('"');
        AppendSample(&out, name + "_bucket", s.labels, le, static_cast<double>(cumulative));
      }
      AppendSample(&out, name + "_bucket", s.labels, "le=\"+Inf\"", static_cast<double>(count));
      AppendSample(&out, name + "_sum", s.labels, "", s.value.load());
      AppendSample(&out, name + "_count", s.labels, "", static_cast<double>(count));
    }
    if (has_extra) out.append(extra->second);
  }
  return out;
}

void ResetForTest() {
  Registry& reg = Reg();
  std::unique_lock lock(reg.mu);
  reg.families.clear();
}

void ObserveOperation(const std::string& name, double seconds) {
  Observe("kiln_operation_seconds", {{"op", name}}, seconds);
}

}  // namespace kiln::metrics
