// The HTTP server's insides, shared by its two halves: http_server.cc
// (the listener, the accept loop, drain and stop) and http_connection.cc
// (one client connection: its request read under deadlines, then handed to
// a thread of its own). Private to src/api.
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "api/http_server.h"
#include "common/log.h"

namespace kiln::api {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

struct HttpServer::Impl {
  class Conn;

  std::string listen;
  Handler handler;
  ServerLimits limits;
  std::mutex mu;  // guards the acceptor's closing, conns and draining
  std::condition_variable idle;
  // Every open connection by descriptor, so Drain can end the idle ones.
  std::map<int, std::weak_ptr<Conn>> conns;
  bool draining = false;
  std::atomic<bool> stopped{false};
  std::atomic<int> connections{0};
  std::map<std::string, int> per_address;  // open connections by peer address (guarded by mu)
  std::atomic<int> active{0};              // requests running on their threads
  // Declared after what Conns touch: a Conn still queued in the I/O
  // context when it is destroyed untracks itself.
  net::io_context ioc;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::thread io_thread;

  ~Impl() {
    work.reset();
    ioc.stop();
    if (io_thread.joinable()) io_thread.join();
  }

  void StartIoThread() {
    if (io_thread.joinable()) return;
    work.emplace(ioc.get_executor());
    io_thread = std::thread([this] {
      for (;;) {
        try {
          ioc.run();
          return;
        } catch (const std::exception& e) {
          LogError("HTTP I/O thread failed", {{"error", e.what()}});
        }
      }
    });
  }

  // A connection already counted (connections, per_address) by Run.
  void Start(tcp::socket sock, std::string peer);

  // A request's thread is done with it (and with its Conn).
  void Finished() {
    std::lock_guard lock(mu);
    --active;
    idle.notify_all();
  }
};

// One client connection. Between requests it belongs to the I/O thread,
// which waits for the next request, reads its headers and the start of
// its body under a deadline; then to a thread of its own that runs the
// handler and hands it back (keep-alive) or closes it. Never both at once.
class HttpServer::Impl::Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(Impl& impl, tcp::socket sock, std::string peer)
      : impl_(impl),
        sock_(std::move(sock)),
        timer_(impl.ioc),
        fd_(sock_.native_handle()),
        peer_(std::move(peer)) {}
  ~Conn() { Close(); }

  int fd() const { return fd_; }

  // I/O thread: waits for the next request (the first one on a new
  // connection within the request timeout, later ones within the idle
  // timeout), then reads it.
  void WaitRequest(bool first);

 private:
  static constexpr size_t kEarlyBody = 64 * 1024;

  // Starts a deadline `seconds` away for the phase now starting. When it
  // passes, the phase's pending read is cancelled and the connection ends
  // (with a 408 if `answer`: a request was under way).
  void Arm(int seconds, bool answer);

  void Disarm();

  void ReadHeader();

  void HeaderFailed(boost::system::error_code ec);

  // Reads the body's first kEarlyBody bytes (all of a JSON body) under the
  // same deadline as the headers, so a client that dribbles its body does
  // not hold a thread either.
  void ReadEarlyBody();

  // Hands the connection to a thread of its own for the handler.
  void Dispatch();

  // The request's own thread.
  void Serve();

  // Writes a fixed answer (the I/O thread), then closes. The write and
  // what follows get 5 s in all: a client that reads nothing may not hold
  // the connection open through it.
  void Refuse(std::shared_ptr<std::string> answer);

  void Linger();

  // Ends the connection (idempotent): FIN to the client, the descriptor
  // closed, and it no longer counts.
  void Close();

  Impl& impl_;
  tcp::socket sock_;
  net::steady_timer timer_;
  const int fd_;
  std::string peer_;
  boost::beast::flat_buffer buf_;
  std::optional<http::request_parser<http::buffer_body>> parser_;
  std::string early_body_;
  char chunk_[16 * 1024];
  uint64_t gen_ = 0;  // the I/O thread's: which phase a handler belongs to
  std::atomic<bool> closed_{false};
};

}  // namespace kiln::api
