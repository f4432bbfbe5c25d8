// Prometheus metrics registry (src/common/metrics.h): rendered text for each
// metric type, escaping, concurrency, and that every sample line parses back.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics.h"

namespace kiln::metrics {
namespace metrics_test {
namespace {

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override { ResetForTest(); }
  void TearDown() override { ResetForTest(); }
};

constexpr double kInf = std::numeric_limits<double>::infinity();

// The value of the sample line starting with `series` + " ", or NaN if absent.
double Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::strtod(line.c_str() + series.size(), nullptr);
  }
  return std::nan("");
}

TEST_F(MetricsTest, CounterWithoutLabels) {
  Describe("kiln_things_total", "counter", "Things done.");
  Inc("kiln_things_total");
  Inc("kiln_things_total");
  Inc("kiln_things_total", {}, 2.5);
  EXPECT_EQ(Render(),
            "# HELP kiln_things_total Things done.\n"
            "# TYPE kiln_things_total counter\n"
            "kiln_things_total 4.5\n");
}

TEST_F(MetricsTest, CounterWithLabelsKeepsFirstSeenOrder) {
  Describe("kiln_requests_total", "counter", "HTTP requests.");
  Inc("kiln_requests_total", {{"method", "POST"}, {"code", "201"}});
  Inc("kiln_requests_total", {{"method", "GET"}, {"code", "200"}});
  Inc("kiln_requests_total", {{"method", "POST"}, {"code", "201"}});
  EXPECT_EQ(Render(),
            "# HELP kiln_requests_total HTTP requests.\n"
            "# TYPE kiln_requests_total counter\n"
            "kiln_requests_total{method=\"POST\",code=\"201\"} 2\n"
            "kiln_requests_total{method=\"GET\",code=\"200\"} 1\n");
}

TEST_F(MetricsTest, DescribeIsIdempotent) {
  Describe("kiln_x", "gauge", "First.");
  Describe("kiln_x", "counter", "Second.");
  Set("kiln_x", {}, 1);
  EXPECT_EQ(Render(), "# HELP kiln_x First.\n# TYPE kiln_x gauge\nkiln_x 1\n");
}

TEST_F(MetricsTest, GaugeOverwrites) {
  Describe("kiln_sandboxes", "gauge", "Sandboxes by state.");
  Set("kiln_sandboxes", {{"state", "running"}}, 3);
  Set("kiln_sandboxes", {{"state", "running"}}, 7);
  Set("kiln_sandboxes", {{"state", "stopped"}}, 0.25);
  EXPECT_EQ(Render(),
            "# HELP kiln_sandboxes Sandboxes by state.\n"
            "# TYPE kiln_sandboxes gauge\n"
            "kiln_sandboxes{state=\"running\"} 7\n"
            "kiln_sandboxes{state=\"stopped\"} 0.25\n");
}

TEST_F(MetricsTest, UndeclaredFamiliesTakeTypeFromFirstUseSortedByName) {
  Set("b_gauge", {}, -1.5);
  Inc("c_total");
  Observe("a_seconds", {}, 0.2);
  std::string text = Render();
  EXPECT_EQ(text.find("# HELP"), std::string::npos);
  size_t a = text.find("# TYPE a_seconds histogram\n");
  size_t b = text.find("# TYPE b_gauge gauge\nb_gauge -1.5\n");
  size_t c = text.find("# TYPE c_total counter\nc_total 1\n");
  ASSERT_NE(a, std::string::npos) << text;
  ASSERT_NE(b, std::string::npos) << text;
  ASSERT_NE(c, std::string::npos) << text;
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
}

