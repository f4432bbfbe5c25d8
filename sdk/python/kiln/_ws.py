"""A minimal RFC 6455 WebSocket client (standard library only), enough for kilnd's tunnel:
whole messages in, masked frames out, ping answered, close echoed."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import struct
import threading
from typing import Any, Dict, Optional, Tuple, Union

from . import errors

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_MESSAGE = 16 << 20  # a message larger than this ends the connection (kilnd sends far smaller)
_MAX_HEAD = 64 << 10

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def encode_frame(opcode: int, payload: bytes, mask: Optional[bytes] = None) -> bytes:
    """One final client frame; `mask` (4 bytes) defaults to a random one."""
    mask = os.urandom(4) if mask is None else mask
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    return head + mask + _xor(payload, mask)


def _xor(data: bytes, mask: bytes) -> bytes:
    if not data:
        return b""
    whole = (mask * (len(data) // 4 + 1))[:len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(whole, "big")).to_bytes(len(data), "big")


class WebSocket:
    """A connected client WebSocket. `send` is thread-safe; one thread calls `recv`."""

    def __init__(self, sock: socket.socket, rest: bytes = b"") -> None:
        self.sock = sock
        self._buf = bytearray(rest)
        self._send_lock = threading.Lock()
        self.closed = False

    @classmethod
    def connect(cls, transport: Any, path: str, timeout: Optional[float] = 30.0) -> "WebSocket":
        """Opens `path` on the transport's daemon with its key; a refusal raises the API's error."""
        conn = transport.new_connection(timeout)
        conn.connect()
        sock = conn.sock
        conn.sock = None  # the socket is ours from here on
        key = base64.b64encode(os.urandom(16)).decode()
        headers: Dict[str, str] = {k: v for k, v in transport.headers().items() if k != "Accept"}
        headers.update({"Host": f"{transport._host}:{transport._port}", "Upgrade": "websocket",
                        "Connection": "Upgrade", "Sec-WebSocket-Key": key, "Sec-WebSocket-Version": "13"})
        request = f"GET {transport.path(path)} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        try:
            sock.sendall((request + "\r\n").encode("latin-1"))
            head, rest = _read_head(sock)
        except OSError as e:
            sock.close()
            raise errors.ConnectionError(f"GET {path}: {e}", code="connection_error") from e
        status, hdrs = _parse_head(head)
        if status != 101:
            body = rest
            try:
                need = int(hdrs.get("content-length", "0"))
                while len(body) < min(need, 1 << 20):
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    body += chunk
            except (OSError, ValueError):
                pass
            sock.close()
            import json
            try:
                parsed = json.loads(body) if body else None
            except ValueError:
                parsed = None
            raise errors.make_error(status, parsed, hdrs.get("x-request-id"), hdrs.get("retry-after"))
        accept = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
        if hdrs.get("sec-websocket-accept") != accept:
            sock.close()
            raise errors.ConnectionError(f"GET {path}: bad Sec-WebSocket-Accept", code="connection_error")
        sock.settimeout(None)
        return cls(sock, rest)

    def send(self, data: Union[bytes, str]) -> None:
        frame = (encode_frame(OP_TEXT, data.encode()) if isinstance(data, str)
                 else encode_frame(OP_BINARY, bytes(data)))
        with self._send_lock:
            self.sock.sendall(frame)

    def _fill(self, n: int) -> None:
        while len(self._buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self._buf)))
            if not chunk:
                raise EOFError
            self._buf += chunk

    def _take(self, n: int) -> bytes:
        self._fill(n)
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def _frame(self) -> Tuple[bool, int, bytes]:
        b0, b1 = self._take(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._take(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._take(8))[0]
        if n > MAX_MESSAGE:
            raise ValueError(f"a WebSocket frame of {n} bytes is over the {MAX_MESSAGE} cap")
        mask = self._take(4) if b1 & 0x80 else None
        payload = self._take(n)
        if mask:
            payload = _xor(payload, mask)
        return bool(b0 & 0x80), b0 & 0x0F, payload

    def recv(self) -> Union[bytes, str, None]:
        """The next message: bytes (binary) or str (text); None once the connection ended."""
        parts: list = []
        kind = None
        size = 0
        try:
            while True:
                fin, op, payload = self._frame()
                if op == OP_PING:
                    with self._send_lock:
                        self.sock.sendall(encode_frame(OP_PONG, payload))
                    continue
                if op == OP_PONG:
                    continue
                if op == OP_CLOSE:
                    self._close_quietly(payload[:2])
                    return None
                if op != OP_CONT:
                    kind = op
                size += len(payload)
                if size > MAX_MESSAGE:
                    raise ValueError(f"a WebSocket message over the {MAX_MESSAGE} byte cap")
                parts.append(payload)
                if fin:
                    data = b"".join(parts)
                    return data.decode("utf-8") if kind == OP_TEXT else data
        except (EOFError, OSError, ValueError):
            self._close_quietly(b"")
            return None

    def _close_quietly(self, code: bytes) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            with self._send_lock:
                self.sock.sendall(encode_frame(OP_CLOSE, code))
        except OSError:
            pass
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def close(self) -> None:
        self._close_quietly(struct.pack("!H", 1000))


def _read_head(sock: socket.socket) -> Tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > _MAX_HEAD:
            raise OSError("the WebSocket answer's head is too long")
        chunk = sock.recv(4096)
        if not chunk:
            raise OSError("the connection closed during the WebSocket handshake")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _parse_head(head: bytes) -> Tuple[int, Dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    hdrs: Dict[str, str] = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs
