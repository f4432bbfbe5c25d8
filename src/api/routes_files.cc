// Files: /v1/sandboxes/{id}/files/{content,list,stat,archive} and
// files:{mkdir,remove,rename}.
#include "api/errors.h"
#include "api/routes.h"
#include "api/validate.h"
#include "common/digest.h"
#include "common/time.h"
#include "proto/frame.h"

namespace kiln::api {

using AgentOp = engine::AgentStream;
using nlohmann::json;

namespace {

constexpr uint64_t kMaxFile = 256ull << 20;
constexpr uint64_t kMaxArchive = 1ull << 30;
// Files up to this size are buffered so the answer can carry a checksum.
constexpr uint64_t kHashedFile = 8ull << 20;

json ApiEntry(json e) {
  if (e.contains("modifiedMs")) {
    e["modifiedAt"] = FormatTime(e["modifiedMs"].get<int64_t>());
    e.erase("modifiedMs");
  }
  return e;
}

// Waits for the agent's first message; throws if it is an error answer.
AgentOp::Message First(AgentOp& op) {
  AgentOp::Message m;
  if (!op.Next(&m, 30000)) throw ApiError(Code::kAgentTimeout, "the sandbox did not answer");
  if (m.kind == AgentOp::Message::kClosed) throw ApiError(Code::kNotRunning, "the sandbox stopped");
  if (m.kind == AgentOp::Message::kResponse && m.body.contains("error"))
    throw FromAgentError(m.body);
  return m;
}

// Feeds the request body to the agent as stdin data; returns bytes sent.
uint64_t PumpBody(Exchange& ex, AgentOp& op, uint64_t max, std::string first = "") {
  uint64_t total = 0;
  std::string chunk = std::move(first);
  do {
    total += chunk.size();
    if (total > max) {
      op.Cancel();
      throw ApiError(Code::kPayloadTooLarge,
                     "the body is larger than " + std::to_string(max) + " bytes");
    }
    if (!chunk.empty() && !op.SendData(proto::kStdin, chunk, false))
      throw ApiError(Code::kNotRunning, "the sandbox stopped");
  } while (ex.ReadBodyChunk(&chunk));
  if (ex.body_error()) {
    op.Cancel();
    throw ApiError(Code::kInvalidRequest, "body: the upload ended early");
  }
  op.SendData(proto::kStdin, "", true);
  return total;
}

json WaitResponse(AgentOp& op) {
  AgentOp::Message m;
  for (;;) {
    if (!op.Next(&m, 120000)) throw ApiError(Code::kAgentTimeout, "the sandbox did not answer");
    if (m.kind == AgentOp::Message::kData) op.Ack(static_cast<uint32_t>(m.data.size()));
    if (m.kind == AgentOp::Message::kClosed)
      throw ApiError(Code::kNotRunning, "the sandbox stopped");
    if (m.kind == AgentOp::Message::kResponse) {
      if (m.body.contains("error")) throw FromAgentError(m.body);
      return m.body;
    }
  }
}

void ReadContent(Exchange& ex, engine::AgentChannel& conn, const std::string& path) {
  auto op = conn.Start(json{{"op", "file.read"}, {"path", path}});
  AgentOp::Message m = First(*op);
  uint64_t size = m.body.value("size", uint64_t{0});
  std::vector<std::pair<std::string, std::string>> headers = {
      {"x-content-length", std::to_string(size)}};
  bool buffered = size <= kHashedFile;
  std::string data;
  if (!buffered && !ex.BeginStream(200, "application/octet-stream", headers)) return op->Cancel();
  for (;;) {
    if (!op->Next(&m, 60000)) {
      if (!buffered) return ex.AbortStream();
      throw ApiError(Code::kAgentTimeout, "the sandbox did not answer");
    }
    if (m.kind == AgentOp::Message::kData) {
      if (buffered) {
        data += m.data;
      } else if (!ex.WriteChunk(m.data)) {
        return op->Cancel();
      }
      op->Ack(static_cast<uint32_t>(m.data.size()));
    } else if (m.kind == AgentOp::Message::kResponse && !m.body.contains("error")) {
      if (!buffered) return ex.EndStream();
      headers = {{"x-content-length", std::to_string(data.size())},
                 {"x-content-sha256", Sha256Hex(data)}};
      return ex.SendBytes(200, data, "application/octet-stream", headers);
    } else if (m.kind == AgentOp::Message::kResponse || m.kind == AgentOp::Message::kClosed) {
      if (!buffered) return ex.AbortStream();
      if (m.kind == AgentOp::Message::kClosed)
        throw ApiError(Code::kNotRunning, "the sandbox stopped");
      throw FromAgentError(m.body);
    }
  }
}

// A required absolute path field of a JSON body.
std::string BodyPath(FieldReader& f, const std::string& name) {
  auto path = f.String(name, 4096);
  if (!path) {
    f.Issue(name, "is required");
  } else if (path->empty() || (*path)[0] != '/') {
    f.Issue(name, "must be an absolute path");
  }
  return path.value_or("");
}

int ParseMode(Exchange& ex) {
  auto m = ex.Query("mode");
  if (!m) return 0644;
  bool ok = !m->empty() && m->size() <= 4 && m->find_first_not_of("01234567") == std::string::npos;
  if (!ok) throw InvalidField("query.mode", "must be an octal mode such as 644 or 0755");
  return std::stoi(*m, nullptr, 8);
}

}  // namespace

void AddFileRoutes(Router& r, ApiContext& ctx) {
  r.Add("GET", "/v1/sandboxes/{id}/files/content", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = QueryPath(ex);
    ReadContent(ex, *RunningConn(*s), path);
  });