TEST_F(MetricsTest, NumbersRenderCleanly) {
  Set("g", {{"k", "int"}}, 3);
  Set("g", {{"k", "frac"}}, 0.1);
  Set("g", {{"k", "tiny"}}, 1e-9);
  Set("g", {{"k", "big"}}, 12345678901234);
  Set("g", {{"k", "inf"}}, kInf);
  Set("g", {{"k", "ninf"}}, -kInf);
  std::string text = Render();
  EXPECT_NE(text.find("g{k=\"int\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("g{k=\"frac\"} 0.1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("g{k=\"tiny\"} 1e-09\n"), std::string::npos) << text;
  EXPECT_NE(text.find("g{k=\"big\"} 12345678901234\n"), std::string::npos) << text;
  EXPECT_NE(text.find("g{k=\"inf\"} +Inf\n"), std::string::npos) << text;
  EXPECT_NE(text.find("g{k=\"ninf\"} -Inf\n"), std::string::npos) << text;
}

TEST_F(MetricsTest, HistogramBucketsAreCumulative) {
  Describe("kiln_op_seconds", "histogram", "Operation latency.");
  const Labels op = {{"op", "create"}};
  Observe("kiln_op_seconds", op, 0.001);  // on a bound: le is inclusive
  Observe("kiln_op_seconds", op, 0.003);
  Observe("kiln_op_seconds", op, 0.7);
  Observe("kiln_op_seconds", op, 100);
  Observe("kiln_op_seconds", op, 3600);  // above every bound: only +Inf
  std::string text = Render();
  EXPECT_TRUE(text.starts_with(
      "# HELP kiln_op_seconds Operation latency.\n# TYPE kiln_op_seconds histogram\n"))
      << text;

  const std::string b = "kiln_op_seconds_bucket{op=\"create\",le=\"";
  const std::vector<std::pair<std::string, double>> want = {
      {"0.001", 1}, {"0.0025", 1}, {"0.005", 2}, {"0.01", 2}, {"0.025", 2}, {"0.05", 2}, {"0.1", 2},
      {"0.25", 2},  {"0.5", 2},    {"1", 3},     {"2.5", 3},  {"5", 3},     {"10", 3},   {"30", 3},
      {"60", 3},    {"300", 4},    {"900", 4},   {"1800", 4}, {"+Inf", 5}};
  for (const auto& [le, n] : want) EXPECT_EQ(Sample(text, b + le + "\"}"), n) << le << "\n" << text;
  EXPECT_DOUBLE_EQ(Sample(text, "kiln_op_seconds_sum{op=\"create\"}"),
                   0.001 + 0.003 + 0.7 + 100 + 3600);
  EXPECT_EQ(Sample(text, "kiln_op_seconds_count{op=\"create\"}"), 5);
  // Bucket lines come in ascending le order, before _sum and _count.
  EXPECT_LT(text.find(b + "0.001\""), text.find(b + "0.0025\""));
  EXPECT_LT(text.find(b + "1800\""), text.find(b + "+Inf\""));
  EXPECT_LT(text.find(b + "+Inf\""), text.find("kiln_op_seconds_sum"));
  EXPECT_LT(text.find("kiln_op_seconds_sum"), text.find("kiln_op_seconds_count"));
}

TEST_F(MetricsTest, HistogramWithoutLabels) {
  Observe("h", {}, 0.5);
  std::string text = Render();
  EXPECT_EQ(Sample(text, "h_bucket{le=\"0.25\"}"), 0);
  EXPECT_EQ(Sample(text, "h_bucket{le=\"0.5\"}"), 1);
  EXPECT_EQ(Sample(text, "h_bucket{le=\"+Inf\"}"), 1);
  EXPECT_EQ(Sample(text, "h_sum"), 0.5);
  EXPECT_EQ(Sample(text, "h_count"), 1);
}

TEST_F(MetricsTest, CollectorsRunAtEveryRender) {
  Describe("kiln_pool_idle", "gauge", "Idle warm sandboxes.");
  int calls = 0;
  AddCollector("kiln_pool_idle", [&calls](const Emit& emit) {
    ++calls;
    emit({{"image", "python"}}, calls);
    emit({{"image", "node"}}, 2);
  });
  Render();
  EXPECT_EQ(Render(),
            "# HELP kiln_pool_idle Idle warm sandboxes.\n"
            "# TYPE kiln_pool_idle gauge\n"
            "kiln_pool_idle{image=\"python\"} 2\n"
            "kiln_pool_idle{image=\"node\"} 2\n");
  EXPECT_EQ(calls, 2);
}

TEST_F(MetricsTest, CollectorMayUpdateMetricsAndEmitNothing) {
  AddCollector("empty", [](const Emit&) { Set("set_by_collector", {}, 5); });
  std::string text = Render();
  EXPECT_EQ(text.find("empty"), std::string::npos) << text;  // no samples, no family
  EXPECT_NE(text.find("set_by_collector 5\n"), std::string::npos) << text;
}

TEST_F(MetricsTest, EscapesLabelValuesAndHelp) {
  Describe("e", "counter", "Back\\slash and\nnewline \"quoted\".");
  Inc("e", {{"path", "C:\\dir\"x\"\nend"}});
  EXPECT_EQ(Render(),
            "# HELP e Back\\\\slash and\\nnewline \"quoted\".\n"
            "# TYPE e counter\n"
            "e{path=\"C:\\\\dir\\\"x\\\"\\nend\"} 1\n");
}

TEST_F(MetricsTest, ConcurrentIncGivesExactTotal) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kPerThread; ++i) {
        Inc("hits_total");
        Inc("hits_by_parity_total", {{"parity", i % 2 ? "odd" : "even"}});
        Observe("lat_seconds", {{"t", std::to_string(t % 2)}}, 0.002);
        if (i % 1000 == 0) Render();  // scrapes race with updates
      }
    });
  }
  for (auto& th : threads) th.join();
  std::string text = Render();
  EXPECT_EQ(Sample(text, "hits_total"), kThreads * kPerThread);
  EXPECT_EQ(Sample(text, "hits_by_parity_total{parity=\"even\"}"), kThreads * kPerThread / 2);
  EXPECT_EQ(Sample(text, "hits_by_parity_total{parity=\"odd\"}"), kThreads * kPerThread / 2);
  EXPECT_EQ(Sample(text, "lat_seconds_count{t=\"0\"}"), kThreads * kPerThread / 2);
  EXPECT_EQ(Sample(text, "lat_seconds_bucket{t=\"1\",le=\"0.0025\"}"), kThreads * kPerThread / 2);
}

