"""What the reach-in attacker suites share (issue 42; test_attack_reach_in_sockets.py and
test_attack_reach_in_queues.py): the Gauge that samples kilnd's RSS and threads during an
attack, asserts its bounds and records its figures; raw socket clients (HTTP heads, WebSocket
handshakes and framing, a Peer that parses what arrives); the flood and drain helpers; the
server the attacker runs in its sandbox (REACH_SERVER); and the `reach` fixture, a kilnd with
short WebSocket, write and relay timeouts and the attacker's sandbox running that server.

Every attack runs against a real kilnd and real gVisor sandboxes; the clients are raw sockets
on loopback (those that read nothing or read slowly also offer a 4 KiB window and a 536-byte
segment size, so that kilnd's kernel does not size a ~2.5 MiB send buffer for them and what
kilnd holds is its own). A Gauge measures kilnd's RSS (VmRSS) and thread count
(/proc/PID/status) before, during (sampled every 50 ms) and after, asserts a bound during (at
most 64 MiB of growth) and a return to the baseline after (polled with a deadline), and
records the figures as one JSON line in KILN_ATTACK_FIGURES (attacks.py's file; the summary
prints them). Floods are bounded by time and bytes, and stop early once kilnd has grown four
times past the bound (that run fails anyway; a kilnd that grows without bound must not take
the machine with it).

Nothing sleeps to assert: waits poll with deadlines. The waits that are the attack itself
(a client that reads nothing for longer than kilnd's timeout) are bounded by those timeouts.
"""
import base64
import json
import os
import socket
import struct
import threading
import time
import urllib.parse

import pytest

from client import Client
from conftest import start_kilnd, stop_kilnd
from lib.waits import wait_for

MiB = 1 << 20
GROWTH_BOUND_MIB = 64       # kilnd's RSS may grow this much during an attack
# ...and be back within this of its baseline after. A sanitized kilnd keeps up to 16 MiB of
# freed memory in ASan's quarantine (conftest.py), and ASan's allocator keeps what a first burst
# of 40 request threads took: SandboxFusion's flood, run four times in one kilnd, stayed 19-24 MiB
# over the first baseline each time (no growth per round: kept, not leaked).
AFTER_MARGIN_MIB = 32
THREADS_MARGIN = 2          # threads back within this of the baseline after
SETTLE_S = 30               # how long "after" may take
GUARD_MIB = 4 * GROWTH_BOUND_MIB  # a flood stops once kilnd grew this much (the test fails)

# The `reach` kilnd (the WebSocket, stream and port attacks).
WS_IDLE_S = 4        # --websocket-idle-seconds
REQUEST_TIMEOUT_S = 5  # --request-timeout-seconds: a write must progress within it
RELAY_IDLE_S = 6     # --relay-idle-seconds
PORT_CAP = 8         # --max-port-connections
SERVER_PORT = 8100   # REACH_SERVER's port in the sandbox
# A write to a client that takes no byte for the request timeout cuts the connection (kilnd
# --help): a progress deadline, not a rate, so however long a write is, a reader who takes
# bytes steadily is never cut, and one who stops is cut this long after its last byte.
WRITE_DEADLINE_S = REQUEST_TIMEOUT_S
SMALL_MSS = 536  # the segment size a flooding client offers (raw_socket)


# ---- what every attack measures ------------------------------------------------------------


def rss_and_threads(pid):
    """kilnd's VmRSS (KiB) and thread count, from one read of /proc/PID/status."""
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return int(fields.get("VmRSS", "0").split()[0]), int(fields.get("Threads", "0"))


