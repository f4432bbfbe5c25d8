#include "cli/http_client.h"

#include <array>
#include <cstdint>
#include <limits>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "cli/errors.h"
#include "cli/interrupt.h"
#include "cli/ndjson.h"

#ifndef KILN_VERSION
#define KILN_VERSION "dev"
#endif

namespace kiln::cli {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using json = nlohmann::json;

namespace {

constexpr auto kConnectTimeout = std::chrono::seconds(10);
// How often a blocked request looks for a pending Ctrl-C.
constexpr auto kInterruptPoll = std::chrono::milliseconds(100);

using Parser = http::response_parser<http::buffer_body>;
using Request = http::request<http::string_body>;

http::verb to_verb(Method m) {
  switch (m) {
    case Method::kGet:
      return http::verb::get;
    case Method::kPost:
      return http::verb::post;
    case Method::kPut:
      return http::verb::put;
    case Method::kDelete:
      return http::verb::delete_;
  }
  return http::verb::get;
}

// What a server closing an idle keep-alive connection looks like to us.
bool is_stale_connection(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

bool is_success(const Parser& p) {
  unsigned s = p.get().result_int();
  return s >= 200 && s < 300;
}

std::string dump_request_json(const json& body) {
  try {
    return body.dump();
  } catch (const json::type_error&) {
    throw UsageError("an argument is not valid UTF-8 text");
  }
}

json parse_answer(const std::string& body) {
  if (body.empty()) return nullptr;
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw ClientError("bad_response", "the daemon sent an answer that is not JSON");
  return j;
}

}  // namespace

struct HttpClient::Impl {
  ApiUrl url;
  std::optional<std::string> api_key;
  asio::io_context ioc;
  std::optional<beast::tcp_stream> stream;  // empty = not connected
  beast::flat_buffer buffer;
  bool reused = false;  // the open connection already carried an exchange

  // Runs one async operation to completion. The API is synchronous, but
  // Beast's timeouts (and our cancellation) only work for async operations.
  template <class Initiate>
  beast::error_code run(Initiate&& initiate, bool interruptible) {
    beast::error_code result;
    bool done = false;
    initiate([&result, &done](beast::error_code ec, auto&&...) {
      result = ec;
      done = true;
    });
    bool cancelled = false;
    ioc.restart();
    while (!done) {
      ioc.run_one_for(kInterruptPoll);
      if (!done && interruptible && !cancelled && interrupt_requested()) {
        if (stream) stream->cancel();
        cancelled = true;
      }
      if (ioc.stopped()) ioc.restart();
    }
    if (cancelled) {
      close();
      throw Interrupted(interrupt_signal());
    }
    return result;
  }

  void close() {
    if (stream) {
      beast::error_code ignored;
      stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream->close();
      stream.reset();
    }
    buffer.clear();
    reused = false;
  }

  void connect(bool interruptible) {
    close();
    stream.emplace(ioc);
    tcp::resolver resolver(ioc);
    tcp::resolver::results_type endpoints;
    auto ec = run(
        [&](auto done) {
          resolver.async_resolve(
              url.host, url.port,
              [&endpoints, done](beast::error_code e, tcp::resolver::results_type r) mutable {
                endpoints = std::move(r);
                done(e);
              });
        },
        interruptible);
    if (!ec) {
      stream->expires_after(kConnectTimeout);
      ec = run([&](auto done) { stream->async_connect(endpoints, done); }, interruptible);
    }
    if (ec) {
      close();
      throw UnreachableError(url.display);
    }
  }

  ClientError transport_error(const beast::error_code& ec, const RequestOptions& o) const {
    if (ec == beast::error::timeout) {
      auto secs = std::chrono::duration_cast<std::chrono::seconds>(o.timeout).count();
      return ClientError("timeout", "no answer from the kiln daemon at " + url.display +
                                        " within " + std::to_string(secs) + " s");
    }
    return ClientError("connection_lost", "lost the connection to the kiln daemon at " +
                                              url.display + ": " + ec.message());
  }

  Request make_request(Method method, std::string_view target, std::string_view accept,
                       const RequestOptions& o) const {
    Request req{to_verb(method), url.base_path + std::string(target), 11};
    req.set(http::field::host, url.host_header());
    req.set(http::field::user_agent, "kiln-cli/" KILN_VERSION);
    req.set(http::field::accept, std::string(accept));
    if (api_key) req.set(http::field::authorization, "Bearer " + *api_key);
    for (const auto& [name, value] : o.headers) req.set(name, value);
    return req;
  }

