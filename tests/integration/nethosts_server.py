"""Test-host HTTP(S) server for the integration tests (see nethosts.py).

Standard library only. Started by nethosts.TestHosts, normally inside its
network namespace (`ip netns exec kilnth-<pid> /usr/bin/python3 THIS ...`),
and once more on the host as the loopback "canary".

    nethosts_server.py --listen ADDR:PORT:http|https [--listen ...]
                       --www DIR --hits FILE --conns FILE
                       [--cert PEM --key PEM] [--parent-pid PID]

Prints one line `READY <json list of [addr, port, scheme]>` on stdout once
every socket is bound (port 0 picks a free port), then serves until killed or
until the parent process goes away.

Every request is appended to --hits as one JSON line
  {"addr", "port", "scheme", "host", "sni", "path", "method", "peer", "t"}
(addr/port: the local address that served it; host: the Host header, or the
TLS SNI when there is none). Every accepted TCP connection (before any TLS
handshake or request) is appended to --conns as {"addr", "port", "scheme",
"peer", "t"}.

Routes (any address, both schemes):
  /whoami                    "<local address> <Host header>\\n" (any method)
  /bytes/<n>                 n bytes, streamed, Content-Length set (n <= 200 MiB)
  /drip[?count=N&interval=S] one line every 0.2 s for 60 s (chunked on HTTP/1.1)
  /simple/, /simple/kilntestpkg/, /packages/<wheel>   PyPI simple index
  /kiln-test-pkg, /kiln-test-pkg/-/kiln-test-pkg-1.0.0.tgz   npm registry
  /repo.git/...              static files of a bare git repo (dumb HTTP)
"""
import argparse
import base64
import hashlib
import html
import json
import os
import posixpath
import signal
import socket
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BYTES = 200 * 1024 * 1024
WHEEL_NAME = "kilntestpkg-1.0-py3-none-any.whl"
NPM_NAME = "kiln-test-pkg"
NPM_VERSION = "1.0.0"
NPM_TARBALL = f"{NPM_NAME}-{NPM_VERSION}.tgz"

_PATTERN = bytes(range(256)) * 1024  # 256 KiB, the /bytes payload repeated


