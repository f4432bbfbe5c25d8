"""`sandbox.forward_port`: a local TCP listener whose connections ride kilnd's tunnel
WebSocket (`GET /v1/sandboxes/{id}/tunnel`, docs/api.md "Ports, previews and the tunnel").

Frames both ways are a kind byte, a 32-bit big-endian stream number and a payload. This
side keeps at most WINDOW bytes of its data past the count the last `a` frame
acknowledged (more would end the tunnel). Threads: one reads the WebSocket, one accepts,
and per connection one reads the local socket and one writes to it."""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Deque, Dict, Optional, Tuple

from . import errors
from ._ws import WebSocket

if TYPE_CHECKING:
    from .sandbox import Sandbox

OPEN, DATA, END, CLOSE, ACK = b"o", b"d", b"e", b"c", b"a"
KINDS = frozenset((OPEN, DATA, END, CLOSE, ACK))
WINDOW = 1 << 20  # client bytes allowed past the last acknowledged count
CHUNK = 64 << 10
INBOX_CAP = 8 << 20  # bytes waiting for one slow local socket before the reader waits too


def encode_frame(kind: bytes, stream: int, payload: bytes = b"") -> bytes:
    if kind not in KINDS or not 0 <= stream <= 0xFFFFFFFF:
        raise ValueError(f"bad tunnel frame: kind {kind!r}, stream {stream}")
    return kind + struct.pack("!I", stream) + payload


def decode_frame(message: bytes) -> Tuple[bytes, int, bytes]:
    """(kind, stream, payload) of a binary message; ValueError when it is shorter than 5 bytes."""
    if len(message) < 5:
        raise ValueError(f"a tunnel frame of {len(message)} bytes (5 at least)")
    return bytes(message[:1]), struct.unpack("!I", message[1:5])[0], bytes(message[5:])


def decode_ack(payload: bytes) -> int:
    if len(payload) != 8:
        raise ValueError(f"an `a` frame of {len(payload)} payload bytes (8 expected)")
    return struct.unpack("!Q", payload)[0]


class CreditWindow:
    """Counts data bytes sent against the server's acknowledged count; `acquire` waits
    until `n` more bytes fit within WINDOW (or the tunnel ended: False)."""

    def __init__(self, window: int = WINDOW) -> None:
        self.window = window
        self.sent = 0
        self.acked = 0
        self.over = False
        self._cond = threading.Condition()

    def fits(self, n: int) -> bool:
        return self.sent + n - self.acked <= self.window

    def acquire(self, n: int, timeout: Optional[float] = None) -> bool:
        with self._cond:
            if not self._cond.wait_for(lambda: self.over or self.fits(n), timeout):
                return False
            if self.over:
                return False
            self.sent += n
            return True

    def ack(self, count: int) -> None:
        with self._cond:
            if count > self.sent:
                raise ValueError(f"acknowledged {count} bytes but only {self.sent} were sent")
            self.acked = max(self.acked, count)
            self._cond.notify_all()

    def end(self) -> None:
        with self._cond:
            self.over = True
            self._cond.notify_all()


class _Inbox:
    """Bytes from the tunnel for one local socket, capped (the reader waits when full).
    Items: bytes, b"" for the sandbox side's end, None for close."""

    def __init__(self) -> None:
        self._items: Deque[Optional[bytes]] = deque()
        self._bytes = 0
        self._cond = threading.Condition()
        self.dead = False

    def put(self, item: Optional[bytes]) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self.dead or self._bytes < INBOX_CAP)
            if self.dead:
                return
            self._items.append(item)
            self._bytes += len(item or b"")
            self._cond.notify_all()

    def get(self) -> Optional[bytes]:
        with self._cond:
            self._cond.wait_for(lambda: bool(self._items) or self.dead)
            if not self._items:
                return None
            item = self._items.popleft()
            self._bytes -= len(item or b"")
            self._cond.notify_all()
            return item

    def kill(self) -> None:
        with self._cond:
            self.dead = True
            self._items.clear()
            self._cond.notify_all()


class _Stream:
    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.opened = threading.Event()
        self.refusal: Optional[str] = None
        self.inbox = _Inbox()