TEST_F(MetricsTest, EverySampleLineParsesBack) {
  Describe("kiln_requests_total", "counter", "Requests.");
  Inc("kiln_requests_total", {{"route", "/v1/sandboxes/{id}"}, {"code", "200"}});
  Inc("kiln_requests_total", {{"route", "weird \"q\" \\ \n, }"}});
  Set("kiln_up", {}, 1);
  Set("kiln_temp", {{"k", "v"}}, -0.125);
  Set("kiln_inf", {}, kInf);
  Observe("kiln_op_seconds", {{"op", "exec"}}, 0.3);
  Observe("kiln_op_seconds", {}, 1e-5);
  AddCollector("kiln_collected", [](const Emit& emit) {
    emit({}, 1.5e20);
    emit({{"a", "b"}, {"c", "d"}}, 0);
  });

  const std::string name = R"([a-zA-Z_:][a-zA-Z0-9_:]*)";
  const std::string label = R"([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")";
  const std::string value = R"((?:[-+]?[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?|[-+]Inf|NaN))";
  const std::regex sample("^" + name + "(?:\\{" + label + "(?:," + label + ")*\\})? " + value +
                          "$");
  const std::regex comment("^# (?:HELP " + name + " .*|TYPE " + name +
                           " (?:counter|gauge|histogram))$");
  std::istringstream in(Render());
  int samples = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("#")) {
      EXPECT_TRUE(std::regex_match(line, comment)) << line;
    } else {
      EXPECT_TRUE(std::regex_match(line, sample)) << line;
      ++samples;
    }
  }
  EXPECT_EQ(samples, 2 + 1 + 1 + 1 + 2 * 21 + 2);  // a histogram: 18 bounds, +Inf, sum, count
}

}  // namespace
}  // namespace metrics_test
}  // namespace kiln::metrics