class Gauge:
    """kilnd's VmRSS and Threads, sampled every 50 ms from start() to stop(); then settle()
    polls them back to the baseline and record() appends the figures (one JSON line)."""

    def __init__(self, daemon, name):
        self.daemon, self.name, self.pid = daemon, name, daemon.proc.pid
        self.rss_base, self.threads_base = rss_and_threads(self.pid)
        self.rss_peak, self.threads_peak = self.rss_base, self.threads_base
        self.rss_after = self.threads_after = None
        self._stop = threading.Event()
        self._th = None

    def sample(self):
        rss, threads = rss_and_threads(self.pid)
        self.rss_peak, self.threads_peak = max(self.rss_peak, rss), max(self.threads_peak, threads)
        return rss, threads

    def start(self):
        def run():
            while not self._stop.is_set():
                try:
                    self.sample()
                except OSError:  # kilnd died: the test says so
                    return
                self._stop.wait(0.05)
        self._th = threading.Thread(target=run, daemon=True)
        self._th.start()
        return self

    def stop(self):
        self._stop.set()
        if self._th:
            self._th.join(5)
        self.sample()

    def grown_mib(self):
        return (self.rss_peak - self.rss_base) / 1024

    def over_guard(self):
        return self.grown_mib() > GUARD_MIB

    def settle(self, within=SETTLE_S, margin_mib=AFTER_MARGIN_MIB):
        """Polls until RSS and threads are back near the baseline (or the deadline); True if so."""
        deadline = time.monotonic() + within
        while True:
            rss, threads = self.rss_after, self.threads_after = rss_and_threads(self.pid)
            if (rss - self.rss_base) / 1024 <= margin_mib and threads <= self.threads_base + THREADS_MARGIN:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)

    def record(self, **extra):
        """The figures (with `extra`), printed and appended to KILN_ATTACK_FIGURES (conftest.py's
        summary shows them)."""
        f = {"attack": self.name, "rssBaseMiB": round(self.rss_base / 1024, 1),
             "rssPeakMiB": round(self.rss_peak / 1024, 1), "rssGrowthMiB": round(self.grown_mib(), 1),
             "rssAfterMiB": None if self.rss_after is None else round(self.rss_after / 1024, 1),
             "threadsBase": self.threads_base, "threadsPeak": self.threads_peak,
             "threadsAfter": self.threads_after, **extra}
        print("REACH-IN " + json.dumps(f))
        if os.environ.get("KILN_ATTACK_FIGURES"):
            with open(os.environ["KILN_ATTACK_FIGURES"], "a") as out:
                out.write(json.dumps(f) + "\n")
        return f

    def check(self, after_margin_mib=AFTER_MARGIN_MIB, **extra):
        """Settles, records, and asserts both bounds (during and after)."""
        settled = self.settle(margin_mib=after_margin_mib)
        f = self.record(**extra)
        assert self.daemon.alive(), f"kilnd died:\n{self.daemon.log_tail()}"
        assert self.grown_mib() <= GROWTH_BOUND_MIB, \
            f"{self.name}: kilnd's RSS grew {self.grown_mib():.0f} MiB (bound {GROWTH_BOUND_MIB}): {f}"
        assert settled, f"{self.name}: kilnd did not come back to its baseline within {SETTLE_S} s: {f}"
        return f


# ---- raw clients -----------------------------------------------------------------------------


def _addr(daemon):
    u = urllib.parse.urlsplit(daemon.url)
    return u.hostname, u.port


def raw_socket(daemon, rcvbuf=None, timeout=30, mss=None):
    """A connection to kilnd. `rcvbuf`: the window the client offers; `mss`: the segment size
    it offers (a small one keeps kilnd's kernel from sizing its send buffer for 64 KiB
    loopback segments, ~2.5 MiB, so what kilnd holds is what kilnd queues itself)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:  # before connect
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    if mss:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, mss)
    s.settimeout(timeout)
    s.connect(_addr(daemon))
    return s


def read_head(s, limit=65536):
    """The answer's head (status, head text) and any bytes read past it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
        assert len(data) < limit, data[:300]
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else 0
    return status, head.decode("latin-1"), rest


def request_bytes(daemon, method, target, key, headers=(), body=b""):
    lines = [f"{method} {target} HTTP/1.1", "Host: %s:%d" % _addr(daemon)]
    if key:
        lines.append(f"Authorization: Bearer {key}")
    lines += list(headers)
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def ws_open(daemon, target, key, rcvbuf=None, mss=None):
    """A WebSocket handshake on a raw socket; (socket, status, head, bytes past the head)."""
    s = raw_socket(daemon, rcvbuf, mss=mss)
    nonce = base64.b64encode(os.urandom(16)).decode()
    s.sendall(request_bytes(daemon, "GET", target, key, headers=[
        "Upgrade: websocket", "Connection: Upgrade", f"Sec-WebSocket-Key: {nonce}",
        "Sec-WebSocket-Version: 13"]))
    status, head, rest = read_head(s)
    return s, status, head, rest


