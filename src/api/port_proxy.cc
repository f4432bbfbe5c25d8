#include "api/port_proxy.h"

#include <algorithm>
#include <atomic>
#include <boost/beast/http.hpp>
#include <cctype>
#include <chrono>
#include <sstream>
#include <thread>

#include "api/errors.h"
#include "common/strings.h"
#include "common/time.h"

namespace kiln::api {

namespace http = boost::beast::http;

namespace {

// The comma-separated tokens of a header value, lowercased and trimmed.
std::vector<std::string> Tokens(const std::string& value) {
  std::vector<std::string> out;
  std::stringstream in(value);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
    if (a != std::string::npos) out.push_back(AsciiLower(item.substr(a, b - a + 1)));
  }
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A Cookie header without the cookie `name` ("" if nothing is left).
std::string WithoutCookie(const std::string& header, const std::string& name) {
  std::string out;
  std::stringstream in(header);
  std::string item;
  while (std::getline(in, item, ';')) {
    size_t a = item.find_first_not_of(' ');
    if (a == std::string::npos) continue;
    std::string pair = item.substr(a);
    if (pair.compare(0, name.size() + 1, name + "=") == 0) continue;
    if (!out.empty()) out += "; ";
    out += pair;
  }
  return out;
}

}  // namespace

bool KilnCredentialHeader(const std::string& name, const std::string& value) {
  static const std::vector<std::string> kAlways = {
      "x-api-key",      "x-kiln-preview-token",     "x-runtime-preview-token",
      "x-access-token", "e2b-traffic-access-token", "x-daytona-preview-token"};
  if (Has(kAlways, name)) return true;
  if (name != "authorization") return false;
  // A kiln key (or E2B's spelling of one), valid or not: a guess at another
  // tenant's key is as much a secret to keep from the sandbox.
  size_t space = value.find(' ');
  if (space == std::string::npos || AsciiLower(value.substr(0, space)) != "bearer") return false;
  size_t at = value.find_first_not_of(' ', space);
  std::string token = at == std::string::npos ? "" : value.substr(at);
  return token.starts_with("kiln_") || token.starts_with("e2b_");
}

namespace {

// The request head the server gets; *upgrade says whether it asks for one.
std::string RequestHead(Exchange& ex, const ProxyRequest& r, bool* upgrade, bool* chunked) {
  http::request<http::empty_body> req;
  req.method_string(ex.method());
  req.target(r.target);
  req.version(11);
  std::vector<std::string> connection = Tokens(ex.Header("Connection"));
  *upgrade = Has(connection, "upgrade") && !ex.Header("Upgrade").empty();
  *chunked = Has(Tokens(ex.Header("Transfer-Encoding")), "chunked");
  static const std::vector<std::string> kHopByHop = {"connection",
                                                     "keep-alive",
                                                     "proxy-connection",
                                                     "te",
                                                     "trailer",
                                                     "transfer-encoding",
                                                     "upgrade",
                                                     "content-length",
                                                     "proxy-authorization",
                                                     "x-forwarded-for",
                                                     "x-forwarded-host",
                                                     "x-forwarded-proto",
                                                     "x-forwarded-prefix"};
  for (const auto& [name, value] : ex.Headers()) {
    std::string key = AsciiLower(name);
    if (Has(kHopByHop, key) || Has(connection, key) || Has(r.drop_headers, key) ||
        KilnCredentialHeader(key, value))
      continue;
    if (key == "cookie") {
      std::string kept = WithoutCookie(value, kPreviewTokenCookie);
      if (!kept.empty()) req.insert(name, kept);
      continue;
    }
    req.insert(name, value);
  }
  if (*upgrade) {
    req.set(http::field::connection, "Upgrade");
    req.set(http::field::upgrade, ex.Header("Upgrade"));
  } else {
    req.set(http::field::connection, "close");
  }
  if (auto n = ex.content_length()) {
    req.set(http::field::content_length, std::to_string(*n));
  } else if (*chunked) {
    req.set(http::field::transfer_encoding, "chunked");
  }
  std::string forwarded_for = ex.Header("X-Forwarded-For");
  std::string peer = ex.peer_address();
  if (!peer.empty())
    req.set("X-Forwarded-For", forwarded_for.empty() ? peer : forwarded_for + ", " + peer);
  if (!ex.Header("Host").empty()) req.set("X-Forwarded-Host", ex.Header("Host"));
  req.set("X-Forwarded-Proto", "http");
  if (!r.forwarded_prefix.empty()) req.set("X-Forwarded-Prefix", r.forwarded_prefix);
  std::ostringstream head;
  head << req.base();
  return head.str();
}

std::string Chunk(const std::string& data) {
  std::ostringstream out;
  out << std::hex << data.size() << "\r\n" << data << "\r\n";
  return out.str();
}

// The status code of an answer's first bytes ("HTTP/1.1 200 ..."), for the
// request log only; 0 when they are not a status line.
int StatusOf(const std::string& first) {
  http::response_parser<http::empty_body> parser;
  parser.eager(false);
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(first.data(), first.size()), ec);
  return parser.is_header_done() ? parser.get().result_int() : 0;
}

}  // namespace

