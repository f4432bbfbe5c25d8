// Fuzzes kilnd's HTTP front: the bytes of one request (request line,
// headers, body, chunked or not) through Boost.Beast's parser with the
// server's limits, the request target's decoding, authentication and
// idempotency (ApiFront), the router, the JSON body and every route's field
// validation, down to a real SandboxManager over the in-memory FakeEngine.
//
// Ids are random, so the dictionary names them by placeholder: "KEY" in a
// header becomes a live API key's secret and "SBX" in the target the id of
// a sandbox that is running when the input arrives. Whatever an input
// creates is stopped after it, so inputs do not pile up state.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <boost/beast/http.hpp>

#include "api/errors.h"
#include "api/front.h"
#include "api/json_body.h"
#include "api/kiln/routes.h"
#include "api/request_target.h"
#include "api/sandboxfusion/sandboxfusion.h"
#include "control/capacity.h"
#include "control/egress_log.h"
#include "control/keys.h"
#include "control/sandbox_manager.h"
#include "fakes/fake_engine.h"
#include "fuzz_util.h"
#include "io/service.h"
#include "store/db.h"
#include "store/egress_log_store.h"
#include "store/idempotency_store.h"
#include "store/key_store.h"
#include "store/sandbox_store.h"
#include "store/snapshot_store.h"
#include "store/usage_store.h"

namespace kiln::fuzz {
namespace {

namespace http = boost::beast::http;
using nlohmann::json;

// One parsed request as the routes see it; the answer is only recorded.
class FuzzExchange : public api::Exchange {
 public:
  FuzzExchange(const http::request<http::string_body>& req, std::string target_path,
               std::vector<std::pair<std::string, std::string>> query)
      : req_(req),
        method_(req.method_string()),
        path_(std::move(target_path)),
        query_(std::move(query)) {}

  const std::string& method() const override { return method_; }
  const std::string& path() const override { return path_; }
  std::optional<std::string> Query(const std::string& name) const override {
    for (const auto& [k, v] : query_)
      if (k == name) return v;
    return std::nullopt;
  }
  std::vector<std::string> QueryAll(const std::string& name) const override {
    std::vector<std::string> out;
    for (const auto& [k, v] : query_)
      if (k == name) out.push_back(v);
    return out;
  }
  std::string Header(const std::string& name) const override {
    auto it = req_.find(name);
    return it == req_.end() ? "" : std::string(it->value());
  }
  const std::string& request_id() const override { return request_id_; }
  std::optional<uint64_t> content_length() const override { return req_.body().size(); }
  json JsonBody(size_t max_bytes) override {
    if (req_.body().size() > max_bytes) throw api::ApiError(Code::kPayloadTooLarge, "too large");
    if (!json_) json_ = api::ParseJsonBody(req_.body());
    return *json_;
  }
  bool ReadBodyChunk(std::string* out) override {
    if (body_read_) return false;
    body_read_ = true;
    *out = req_.body();
    return !out->empty();
  }
  bool body_error() const override { return false; }
  void SendJson(int status, const json& body) override {
    std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
    Answer(status, &text);
  }
  void SendBytes(int status, std::string_view, const std::string&,
                 const std::vector<std::pair<std::string, std::string>>&) override {
    Answer(status, nullptr);
  }
  bool BeginStream(int status, const std::string&,
                   const std::vector<std::pair<std::string, std::string>>&) override {
    Answer(status, nullptr);
    return false;  // the client is gone: streams end at once
  }
  bool WriteChunk(std::string_view) override { return false; }
  void EndStream() override {}
  void AbortStream() override {}
  bool responded() const override { return status_ != 0; }
  bool ClientGone() override { return true; }
  int status() const override { return status_; }

 private:
  void Answer(int status, const std::string* text) {
    if (status_ != 0) return;
    RunBeforeAnswer(status, text);
    status_ = status;
  }

  const http::request<http::string_body>& req_;
  std::string method_, path_, request_id_ = "req_fuzz";
  std::vector<std::pair<std::string, std::string>> query_;
  std::optional<json> json_;
  bool body_read_ = false;
  int status_ = 0;
};

// The daemon's parts, once per process.
struct World {
  static control::CapacityLimits Roomy() {
    control::CapacityLimits limits;
    limits.host_memory_mib = 1 << 20;
    limits.host_vcpus = 1 << 10;
    limits.key_sandboxes = 1 << 20;
    return limits;
  }

  World() {
    engine.OnNewChannel([](const std::string&, fakes::FakeAgentChannel& ch) {
      // Every operation is refused at once, as an agent would refuse a bad
      // request: the routes' own handling of answers is what is fuzzed.
      for (const char* op : kAgentOps) {
        ch.Handle(op, [](const std::shared_ptr<fakes::FakeAgentOp>& o) {
          o->Respond(json{{"error", {{"code", "invalid_request"}, {"message", "fuzz"}}}});
        });
      }
    });
    api::v1::AddSandboxRoutes(router, ctx);
    api::v1::AddExecRoutes(router, ctx);
    api::v1::AddProcessRoutes(router, ctx);
    api::v1::AddFileRoutes(router, ctx);
    api::v1::AddSnapshotRoutes(router, ctx);
    api::v1::AddSnapshotTransferRoutes(router, ctx);
    api::v1::AddNetworkRoutes(router, ctx);
    api::v1::AddKeyRoutes(router, ctx);
    api::v1::AddUsageRoutes(router, ctx);
    api::v1::AddMetricsRoutes(router, ctx);
    // SandboxFusion's run_code body and its key in the path (no images here:
    // a body that reads well is refused at its launch).
    api::AddSandboxFusionRoutes(router, ctx, api::SandboxFusionOptions{});
    front = std::make_unique<api::ApiFront>(router, keys, idempotency);
    front->AddDialect(api::SandboxFusionDialect());
    secret = keys.Create("fuzz", /*admin=*/false, std::nullopt).second;
  }