def masked(opcode, payload, mask=b"\0\0\0\0"):
    """A client's frame: FIN, `opcode`, `payload` masked with `mask`."""
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


class Peer:
    """A WebSocket client that parses what arrives without losing a partial frame, and
    answers pings only when told to (`pong=True`)."""

    def __init__(self, sock, rest=b"", pong=False):
        self.sock, self.buf, self.pong, self.closed = sock, rest, pong, False
        self.messages, self.pings = [], 0

    def _frames(self):
        while True:
            if len(self.buf) < 2:
                return
            n, at = self.buf[1] & 0x7F, 2
            if n >= 126:  # a 16-bit or a 64-bit length follows
                at = 4 if n == 126 else 10
                if len(self.buf) < at:
                    return
                n = int.from_bytes(self.buf[2:at], "big")
            if len(self.buf) < at + n:
                return
            opcode = self.buf[0] & 0x0F
            payload, self.buf = self.buf[at:at + n], self.buf[at + n:]
            if opcode == 9:
                self.pings += 1
                if self.pong:
                    self.sock.sendall(masked(10, payload, os.urandom(4)))
            elif opcode == 8:
                self.messages.append(("close", payload))
            elif opcode in (1, 2):
                self.messages.append(("text" if opcode == 1 else "binary", payload))

    def pump(self, seconds):
        """Reads for up to `seconds`; False once the connection ended (EOF or reset)."""
        deadline = time.monotonic() + seconds
        while not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            self.sock.settimeout(min(left, 0.5))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True
                break
            self.buf += chunk
            self._frames()
        return False

    def ask(self, frame, want, seconds=10):
        """Sends `frame` and reads until a message for which want(kind, payload) holds."""
        seen = len(self.messages)
        self.sock.sendall(frame)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if any(want(k, p) for k, p in self.messages[seen:]):
                return True
            if not self.pump(0.2):
                return False
        return any(want(k, p) for k, p in self.messages[seen:])


