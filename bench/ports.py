#!/usr/bin/python3
"""Reaching a server inside a sandbox: one JSON line per figure on stdout,
each beside the same work against the same server program run on the host's
loopback (the peer) in the same run.

  port_http_latency      GET of a small answer through /v1/sandboxes/{id}/
                         ports/{port}/ (a new connection each, as kilnd
                         closes after a relayed answer), vs. the host server,
                         and vs. the same GETs made inside the sandbox to its
                         loopback (what the server under gVisor costs alone)
  port_websocket_echo    a 64-byte WebSocket message and its echo, through
                         the port by path (one upgraded connection), vs.
                         the host server
  tunnel_tcp_throughput  64 MiB echoed through one tunnel stream (sent and
                         received at once, under the 1 MiB credit), vs. the
                         same bytes through a TCP echo on the host's loopback

The server is tests/integration/port_server.py, run by the sandbox's python3
and by the host's /usr/bin/python3. Starts its own kilnd and removes
everything.

Usage: /usr/bin/python3 bench/ports.py [--kilnd PATH] [--image-dir DIR] [--n N]
"""
import argparse
import base64
import http.client
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

from common import REPO, KilndSession, emit, free_port, log
from measure import ms, stats

SERVER = os.path.join(REPO, "tests", "integration", "port_server.py")
HTTP_PORT, ECHO_PORT = 8000, 9000
THROUGHPUT_BYTES = 64 << 20
# The same GETs made inside the sandbox to its own loopback: prints the ms.
INSIDE = r'''
import http.client, json, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
out = []
for _ in range(n + 5):
    t = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("GET", "/echo")
    c.getresponse().read()
    c.close()
    out.append((time.perf_counter() - t) * 1000)
print(json.dumps(out[5:]))
'''


class WebSocket:
    """Just enough RFC 6455 for a benchmark client: masked frames out, whole frames in."""

    def __init__(self, port, target, headers=()):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {target} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13", *headers]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("handshake closed")
            self.buf += chunk
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n")[0] + b" ":
            raise RuntimeError(f"no upgrade: {head[:200]!r}")

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, payload, opcode=2):
        n = len(payload)
        head = struct.pack("!B", 0x80 | opcode)
        head += struct.pack("!B", 0x80 | n) if n < 126 else (struct.pack("!BH", 0x80 | 126, n) if n < 65536
                                                            else struct.pack("!BQ", 0x80 | 127, n))
        # A zero mask: masking is required, its value is not (benchmark only).
        self.sock.sendall(head + b"\0\0\0\0" + payload)

    def recv(self):
        first, second = self._read(2)
        n = second & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        return first & 0x0F, self._read(n)

    def close(self):
        self.sock.close()


def http_get(port, target, headers):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", target, headers=headers)
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError(f"GET {target} -> {r.status} {body[:200]!r}")
    return body


def latency(n, port, target, headers):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        http_get(port, target, headers)
        out.append(ms(time.perf_counter() - t0))
    return out


def ws_echo(n, port, target, headers):
    ws = WebSocket(port, target, headers)
    out = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            ws.send(b"x" * 64)
            op, payload = ws.recv()
            out.append(ms(time.perf_counter() - t0))
            if payload != b"x" * 64:
                raise RuntimeError(f"echo answered {op} {payload[:80]!r}")
    finally:
        ws.close()
    return out


def tunnel_throughput(port, sid, key):
    """Seconds to echo THROUGHPUT_BYTES through one tunnel stream."""
    ws = WebSocket(port, f"/v1/sandboxes/{sid}/tunnel", [f"Authorization: Bearer {key}"])
    try:
        op, ready = ws.recv()
        if json.loads(ready) != {"type": "ready"}:
            raise RuntimeError(f"tunnel: {ready!r}")
        ws.send(b"o" + struct.pack("!I", 1) + f"tcp {ECHO_PORT}".encode())
        if ws.recv()[1][:1] != b"o":
            raise RuntimeError("the tunnel stream did not open")
        credit = [0]
        lock = threading.Condition()
        got = [0]
        t0 = time.perf_counter()

        def reader():
            while got[0] < THROUGHPUT_BYTES:
                _, m = ws.recv()
                if m[:1] == b"a":
                    with lock:
                        credit[0] = max(credit[0], struct.unpack("!Q", m[5:])[0])
                        lock.notify_all()
                elif m[:1] == b"d":
                    got[0] += len(m) - 5

        t = threading.Thread(target=reader)
        t.start()
        block, sent = b"y" * 65536, 0
        while sent < THROUGHPUT_BYTES:
            with lock:
                while sent - credit[0] > (1 << 20) - len(block):
                    lock.wait(10)
            ws.send(b"d" + struct.pack("!I", 1) + block)
            sent += len(block)
        t.join(120)
        return time.perf_counter() - t0
    finally:
        ws.close()


