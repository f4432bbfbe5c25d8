#include "cli/http_client.h"

#include <array>
#include <cstdint>
#include <limits>
#include <type_traits>
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

http::verb ToVerb(Method m) {
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
bool IsStaleConnection(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

bool IsSuccess(const Parser& p) {
  unsigned s = p.get().result_int();
  return s >= 200 && s < 300;
}

std::string DumpRequestJson(const json& body) {
  try {
    return body.dump();
  } catch (const json::type_error&) {
    throw UsageError("an argument is not valid UTF-8 text");
  }
}

json ParseAnswer(const std::string& body) {
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
  beast::error_code Run(Initiate&& initiate, bool interruptible) {
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
      if (!done && interruptible && !cancelled && InterruptRequested()) {
        if (stream) stream->cancel();
        cancelled = true;
      }
      if (ioc.stopped()) ioc.restart();
    }
    if (cancelled) {
      Close();
      throw Interrupted(InterruptSignal());
    }
    return result;
  }

  void Close() {
    if (stream) {
      beast::error_code ignored;
      stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream->close();
      stream.reset();
    }
    buffer.clear();
    reused = false;
  }

  void Connect(bool interruptible) {
    Close();
    stream.emplace(ioc);
    tcp::resolver resolver(ioc);
    tcp::resolver::results_type endpoints;
    auto ec = Run(
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
      ec = Run([&](auto done) { stream->async_connect(endpoints, done); }, interruptible);
    }
    if (ec) {
      Close();
      throw UnreachableError(url.display);
    }
  }

  ClientError TransportError(const beast::error_code& ec, const RequestOptions& o) const {
    if (ec == beast::error::timeout) {
      auto secs = std::chrono::duration_cast<std::chrono::seconds>(o.timeout).count();
      return ClientError("timeout", "no answer from the kiln daemon at " + url.display +
                                        " within " + std::to_string(secs) + " s");
    }
    return ClientError("connection_lost", "lost the connection to the kiln daemon at " +
                                              url.display + ": " + ec.message());
  }

  template <class Body = http::string_body>
  http::request<Body> MakeRequest(Method method, std::string_view target, std::string_view accept,
                                  const RequestOptions& o) const {
    http::request<Body> req{ToVerb(method), url.base_path + std::string(target), 11};
    req.set(http::field::host, url.HostHeader());
    req.set(http::field::user_agent, "kiln-cli/" KILN_VERSION);
    req.set(http::field::accept, std::string(accept));
    if (api_key) req.set(http::field::authorization, "Bearer " + *api_key);
    for (const auto& [name, value] : o.headers) req.set(name, value);
    return req;
  }

  // Sends the request and reads the answer's header. Retries once on a fresh
  // connection when a reused one turns out to have been closed by the server.
  template <class Body>
  std::unique_ptr<Parser> Exchange(http::request<Body>& req, const RequestOptions& o) {
    req.prepare_payload();
    for (int attempt = 0;; ++attempt) {
      if constexpr (std::is_same_v<Body, http::file_body>) {  // a resend starts the file again
        beast::error_code seek;
        req.body().file().seek(0, seek);
        if (seek) throw ClientError("local_error", "cannot read the upload: " + seek.message());
      }
      const bool was_reused = stream.has_value() && reused;
      if (!stream) Connect(o.interruptible);
      stream->expires_after(o.timeout);  // one deadline for write + whole answer
      auto ec = Run([&](auto done) { http::async_write(*stream, req, done); }, o.interruptible);
      auto parser = std::make_unique<Parser>();
      // Sizes are the caller's business (streams are endless). Not boost::none:
      // Boost 1.74 compares Content-Length against an empty optional and fails.
      parser->body_limit(std::numeric_limits<std::uint64_t>::max());
      if (!ec) {
        ec = Run([&](auto done) { http::async_read_header(*stream, buffer, *parser, done); },
                 o.interruptible);
      }
      if (!ec) {
        reused = true;
        return parser;
      }
      Close();
      if (was_reused && attempt == 0 && o.idempotent && IsStaleConnection(ec)) continue;
      throw TransportError(ec, o);
    }
  }

  // Hands the body to `sink` as it arrives (read_some, not read: a stream's
  // lines must show up before the buffer fills).
  void ReadBody(Parser& p, const RequestOptions& o,
                const std::function<void(std::string_view)>& sink) {
    std::array<char, 64 * 1024> chunk;
    while (!p.is_done()) {
      p.get().body().data = chunk.data();
      p.get().body().size = chunk.size();
      auto ec =
          Run([&](auto done) { http::async_read_some(*stream, buffer, p, done); }, o.interruptible);
      if (ec == http::error::need_buffer) ec = {};
      if (ec) {
        Close();
        throw TransportError(ec, o);
      }
      const std::size_t n = chunk.size() - p.get().body().size;
      if (n == 0) continue;
      try {
        sink(std::string_view(chunk.data(), n));
      } catch (...) {
        Close();  // the rest of the body is still on the wire
        throw;
      }
    }
    if (!p.keep_alive()) Close();
  }

  std::string ReadString(Parser& p, const RequestOptions& o) {
    std::string out;
    ReadBody(p, o, [&out](std::string_view s) { out.append(s); });
    return out;
  }

  void ThrowIfError(Parser& p, const RequestOptions& o) {
    if (IsSuccess(p)) return;
    unsigned status = p.get().result_int();
    throw MakeApiError(status, ReadString(p, o));
  }
};

HttpClient::HttpClient(ApiUrl url, std::optional<std::string> api_key)
    : impl_(std::make_unique<Impl>()) {
  impl_->url = std::move(url);
  impl_->api_key = std::move(api_key);
}

HttpClient::~HttpClient() { impl_->Close(); }

const ApiUrl& HttpClient::url() const { return impl_->url; }

json HttpClient::Call(Method method, std::string_view target, const json* body,
                      const RequestOptions& options) {
  Request req = impl_->MakeRequest(method, target, "application/json", options);
  if (body != nullptr) {
    req.set(http::field::content_type, "application/json");
    req.body() = DumpRequestJson(*body);
  }
  auto parser = impl_->Exchange(req, options);
  impl_->ThrowIfError(*parser, options);
  return ParseAnswer(impl_->ReadString(*parser, options));
}

void HttpClient::Stream(Method method, std::string_view target, const json& body,
                        const RequestOptions& options,
                        const std::function<void(const json&)>& on_event) {
  Request req = impl_->MakeRequest(method, target, "application/x-ndjson", options);
  req.set(http::field::content_type, "application/json");
  req.body() = DumpRequestJson(body);
  auto parser = impl_->Exchange(req, options);
  impl_->ThrowIfError(*parser, options);

  LineSplitter lines;
  auto handle = [&](const std::string& line) {
    if (line.find_first_not_of(" \t") == std::string::npos) return;  // keep-alive blank lines
    json event = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (event.is_discarded()) {
      throw ClientError("bad_response", "the daemon sent a stream line that is not JSON");
    }
    on_event(event);
  };
  impl_->ReadBody(*parser, options, [&](std::string_view bytes) {
    for (const auto& line : lines.Feed(bytes)) handle(line);
  });
  if (auto tail = lines.Finish()) handle(*tail);
}

void HttpClient::Download(std::string_view target, const RequestOptions& options,
                          const std::function<void(std::string_view)>& sink) {
  Request req = impl_->MakeRequest(Method::kGet, target, "application/octet-stream", options);
  auto parser = impl_->Exchange(req, options);
  impl_->ThrowIfError(*parser, options);
  impl_->ReadBody(*parser, options, sink);
}

json HttpClient::UploadFile(Method method, std::string_view target, const std::string& path,
                            const RequestOptions& options) {
  auto req = impl_->MakeRequest<http::file_body>(method, target, "application/json", options);
  beast::error_code ec;
  req.body().open(path.c_str(), beast::file_mode::scan, ec);
  if (ec) throw ClientError("local_error", "cannot read " + path + ": " + ec.message());
  bool typed = false;
  for (const auto& h : options.headers)
    typed = typed || boost::beast::iequals(h.first, "Content-Type");
  if (!typed) req.set(http::field::content_type, "application/octet-stream");
  auto parser = impl_->Exchange(req, options);
  impl_->ThrowIfError(*parser, options);
  return ParseAnswer(impl_->ReadString(*parser, options));
}

json HttpClient::Upload(Method method, std::string_view target, std::string bytes,
                        const RequestOptions& options) {
  Request req = impl_->MakeRequest(method, target, "application/json", options);
  // A caller's Content-Type (e.g. application/gzip) wins over the default.
  bool typed = false;
  for (const auto& h : options.headers)
    typed = typed || boost::beast::iequals(h.first, "Content-Type");
  if (!typed) req.set(http::field::content_type, "application/octet-stream");
  req.body() = std::move(bytes);
  auto parser = impl_->Exchange(req, options);
  impl_->ThrowIfError(*parser, options);
  return ParseAnswer(impl_->ReadString(*parser, options));
}

}  // namespace kiln::cli