def flood(sock, unit, gauge, seconds=15.0, max_bytes=128 * MiB):
    """Sends `unit` (whole frames) over and over, never reading, until kilnd cuts the socket,
    `seconds` pass, `max_bytes` went out, or kilnd grew past the guard. Returns
    (cut error or None, bytes sent, seconds)."""
    batch = unit * max(1, 65536 // len(unit))
    sock.settimeout(0.5)
    t0 = time.monotonic()
    sent, pending = 0, memoryview(batch)
    while time.monotonic() - t0 < seconds and sent < max_bytes and not gauge.over_guard():
        try:
            n = sock.send(pending)
        except socket.timeout:
            continue  # kilnd reads nothing for now: go on until it cuts or time is up
        except OSError as e:  # BrokenPipe, ConnectionReset: cut
            return e, sent, time.monotonic() - t0
        sent += n
        pending = pending[n:] if n < len(pending) else memoryview(batch)
    return None, sent, time.monotonic() - t0


def kilnd_closed(daemon, sock):
    """Whether kilnd has closed (or shut down) its side of the client's connection `sock`:
    its socket in /proc/net/tcp is past ESTABLISHED, or gone. The client need not read to see
    it (a FIN waits behind the bytes the kernel still holds for a client that reads nothing)."""
    ours, theirs = sock.getsockname()[1], _addr(daemon)[1]
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if int(local.split(":")[1], 16) == theirs and int(remote.split(":")[1], 16) == ours:
                return state != "01"  # TCP_ESTABLISHED
    return True


def drain(sock, cap=64 * MiB, seconds=20):
    """Reads everything as fast as possible; (bytes, ended) where ended says kilnd closed
    the connection before `cap` bytes or `seconds` passed."""
    got, deadline = 0, time.monotonic() + seconds
    sock.settimeout(2)
    while got < cap and time.monotonic() < deadline:
        try:
            chunk = sock.recv(1 << 20)
        except socket.timeout:
            continue
        except OSError:
            return got, True  # reset: cut
        if not chunk:
            return got, True
        got += len(chunk)
    return got, False


# ---- the sandbox's server --------------------------------------------------------------------

# Runs in the sandbox (python3 of the base image): on argv[1], GET /hang reads the request and
# never answers (until the connection ends); GET /flood (a WebSocket upgrade) answers 101 and
# sends 64 KiB binary frames as fast as it may, up to 1 GiB; anything else answers the
# counters as JSON. The counters are also kept in /tmp/reach-stats.json, read through the
# files API (which takes no port slot).
REACH_SERVER = r'''
import base64, hashlib, json, os, socket, socketserver, struct, sys, threading
stats = {"hanging": 0, "hangs": 0, "flooding": 0, "floods": 0, "floodBytes": 0}
lock = threading.Lock()
def note(**delta):
    with lock:
        for k, v in delta.items():
            stats[k] += v
        with open("/tmp/reach-stats.json.tmp", "w") as f:
            json.dump(stats, f)
        os.replace("/tmp/reach-stats.json.tmp", "/tmp/reach-stats.json")
class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        head = b""
        while b"\r\n\r\n" not in head:
            c = s.recv(4096)
            if not c:
                return
            head += c
        lines = head.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
        if path.startswith("/hang"):
            note(hanging=1, hangs=1)
            try:
                while s.recv(65536):
                    pass
            except OSError:
                pass
            finally:
                note(hanging=-1)
        elif path.startswith("/flood"):
            accept = base64.b64encode(hashlib.sha1((headers["sec-websocket-key"] +
                                      "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            s.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       "Sec-WebSocket-Accept: " + accept + "\r\n\r\n").encode())
            frame = b"\x82\x7f" + struct.pack("!Q", 65536) + b"f" * 65536
            note(flooding=1, floods=1)
            sent = 0
            try:
                while sent < (1 << 30):
                    s.sendall(frame)
                    sent += len(frame)
            except OSError:
                pass
            finally:
                note(flooding=-1, floodBytes=sent)
        else:
            with lock:
                body = json.dumps(stats).encode()
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                      b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256
note()
Server(("0.0.0.0", int(sys.argv[1])), Handler).serve_forever()
'''


class Reach:
    """The attacked kilnd, its admin client, the attacker's client and key, and the
    attacker's sandbox running REACH_SERVER."""

    def __init__(self, d, admin, tenant, key, sid):
        self.d, self.admin, self.api, self.key, self.sid = d, admin, tenant, key, sid

    def stats(self):
        return json.loads(self.api.read_file(self.sid, "/tmp/reach-stats.json").body)

    def port_path(self, rest=""):
        return f"/v1/sandboxes/{self.sid}/ports/{SERVER_PORT}/{rest}"


def until(what, check, within, every=0.2):
    """check()'s first true value, polled every `every` s; fails after `within` s."""
    return wait_for(check, within, what, every)


@pytest.fixture(scope="module")
def reach(tmp_path_factory):
    """A kilnd with short WebSocket, write and relay timeouts and a small cap of port
    connections; the attacker's key and sandbox, with REACH_SERVER on SERVER_PORT."""
    d = start_kilnd(tmp_path_factory.mktemp("reach") / "state",
                    "--websocket-idle-seconds", str(WS_IDLE_S),
                    "--request-timeout-seconds", str(REQUEST_TIMEOUT_S),
                    "--relay-idle-seconds", str(RELAY_IDLE_S),
                    "--max-port-connections", str(PORT_CAP))
    try:
        admin = Client(d.url, key=d.admin_key)
        key = admin.ok("POST", "/v1/keys", json={"name": "reach-in-attacker"})["secret"]
        tenant = Client(d.url, key=key)
        sid = tenant.create(vcpu=1, memoryMiB=1024)["id"]
        tenant.write_file(sid, "/tmp/reach_server.py", REACH_SERVER)
        tenant.spawn(sid, argv=["python3", "/tmp/reach_server.py", str(SERVER_PORT)])
        r = Reach(d, admin, tenant, key, sid)
        until("the sandbox's server answers", lambda: tenant.get(r.port_path("stats")).status == 200, 30)
        yield r
    finally:
        stop_kilnd(d)