  r.Add("PUT", "/v1/sandboxes/{id}/files/content", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = QueryPath(ex);
    int mode = ParseMode(ex);
    if (auto n = ex.content_length(); n && *n > kMaxFile)
      throw ApiError(Code::kPayloadTooLarge,
                     "files are at most 256 MiB; use files/archive for trees");
    auto op = RunningConn(*s)->Start(json{{"op", "file.write"}, {"path", path}, {"mode", mode}});
    uint64_t sent = PumpBody(ex, *op, kMaxFile);
    json a = WaitResponse(*op);
    if (a.value("size", uint64_t{0}) != sent)
      throw ApiError(Code::kInternal, "size mismatch writing " + path);
    ex.SendJson(200, json{{"path", path}, {"size", sent}});
  });

  r.Add("GET", "/v1/sandboxes/{id}/files/list", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = QueryPath(ex);
    int depth = 1;
    if (auto d = ex.Query("depth")) {
      try {
        size_t used;
        depth = std::stoi(*d, &used);
        if (used != d->size()) depth = 0;
      } catch (...) {
        depth = 0;
      }
      if (depth < 1 || depth > 16)
        throw InvalidField("query.depth", "must be an integer from 1 to 16");
    }
    json a =
        CallAgent(*RunningConn(*s), json{{"op", "file.list"}, {"path", path}, {"depth", depth}});
    json data = json::array();
    for (auto& e : a["data"]) data.push_back(ApiEntry(e));
    ex.SendJson(200, json{{"data", data}});
  });

  r.Add("GET", "/v1/sandboxes/{id}/files/stat", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = QueryPath(ex);
    ex.SendJson(200,
                ApiEntry(CallAgent(*RunningConn(*s), json{{"op", "file.stat"}, {"path", path}})));
  });

  r.Add("POST", "/v1/sandboxes/{id}/files:mkdir", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    std::string path = BodyPath(f, "path");
    bool parents = f.Bool("parents").value_or(true);
    f.Finish();
    ex.SendJson(
        200, ApiEntry(CallAgent(*RunningConn(*s),
                                json{{"op", "file.mkdir"}, {"path", path}, {"parents", parents}})));
  });

  r.Add("POST", "/v1/sandboxes/{id}/files:remove", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    std::string path = BodyPath(f, "path");
    bool recursive = f.Bool("recursive").value_or(false);
    f.Finish();
    ex.SendJson(
        200,
        CallAgent(*RunningConn(*s),
                  json{{"op", "file.remove"}, {"path", path}, {"recursive", recursive}}, 120000));
  });

  r.Add("POST", "/v1/sandboxes/{id}/files:rename", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    std::string from = BodyPath(f, "from");
    std::string to = BodyPath(f, "to");
    bool overwrite = f.Bool("overwrite").value_or(false);
    f.Finish();
    ex.SendJson(
        200,
        ApiEntry(CallAgent(
            *RunningConn(*s),
            json{{"op", "file.rename"}, {"from", from}, {"to", to}, {"overwrite", overwrite}})));
  });

  r.Add("GET", "/v1/sandboxes/{id}/files/archive", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = QueryPath(ex);
    bool gzip = ex.Query("gzip").value_or("false") == "true";
    auto op = RunningConn(*s)->Start(json{{"op", "archive.get"}, {"path", path}, {"gzip", gzip}});
    AgentOp::Message m = First(*op);  // the tar's start event, or an error
    if (!ex.BeginStream(200, gzip ? "application/gzip" : "application/x-tar")) return op->Cancel();
    for (;;) {
      if (!op->Next(&m, 120000)) return ex.AbortStream();
      if (m.kind == AgentOp::Message::kData && m.channel == proto::kStdout) {
        if (!ex.WriteChunk(m.data)) return op->Cancel();
        op->Ack(static_cast<uint32_t>(m.data.size()));
      } else if (m.kind == AgentOp::Message::kData) {
        op->Ack(static_cast<uint32_t>(m.data.size()));
      } else if (m.kind == AgentOp::Message::kResponse) {
        // A tar that failed half-way must not look like a short archive.
        if (m.body.value("exitCode", json(1)) == json(0)) return ex.EndStream();
        return ex.AbortStream();
      } else if (m.kind == AgentOp::Message::kClosed) {
        return ex.AbortStream();
      }
    }
  });

  r.Add("PUT", "/v1/sandboxes/{id}/files/archive", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = QueryPath(ex);
    if (auto n = ex.content_length(); n && *n > kMaxArchive)
      throw ApiError(Code::kPayloadTooLarge, "archives are at most 1 GiB");
    std::string first;
    ex.ReadBodyChunk(&first);
    bool gzip = first.size() >= 2 && static_cast<unsigned char>(first[0]) == 0x1f &&
                static_cast<unsigned char>(first[1]) == 0x8b;
    auto op = RunningConn(*s)->Start(json{{"op", "archive.put"}, {"path", path}, {"gzip", gzip}});
    First(*op);
    uint64_t sent = PumpBody(ex, *op, kMaxArchive, std::move(first));
    std::string err;
    AgentOp::Message m;
    for (;;) {
      if (!op->Next(&m, 300000)) throw ApiError(Code::kAgentTimeout, "the sandbox did not answer");
      if (m.kind == AgentOp::Message::kData) {
        op->Ack(static_cast<uint32_t>(m.data.size()));
        if (m.channel == proto::kStderr && err.size() < 4096) err += m.data;
      } else if (m.kind == AgentOp::Message::kClosed) {
        throw ApiError(Code::kNotRunning, "the sandbox stopped");
      } else if (m.kind == AgentOp::Message::kResponse) {
        break;
      }
    }
    if (m.body.contains("error")) throw FromAgentError(m.body);
    if (m.body.value("exitCode", json(1)) != json(0))
      throw ApiError(Code::kInvalidArchive, "the archive could not be unpacked: " + err);
    if (m.body.value("stdinBytes", uint64_t{0}) != sent)
      throw ApiError(Code::kUploadIncomplete, "the sandbox took " +
                                                  m.body.value("stdinBytes", json(0)).dump() +
                                                  " of " + std::to_string(sent) + " bytes");
    ex.SendJson(200, json{{"path", path}, {"bytes", sent}});
  });
}

}  // namespace kiln::api