  // Sends the request and reads the answer's header. Retries once on a fresh
  // connection when a reused one turns out to have been closed by the server.
  std::unique_ptr<Parser> exchange(Request& req, const RequestOptions& o) {
    req.prepare_payload();
    for (int attempt = 0;; ++attempt) {
      const bool was_reused = stream.has_value() && reused;
      if (!stream) connect(o.interruptible);
      stream->expires_after(o.timeout);  // one deadline for write + whole answer
      auto ec = run([&](auto done) { http::async_write(*stream, req, done); }, o.interruptible);
      auto parser = std::make_unique<Parser>();
      // Sizes are the caller's business (streams are endless). Not boost::none:
      // Boost 1.74 compares Content-Length against an empty optional and fails.
      parser->body_limit(std::numeric_limits<std::uint64_t>::max());
      if (!ec) {
        ec = run([&](auto done) { http::async_read_header(*stream, buffer, *parser, done); },
                 o.interruptible);
      }
      if (!ec) {
        reused = true;
        return parser;
      }
      close();
      if (was_reused && attempt == 0 && o.idempotent && is_stale_connection(ec)) continue;
      throw transport_error(ec, o);
    }
  }

  // Hands the body to `sink` as it arrives (read_some, not read: a stream's
  // lines must show up before the buffer fills).
  void read_body(Parser& p, const RequestOptions& o,
                 const std::function<void(std::string_view)>& sink) {
    std::array<char, 64 * 1024> chunk;
    while (!p.is_done()) {
      p.get().body().data = chunk.data();
      p.get().body().size = chunk.size();
      auto ec =
          run([&](auto done) { http::async_read_some(*stream, buffer, p, done); }, o.interruptible);
      if (ec == http::error::need_buffer) ec = {};
      if (ec) {
        close();
        throw transport_error(ec, o);
      }
      const std::size_t n = chunk.size() - p.get().body().size;
      if (n == 0) continue;
      try {
        sink(std::string_view(chunk.data(), n));
      } catch (...) {
        close();  // the rest of the body is still on the wire
        throw;
      }
    }
    if (!p.keep_alive()) close();
  }

  std::string read_string(Parser& p, const RequestOptions& o) {
    std::string out;
    read_body(p, o, [&out](std::string_view s) { out.append(s); });
    return out;
  }

  void throw_if_error(Parser& p, const RequestOptions& o) {
    if (is_success(p)) return;
    unsigned status = p.get().result_int();
    throw make_api_error(status, read_string(p, o));
  }
};

HttpClient::HttpClient(ApiUrl url, std::optional<std::string> api_key)
    : impl_(std::make_unique<Impl>()) {
  impl_->url = std::move(url);
  impl_->api_key = std::move(api_key);
}

HttpClient::~HttpClient() { impl_->close(); }

const ApiUrl& HttpClient::url() const { return impl_->url; }

json HttpClient::call(Method method, std::string_view target, const json* body,
                      const RequestOptions& options) {
  Request req = impl_->make_request(method, target, "application/json", options);
  if (body != nullptr) {
    req.set(http::field::content_type, "application/json");
    req.body() = dump_request_json(*body);
  }
  auto parser = impl_->exchange(req, options);
  impl_->throw_if_error(*parser, options);
  return parse_answer(impl_->read_string(*parser, options));
}

void HttpClient::stream(Method method, std::string_view target, const json& body,
                        const RequestOptions& options,
                        const std::function<void(const json&)>& on_event) {
  Request req = impl_->make_request(method, target, "application/x-ndjson", options);
  req.set(http::field::content_type, "application/json");
  req.body() = dump_request_json(body);
  auto parser = impl_->exchange(req, options);
  impl_->throw_if_error(*parser, options);

  LineSplitter lines;
  auto handle = [&](const std::string& line) {
    if (line.find_first_not_of(" \t") == std::string::npos) return;  // keep-alive blank lines
    json event = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (event.is_discarded()) {
      throw ClientError("bad_response", "the daemon sent a stream line that is not JSON");
    }
    on_event(event);
  };
  impl_->read_body(*parser, options, [&](std::string_view bytes) {
    for (const auto& line : lines.feed(bytes)) handle(line);
  });
  if (auto tail = lines.finish()) handle(*tail);
}

void HttpClient::download(std::string_view target, const RequestOptions& options,
                          const std::function<void(std::string_view)>& sink) {
  Request req = impl_->make_request(Method::kGet, target, "application/octet-stream", options);
  auto parser = impl_->exchange(req, options);
  impl_->throw_if_error(*parser, options);
  impl_->read_body(*parser, options, sink);
}

json HttpClient::upload(Method method, std::string_view target, std::string bytes,
                        const RequestOptions& options) {
  Request req = impl_->make_request(method, target, "application/json", options);
  req.set(http::field::content_type, "application/octet-stream");
  req.body() = std::move(bytes);
  auto parser = impl_->exchange(req, options);
  impl_->throw_if_error(*parser, options);
  return parse_answer(impl_->read_string(*parser, options));
}

}  // namespace kiln::cli