class Log:
    """Appends JSON lines with one O_APPEND write each (safe across threads
    and processes; the reader may truncate the file at any time)."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, record):
        os.write(self.fd, (json.dumps(record, sort_keys=True) + "\n").encode())


class Content:
    def __init__(self, www):
        self.www = os.path.realpath(www)
        wheel = self._read(os.path.join("packages", WHEEL_NAME))
        self.wheel_sha256 = hashlib.sha256(wheel).hexdigest() if wheel is not None else None
        tgz = self._read(os.path.join("npm", NPM_TARBALL))
        if tgz is not None:
            self.npm_integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
            self.npm_shasum = hashlib.sha1(tgz).hexdigest()

    def _read(self, rel):
        try:
            with open(os.path.join(self.www, rel), "rb") as f:
                return f.read()
        except OSError:
            return None

    def file(self, rel):
        """Path of www/rel if it is a regular file inside www, else None."""
        rel = posixpath.normpath("/" + rel).lstrip("/")
        path = os.path.realpath(os.path.join(self.www, rel))
        if not path.startswith(self.www + os.sep) or not os.path.isfile(path):
            return None
        return path


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kiln-testhost/1"
    sys_version = ""
    timeout = 120  # idle keep-alive connections; /drip writes every 0.2 s

    # -- connection set-up -------------------------------------------------
    def setup(self):
        srv = self.server
        self.sni = None
        local = self.request.getsockname()
        srv.conns.write({"addr": local[0], "port": local[1], "scheme": srv.scheme,
                         "peer": "%s:%d" % self.client_address[:2], "t": time.time()})
        if srv.tls is not None:
            self.request.settimeout(30)
            self.request = srv.tls.wrap_socket(self.request, server_side=True)
            self.sni = getattr(self.request, "kiln_sni", None)
        super().setup()

    def log_message(self, fmt, *args):  # quiet; the hit log is the record
        pass

    # -- helpers -------------------------------------------------------------
    def _local(self):
        return self.connection.getsockname()[0]

    def _host_header(self):
        return self.headers.get("Host") or self.sni or ""

    def _hostname(self):
        """The host name the request came in on, without a port."""
        h = self._host_header() or self._local()
        if h.startswith("["):
            return h[: h.find("]") + 1]
        return h.rsplit(":", 1)[0] if ":" in h else h

    def _record(self):
        srv = self.server
        local = self.connection.getsockname()
        srv.hits.write({"addr": local[0], "port": local[1], "scheme": srv.scheme,
                        "host": self._host_header(), "sni": self.sni, "path": self.path,
                        "method": self.command, "peer": "%s:%d" % self.client_address[:2],
                        "t": time.time()})

    def _drain_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        while n > 0:
            chunk = self.rfile.read(min(n, 65536))
            if not chunk:
                break
            n -= len(chunk)

    def _send(self, status, body, ctype="text/plain; charset=utf-8", headers=()):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_file(self, path, ctype):
        size = os.path.getsize(path)
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        if self.command != "HEAD":
            with open(path, "rb") as f:
                while True:
                    chunk = f.read(262144)
                    if not chunk:
                        break
                    self.wfile.write(chunk)

    # -- dispatch ------------------------------------------------------------
    def _handle(self):
        self._record()
        self._drain_body()
        url = urllib.parse.urlsplit(self.path)
        path, query = url.path, urllib.parse.parse_qs(url.query)
        if path == "/whoami":
            return self._send(200, f"{self._local()} {self._host_header()}\n")
        if self.command not in ("GET", "HEAD"):
            return self._send(405, "method not allowed\n", headers=[("Allow", "GET, HEAD")])
        try:
            if path.startswith("/bytes/"):
                return self._bytes(path[len("/bytes/"):])
            if path == "/drip":
                return self._drip(query)
            if path == "/simple" or path == "/simple/":
                return self._simple_root()
            if path.rstrip("/") == "/simple/kilntestpkg":
                return self._simple_pkg(path)
            if path == f"/packages/{WHEEL_NAME}":
                return self._static(f"packages/{WHEEL_NAME}", "application/octet-stream")
            if path == f"/{NPM_NAME}":
                return self._packument()
            if path == f"/{NPM_NAME}/-/{NPM_TARBALL}":
                return self._static(f"npm/{NPM_TARBALL}", "application/octet-stream")
            if path.startswith("/repo.git/"):
                return self._static(path[1:], "text/plain" if "/info/" in path or path.endswith("HEAD")
                                    else "application/octet-stream")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, socket.timeout):
            self.close_connection = True
            return None
        return self._send(404, "not found\n")

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _handle

    # -- routes --------------------------------------------------------------
    def _static(self, rel, ctype):
        path = self.server.content.file(rel)
        if path is None:
            return self._send(404, "not found\n")
        return self._send_file(path, ctype)

    def _bytes(self, arg):
        try:
            n = int(arg)
        except ValueError:
            n = -1
        if not 0 <= n <= MAX_BYTES:
            return self._send(400, f"/bytes/<n> takes 0 <= n <= {MAX_BYTES}\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(n))
        self.end_headers()
        if self.command == "HEAD":
            return None
        view = memoryview(_PATTERN)
        while n > 0:
            k = min(n, len(view))
            self.wfile.write(view[:k])
            n -= k
        return None

    def _drip(self, query):
        count = int(query.get("count", ["300"])[0])
        interval = float(query.get("interval", ["0.2"])[0])
        chunked = self.request_version == "HTTP/1.1"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command == "HEAD":
            return None
        for i in range(count):
            line = f"drip {i}\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line) if chunked else line)
            if i + 1 < count:
                time.sleep(interval)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        return None

    def _simple_root(self):
        body = ("<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\">"
                "<title>Simple index</title></head><body>\n"
                "<a href=\"/simple/kilntestpkg/\">kilntestpkg</a>\n</body></html>\n")
        return self._send(200, body, "text/html; charset=utf-8")

    def _simple_pkg(self, path):
        if not path.endswith("/"):
            return self._send(301, "", headers=[("Location", "/simple/kilntestpkg/")])
        sha = self.server.content.wheel_sha256
        if sha is None:
            return self._send(404, "no wheel\n")
        name = html.escape(WHEEL_NAME)
        body = ("<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\">"
                "<title>Links for kilntestpkg</title></head><body>\n<h1>Links for kilntestpkg</h1>\n"
                f"<a href=\"/packages/{name}#sha256={sha}\">{name}</a><br/>\n</body></html>\n")
        return self._send(200, body, "text/html; charset=utf-8")

    def _packument(self):
        c = self.server.content
        if not hasattr(c, "npm_integrity"):
            return self._send(404, "no tarball\n")
        tarball = f"https://{self._hostname()}/{NPM_NAME}/-/{NPM_TARBALL}"
        version = {
            "name": NPM_NAME, "version": NPM_VERSION, "main": "index.js",
            "description": "kiln test package", "license": "MIT",
            "_id": f"{NPM_NAME}@{NPM_VERSION}",
            "dist": {"tarball": tarball, "integrity": c.npm_integrity, "shasum": c.npm_shasum},
        }
        doc = {
            "_id": NPM_NAME, "name": NPM_NAME, "description": "kiln test package",
            "dist-tags": {"latest": NPM_VERSION},
            "versions": {NPM_VERSION: version},
            "time": {"created": "2024-01-01T00:00:00.000Z", "modified": "2024-01-01T00:00:00.000Z",
                     NPM_VERSION: "2024-01-01T00:00:00.000Z"},
            "license": "MIT",
        }
        return self._send(200, json.dumps(doc, indent=1), "application/json")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, scheme, tls, content, hits, conns):
        self.scheme, self.tls, self.content, self.hits, self.conns = scheme, tls, content, hits, conns
        super().__init__(addr, Handler)

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, ssl.SSLError, socket.timeout, OSError)):
            return  # clients hanging up, failed handshakes: expected in tests
        sys.stderr.write(f"nethosts_server: error serving {client_address}: {exc!r}\n")


def _tls_context(cert, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["http/1.1"])

    def sni(sslsock, name, _ctx):
        sslsock.kiln_sni = name
    ctx.sni_callback = sni
    return ctx


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--listen", action="append", required=True, help="ADDR:PORT:http|https")
    p.add_argument("--www", required=True)
    p.add_argument("--hits", required=True)
    p.add_argument("--conns", required=True)
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--parent-pid", type=int)
    a = p.parse_args(argv)

    content = Content(a.www)
    hits, conns = Log(a.hits), Log(a.conns)
    tls = _tls_context(a.cert, a.key) if a.cert else None
    servers = []
    for spec in a.listen:
        addr, port, scheme = spec.rsplit(":", 2)
        if scheme == "https" and tls is None:
            p.error("https needs --cert and --key")
        servers.append(Server((addr, int(port)), scheme, tls if scheme == "https" else None,
                              content, hits, conns))
    for s in servers:
        threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True).start()

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    bound = [[s.server_address[0], s.server_address[1], s.scheme] for s in servers]
    sys.stdout.write("READY " + json.dumps(bound) + "\n")
    sys.stdout.flush()

    # Exit when the test process that started us goes away (even on SIGKILL).
    parent = a.parent_pid or os.getppid()
    while True:
        time.sleep(0.5)
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            pass
        if os.getppid() == 1 and parent != 1:
            os._exit(0)


if __name__ == "__main__":
    main()