  // The id "SBX" stands for: a running sandbox of the fuzz key.
  std::string FixtureSandbox() {
    if (fixture && fixture->state() == control::SandboxState::kRunning) return fixture->id();
    control::SandboxSpec spec;
    spec.owner = keys.Authenticate(secret)->id;
    auto made = manager->Create(spec, std::chrono::steady_clock::now() + std::chrono::seconds(5));
    fixture = made.ok() ? *made : nullptr;
    return fixture ? fixture->id() : "sb_none";
  }

  // Stops what an input created and drops its snapshots.
  void Tidy() {
    for (const auto& s : manager->List(control::ListFilter{}))
      if (s != fixture && s->state() != control::SandboxState::kStopped) manager->Stop(s, "fuzz");
    for (const auto& snap : manager->snapshots().List()) manager->snapshots().Delete(snap.id);
  }

  static constexpr const char* kAgentOps[] = {
      "exec",        "oom",         "agent.configure", "file.read",   "file.write",
      "file.list",   "file.stat",   "file.mkdir",      "file.remove", "file.rename",
      "archive.get", "archive.put", "proc.start",      "proc.list",   "proc.get",
      "proc.output", "proc.write",  "proc.signal",     "proc.resize", "egress.attach"};

  fakes::FakeEngine engine;
  TempDir dir;
  store::SnapshotStore snapshots{dir.path()};
  store::Db db{":memory:"};
  store::SandboxStore records{db};
  store::UsageStore usage{db};
  store::KeyStore keys{db};
  store::IdempotencyStore idempotency{db};
  store::EgressLogStore egress_log{db};
  control::Keys key_service{keys};
  control::EgressLog egress_pages{egress_log};
  control::Capacity capacity{Roomy()};
  std::unique_ptr<control::SandboxManager> manager = std::make_unique<control::SandboxManager>(
      control::ManagerDeps{engine, "/fake/rootfs", snapshots, records, usage, capacity, nullptr},
      control::ManagerOptions{});
  launch::Launcher launcher{*manager, nullptr};
  io::Service io{[this](const std::string& key, std::optional<int64_t> limit) {
    return launcher.CheckSpendingLimit(key, limit);
  }};
  api::ApiContext ctx{*manager, launcher, io, key_service, egress_pages, nullptr};
  api::Router router;
  std::unique_ptr<api::ApiFront> front;
  std::string secret;
  std::shared_ptr<control::Sandbox> fixture;
};

void Handle(World& w, http::request<http::string_body>& req) {
  std::string target(req.target());
  ReplaceAll(target, "SBX", w.FixtureSandbox());
  for (auto field : {http::field::authorization, http::field::proxy_authorization}) {
    if (auto it = req.find(field); it != req.end()) {
      std::string value(it->value());
      ReplaceAll(value, "KEY", w.secret);
      req.set(field, value);
    }
  }
  api::RequestTarget parsed;
  try {
    parsed = api::ParseRequestTarget(target);
  } catch (const api::ApiError&) {
    return;  // answered 400 by the server
  }
  FuzzExchange ex(req, parsed.path, parsed.query);
  try {
    w.front->Handle(ex);
  } catch (const api::ApiError&) {
    // the server answers these (http_server.cc)
  } catch (const std::exception&) {
    // the server answers 500 and logs; fuzzing looks for crashes, leaks and
    // undefined behaviour, which are not exceptions
  }
}

}  // namespace
}  // namespace kiln::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace http = boost::beast::http;
  static auto* world = new kiln::fuzz::World();  // lives until exit, as in kilnd
  http::request_parser<http::string_body> parser;
  parser.body_limit(1 << 20);  // kilnd streams larger bodies; the JSON cap is 8 MiB
  parser.header_limit(64 * 1024);
  parser.eager(true);
  boost::system::error_code ec;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty() && !parser.is_done()) {
    size_t used = parser.put(boost::asio::buffer(rest.data(), rest.size()), ec);
    if (ec == http::error::need_more) break;
    if (ec) return 0;  // answered 400 "malformed HTTP request"
    if (used == 0) break;
    rest.remove_prefix(used);
  }
  if (!parser.is_done()) {
    // kilnd's read loop answers end_of_stream without put_eof when the peer
    // sent nothing; Beast asserts got_some() there.
    if (!parser.got_some()) return 0;
    parser.put_eof(ec);
    if (ec || !parser.is_done()) return 0;
  }
  auto req = parser.release();
  kiln::fuzz::Handle(*world, req);
  world->Tidy();
  return 0;
}