def host_echo_throughput(port):
    s = socket.create_connection(("127.0.0.1", port))
    got = [0]

    def reader():
        while got[0] < THROUGHPUT_BYTES:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got[0] += len(chunk)

    t0 = time.perf_counter()
    t = threading.Thread(target=reader)
    t.start()
    block, sent = b"y" * 65536, 0
    while sent < THROUGHPUT_BYTES:
        s.sendall(block)
        sent += len(block)
    t.join(120)
    s.close()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kilnd", default="build/bin/kilnd")
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--n", type=int, default=50)
    args = ap.parse_args()
    host_http, host_echo = free_port(), free_port()
    peer = subprocess.Popen([sys.executable, SERVER, str(host_http), str(host_echo)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        peer.stdout.readline()  # "ready"
        with KilndSession(args.kilnd, args.image_dir, "kiln-bench-ports-") as s:
            kilnd = s.kilnd
            api = kilnd.api()
            port, key = kilnd.port, kilnd.key
            sid = kilnd.create(api, {})
            api.call("POST", f"/v1/sandboxes/{sid}:exec",
                     {"command": "cat > /tmp/port_server.py", "stdin": open(SERVER).read()})
            api.call("POST", f"/v1/sandboxes/{sid}/processes",
                     {"argv": ["python3", "/tmp/port_server.py", str(HTTP_PORT), str(ECHO_PORT)]})
            auth = {"Authorization": f"Bearer {key}"}
            prefix = f"/v1/sandboxes/{sid}/ports/{HTTP_PORT}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    http_get(port, prefix + "/echo", auth)
                    break
                except RuntimeError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            latency(5, port, prefix + "/echo", auth)  # warm-up
            kiln_http = stats(latency(args.n, port, prefix + "/echo", auth), 2)
            host_http_s = stats(latency(args.n, host_http, "/echo", {}), 2)
            # What bounds it: the same GETs from inside the sandbox, to its own loopback
            # (gVisor's netstack and the server under gVisor, no kiln in the path).
            inside = api.call("POST", f"/v1/sandboxes/{sid}:exec",
                              {"argv": ["python3", "-c", INSIDE, str(HTTP_PORT), str(args.n)]})
            inside_s = stats(json.loads(inside["stdout"]), 2)
            log(f"ports: HTTP p50 {kiln_http['p50']} ms (host {host_http_s['p50']} ms, "
                f"inside the sandbox {inside_s['p50']} ms)")
            emit({"bench": "port_http_latency", "unit": "ms", **kiln_http, "kiln": True,
                  "hostP50": host_http_s["p50"], "ratioToHost": round(kiln_http["p50"] / host_http_s["p50"], 2),
                  "sandboxLoopbackP50": inside_s["p50"],
                  "kilnShareP50": round(kiln_http["p50"] - inside_s["p50"], 2),
                  "what": "GET of a small JSON answer through /v1/sandboxes/{id}/ports/8000/ on a new "
                          "connection, beside the same server program on the host's loopback"})
            kiln_ws = stats(ws_echo(args.n * 4, port, prefix + "/ws", [f"Authorization: Bearer {key}"]), 3)
            host_ws = stats(ws_echo(args.n * 4, host_http, "/ws", []), 3)
            log(f"ports: WebSocket echo p50 {kiln_ws['p50']} ms (host {host_ws['p50']} ms)")
            emit({"bench": "port_websocket_echo", "unit": "ms", **kiln_ws, "kiln": True,
                  "hostP50": host_ws["p50"], "ratioToHost": round(kiln_ws["p50"] / host_ws["p50"], 2),
                  "what": "a 64-byte WebSocket message and its echo on one upgraded connection through "
                          "the port by path, beside the same server on the host's loopback"})
            tunnel_s = min(tunnel_throughput(port, sid, key) for _ in range(3))
            host_s = min(host_echo_throughput(host_echo) for _ in range(3))
            mbs, host_mbs = THROUGHPUT_BYTES / tunnel_s / 1e6, THROUGHPUT_BYTES / host_s / 1e6
            log(f"ports: tunnel {mbs:.1f} MB/s each way (host loopback {host_mbs:.1f} MB/s)")
            emit({"bench": "tunnel_tcp_throughput", "unit": "MB/s", "value": round(mbs, 1), "kiln": True,
                  "hostValue": round(host_mbs, 1), "ratioToHost": round(mbs / host_mbs, 3),
                  "bytes": THROUGHPUT_BYTES, "runs": 3, "aggregate": "best of 3",
                  "what": "64 MiB echoed through one tunnel stream to a TCP echo server in the sandbox "
                          "(sent and received at once, each way), beside the same echo on the host's loopback"})
            kilnd.stop_sandbox(api, sid)
    finally:
        peer.kill()
        peer.wait()


if __name__ == "__main__":
    main()