class PortForward:
    """A local port forwarded to `port` in the sandbox until `close()` (or `with` ends).
    `local_port` is the port listened on (`host`, default 127.0.0.1). Sync only: the async
    client has no forward_port (run this one beside it)."""

    def __init__(self, sandbox: "Sandbox", port: int, local_port: Optional[int] = None,
                 host: str = "127.0.0.1") -> None:
        if not isinstance(port, int) or not 1 <= port <= 65535:
            raise ValueError(f"port must be 1-65535, not {port!r}")
        self.port = port
        self.host = host
        self._ws = WebSocket.connect(sandbox._t, f"{sandbox._path}/tunnel?port={port}")
        ready = self._ws.recv()
        try:
            ok = isinstance(ready, str) and json.loads(ready).get("type") == "ready"
        except ValueError:
            ok = False
        if not ok:
            self._ws.close()
            raise errors.KilnError(f"the tunnel did not start: {ready!r}", code="tunnel_failed")
        self._window = CreditWindow()
        self._lock = threading.Lock()
        self._streams: Dict[int, _Stream] = {}
        self._next = 1
        self._closed = False
        self.error: Optional[str] = None
        try:
            self._listener = socket.create_server((host, port if local_port is None else local_port))
        except OSError:
            self._ws.close()
            raise
        self.local_port: int = self._listener.getsockname()[1]
        self._threads = [threading.Thread(target=self._read, name="kiln-tunnel-read", daemon=True),
                         threading.Thread(target=self._accept, name="kiln-tunnel-accept", daemon=True)]
        for t in self._threads:
            t.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.local_port}/"

    def _send(self, kind: bytes, stream: int, payload: bytes = b"") -> bool:
        try:
            self._ws.send(encode_frame(kind, stream, payload))
            return True
        except OSError:
            return False

    def _read(self) -> None:
        while True:
            message = self._ws.recv()
            if message is None:
                break
            if isinstance(message, str):
                try:
                    event = json.loads(message)
                except ValueError:
                    continue
                if event.get("type") == "error":
                    self.error = str((event.get("error") or {}).get("message") or message)
                continue
            try:
                kind, stream, payload = decode_frame(message)
                if kind == ACK:
                    self._window.ack(decode_ack(payload))
                    continue
            except ValueError as e:
                self.error = str(e)
                break
            with self._lock:
                s = self._streams.get(stream)
            if s is None:
                continue
            if not s.opened.is_set():
                s.refusal = None if kind == OPEN else (payload.decode(errors="replace") or "closed")
                s.opened.set()
                if kind == OPEN:
                    continue
            if kind == DATA:
                s.inbox.put(payload)
            elif kind == END:
                s.inbox.put(b"")
            elif kind == CLOSE:
                with self._lock:
                    self._streams.pop(stream, None)
                s.inbox.put(None)
        self._window.end()
        with self._lock:
            streams = list(self._streams.values())
            self._streams.clear()
        for s in streams:
            s.refusal = s.refusal or "the tunnel ended"
            s.opened.set()
            s.inbox.kill()
            _close(s.conn)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._carry, args=(conn,), name="kiln-tunnel-conn", daemon=True).start()

    def _carry(self, conn: socket.socket) -> None:
        s = _Stream(conn)
        with self._lock:
            if self._closed or self._window.over:
                _close(conn)
                return
            stream = self._next
            self._next += 1
            self._streams[stream] = s
        if not self._send(OPEN, stream):
            _close(conn)
            return
        s.opened.wait()
        if s.refusal is not None:
            with self._lock:
                self._streams.pop(stream, None)
            _close(conn)
            return
        writer = threading.Thread(target=self._deliver, args=(stream, s), name="kiln-tunnel-out", daemon=True)
        writer.start()
        try:
            while True:
                data = conn.recv(CHUNK)
                if not data:
                    self._send(END, stream)
                    break
                if not self._window.acquire(len(data)) or not self._send(DATA, stream, data):
                    break
        except OSError:
            with self._lock:
                gone = self._streams.pop(stream, None)
            if gone is not None:
                self._send(CLOSE, stream)
                s.inbox.kill()
        writer.join()
        _close(conn)

    def _deliver(self, stream: int, s: _Stream) -> None:
        while True:
            data = s.inbox.get()
            try:
                if data is None:
                    s.conn.shutdown(socket.SHUT_RDWR)
                    return
                if data == b"":
                    s.conn.shutdown(socket.SHUT_WR)
                    continue
                s.conn.sendall(data)
            except OSError:
                with self._lock:
                    gone = self._streams.pop(stream, None)
                if gone is not None:
                    self._send(CLOSE, stream)
                s.inbox.kill()
                try:
                    s.conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return

    def close(self) -> None:
        """Stops listening, cuts every forwarded connection and closes the tunnel."""
        with self._lock:
            self._closed = True
            streams = list(self._streams.values())
        _close(self._listener)
        self._ws.close()
        for s in streams:
            s.inbox.kill()
            _close(s.conn)
        for t in self._threads:
            t.join(timeout=10)

    def __enter__(self) -> "PortForward":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PortForward({self.host}:{self.local_port} -> {self.port})"


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