std::shared_ptr<void> RelayRegistry::Add(const std::string& key, io::PortConnection* conn) {
  {
    std::lock_guard lock(mu_);
    open_[key].insert(conn);
  }
  return std::shared_ptr<void>(nullptr, [this, key, conn](void*) {
    std::lock_guard lock(mu_);
    auto it = open_.find(key);
    if (it == open_.end()) return;
    it->second.erase(conn);
    if (it->second.empty()) open_.erase(it);
  });
}

void RelayRegistry::Cut(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = open_.find(key);
  if (it == open_.end()) return;
  for (io::PortConnection* conn : it->second) conn->Cancel();
}

std::string TargetAfterSegments(const std::string& raw, int segments) {
  size_t query = raw.find('?');
  std::string path = raw.substr(0, query);
  std::string rest = query == std::string::npos ? "" : raw.substr(query);
  size_t at = 0;
  for (int i = 0; i < segments && at != std::string::npos; ++i) at = path.find('/', at + 1);
  std::string tail = at == std::string::npos ? "/" : path.substr(at);
  return tail + rest;
}

void ProxyHttp(Exchange& ex, const io::SandboxIo& io, const ProxyRequest& r) {
  io::PortConnection conn = ValueOrThrow(io.DialPort(r.port, kPortDialMs));
  std::shared_ptr<void> registered;
  if (r.registry) registered = r.registry->Add(r.registry_key, &conn);
  bool upgrade = false, chunked = false;
  std::string head = RequestHead(ex, r, &upgrade, &chunked);
  if (!conn.Send(head)) throw ApiError(Code::kNotRunning, "the sandbox stopped");
  std::unique_ptr<RawConnection> raw = ex.TakeRaw(502);
  if (!raw) throw ApiError(Code::kInternal, "this connection cannot be relayed");

  // Any byte either way moves the idle deadline.
  std::atomic<int64_t> last_byte_ms{MonotonicNowMs()};
  auto idle = [&] { return MonotonicNowMs() - last_byte_ms.load() > r.idle_ms; };

  // The server's bytes to the client, on a thread of their own so that an
  // answer that starts before the request's body ended is not held up.
  std::atomic<bool> over{false};
  std::thread back([&] {
    std::string data;
    bool end = false, first = true;
    for (;;) {
      // No timeout here: a timed wait per message cost an echo 0.15 ms. The
      // client's side below watches the idle time and cancels, which ends
      // this wait.
      auto got = conn.Receive(&data, &end, -1);
      if (got != io::PortConnection::Got::kData) break;
      last_byte_ms = MonotonicNowMs();
      if (first && !data.empty()) {
        first = false;
        ex.NoteStatus(StatusOf(data));
      }
      if (!data.empty() && !raw->Write(data)) {
        conn.Cancel();  // the client left
        break;
      }
      if (end) break;
    }
    over = true;
    raw->Shutdown();  // wakes the reader below
  });

  // The client's bytes to the server: the body, then (an upgrade) what
  // follows it.
  std::string chunk;
  bool ok = true;
  while (ok && ex.ReadBodyChunk(&chunk)) {
    last_byte_ms = MonotonicNowMs();
    ok = conn.Send(chunked ? Chunk(chunk) : chunk);
  }
  if (ex.body_error()) {
    ok = false;
  } else if (ok && chunked) {
    ok = conn.Send("0\r\n\r\n");
  }
  while (ok && !over) {
    std::string data;
    auto got = raw->Read(&data, 1000);
    if (got == RawConnection::Got::kTimeout) {
      if (idle()) break;
      continue;
    }
    if (got == RawConnection::Got::kEnded) {
      // The client ended its side. A plain request's client has left (as a
      // reverse proxy reads it): its server is cut now, so a server that
      // never answers holds nothing. An upgraded stream passes the end on,
      // and its server gets a while to finish.
      if (!upgrade) break;
      conn.Send("", /*end=*/true);
      for (int i = 0; i < kAfterClientEndMs / 100 && !over; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      break;
    }
    last_byte_ms = MonotonicNowMs();
    // Past a plain request, bytes are a pipelined request: the server was
    // asked to close, so they are dropped.
    if (upgrade) ok = conn.Send(data);
  }
  if (!over) conn.Cancel();
  back.join();
}

}  // namespace kiln::api
