"""HTTP transport: one keep-alive http.client connection per thread, retries where safe,
error answers turned into exceptions."""

from __future__ import annotations

import http.client
import json as _json
import random
import select
import socket
import ssl
import threading
import time
import urllib.parse
import uuid
import weakref
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from . import errors
from ._version import __version__

Query = Optional[Mapping[str, Any]]
_SAFE_METHODS = frozenset({"GET", "HEAD", "PUT"})  # PUTs are replace-writes


class Response:
    """A whole answer: status, headers (case-insensitive) and body bytes."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def request_id(self) -> Optional[str]:
        return self.headers.get("x-request-id")

    def json(self) -> Any:
        return _json.loads(self.body) if self.body else None


def encode_query(query: Query) -> str:
    """`?a=1&b=x` from a mapping; lists repeat the name, booleans are lower case, None is dropped."""
    if not query:
        return ""
    items: List[Tuple[str, str]] = []
    for name, value in query.items():
        for one in value if isinstance(value, (list, tuple)) else (value,):
            if one is None:
                continue
            items.append((name, str(one).lower() if isinstance(one, bool) else str(one)))
    return "?" + urllib.parse.urlencode(items) if items else ""


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


def _readable(sock: socket.socket) -> bool:
    """True when an idle keep-alive socket has data or EOF waiting, i.e. the server closed it."""
    try:
        if hasattr(select, "poll"):
            p = select.poll()
            p.register(sock, select.POLLIN)
            return bool(p.poll(0))
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class _Slot:
    """A thread's connection; closed when the thread ends and its thread-local goes."""

    __slots__ = ("conn", "timeout", "__weakref__")

    def __init__(self, conn: http.client.HTTPConnection, timeout: float) -> None:
        self.conn = conn
        self.timeout = timeout

    def __del__(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 -- interpreter shutdown
            pass


class Transport:
    """Sends requests to one daemon. Thread-safe: each thread keeps its own connection."""

    def __init__(self, base_url: str, api_key: Optional[str], *, timeout: float = 300.0,
                 max_retries: int = 4, max_connections: int = 32) -> None:
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"api_url must be an http(s) URL, got {base_url!r}")
        if u.username or u.password or u.query or u.fragment:
            raise ValueError(f"api_url must not carry credentials, a query or a fragment: {base_url!r}")
        if api_key is not None and (not api_key or any(c.isspace() for c in api_key)):
            raise errors.AuthenticationError("the API key is empty or contains whitespace",
                                             code="missing_api_key")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        if int(max_connections) < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections!r}")
        self.max_connections = int(max_connections)
        # Whole-body calls in flight at once (streams hold their own connection and do not count).
        self._calls = threading.BoundedSemaphore(self.max_connections)
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._prefix = u.path.rstrip("/")
        self._ssl = ssl.create_default_context() if self._https else None
        self._local = threading.local()
        self._lock = threading.Lock()
        self._slots: "weakref.WeakSet[_Slot]" = weakref.WeakSet()
        self._base_headers: Dict[str, str] = {
            "Accept": "application/json",
            "User-Agent": f"kiln-sdk-python/{__version__}",
            "X-Runtime-Client": f"sdk-python/{__version__}",
        }
        if api_key:
            self._base_headers["Authorization"] = f"Bearer {api_key}"

    # --- connections -------------------------------------------------------

    def new_connection(self, timeout: Optional[float] = None) -> http.client.HTTPConnection:
        t = self.timeout if timeout is None else timeout
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=t, context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=t)

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        slot = getattr(self._local, "slot", None)
        if slot is None:
            slot = self._local.slot = _Slot(self.new_connection(timeout), timeout)
            with self._lock:
                self._slots.add(slot)
            return slot.conn
        conn = slot.conn
        if conn.sock is not None:
            if _readable(conn.sock):
                conn.close()  # the server ended the idle connection: open a new one
            elif slot.timeout != timeout:
                conn.sock.settimeout(timeout)
                slot.timeout = timeout
        if conn.sock is None:
            conn.timeout = timeout
            slot.timeout = timeout
        return conn

    def connection_count(self) -> int:
        """How many per-thread connections are alive (threads that ended closed theirs)."""
        with self._lock:
            return len(self._slots)

    def close(self) -> None:
        """Closes every connection this transport opened (they reopen on the next call)."""
        with self._lock:
            slots = list(self._slots)
        for slot in slots:
            slot.conn.close()

    # --- requests ----------------------------------------------------------

    def headers(self, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        h = dict(self._base_headers)
        if extra:
            h.update(extra)
        return h

    def path(self, path: str, query: Query = None) -> str:
        return self._prefix + path + encode_query(query)

    def request(self, method: str, path: str, *, query: Query = None, json: Any = None,
                data: Union[bytes, Any, None] = None, headers: Optional[Mapping[str, str]] = None,
                timeout: Optional[float] = None, idempotency_key: Optional[str] = None,
                retry: Optional[bool] = None) -> Response:
        """One logical call. Retries connection failures and 502/503/504 only when the call
        is safe to repeat: GET/PUT, or it carries an Idempotency-Key (`retry` overrides);
        429 and `server_busy` always (nothing ran), after their Retry-After."""
        if self.api_key is None and path != "/v1/health":
            raise errors.AuthenticationError(
                "no API key: pass api_key=, set KILN_API_KEY, or make the local admin key "
                "(/var/lib/kiln/admin.key, KILN_ADMIN_KEY_FILE) readable", code="missing_api_key")
        hdrs = dict(self._base_headers)
        if headers:
            hdrs.update(headers)
        body: Any = None
        if json is not None:
            body = _json.dumps(json, separators=(",", ":")).encode()
            hdrs["Content-Type"] = "application/json"
        elif data is not None:
            body = data
            hdrs.setdefault("Content-Type", "application/octet-stream")
            if not isinstance(data, (bytes, bytearray, memoryview)):
                hdrs.setdefault("Content-Length", str(_stream_length(data)))
        if idempotency_key:
            hdrs["Idempotency-Key"] = idempotency_key
        safe = retry if retry is not None else (method in _SAFE_METHODS or bool(idempotency_key))
        target = self._prefix + path + encode_query(query)
        t = self.timeout if timeout is None else timeout
        start = body.tell() if hasattr(body, "tell") else None
        attempt = 0
        while True:
            if start is not None:
                body.seek(start)
            try:
                resp = self._once(method, target, body, hdrs, t)
            except socket.timeout as e:
                self._drop()
                raise errors.TimeoutError(f"{method} {path}: no answer within {t:g} s",
                                          code="request_timeout", idempotency_key=idempotency_key) from e
            except (OSError, http.client.HTTPException) as e:
                self._drop()
                if safe and attempt < self.max_retries:
                    time.sleep(_backoff(attempt))
                    attempt += 1
                    continue
                raise errors.ConnectionError(f"{method} {path}: {type(e).__name__}: {e}",
                                             code="connection_error", idempotency_key=idempotency_key) from e
            if resp.status < 300:
                if resp.headers.get("runtime-late-answer") == "true":
                    _raise_late_error(resp)
                return resp
            err = self._error(resp, idempotency_key)
            # A 429 (rate_limited, too_many_streams) or server_busy was refused before
            # anything ran, so even an unsafe call may be sent again.
            refused_before_acting = resp.status == 429 or err.code == "server_busy"
            if ((safe or refused_before_acting) and resp.status in errors.RETRY_STATUSES
                    and err.code not in errors.DELIBERATE_CODES and attempt < self.max_retries):
                time.sleep(_retry_delay(err, attempt))
                attempt += 1
                continue
            raise err

    def _once(self, method: str, target: str, body: Any, hdrs: Dict[str, str], timeout: float) -> Response:
        with self._calls:
            return self._send(method, target, body, hdrs, timeout)

    def _send(self, method: str, target: str, body: Any, hdrs: Dict[str, str], timeout: float) -> Response:
        conn = self._connection(timeout)
        try:
            conn.request(method, target, body=body, headers=hdrs)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer early (e.g. 413) and stop reading: read its answer
        r = conn.getresponse()
        return Response(r.status, r.headers, r.read())

    def _drop(self) -> None:
        slot = getattr(self._local, "slot", None)
        if slot is not None:
            slot.conn.close()

    def _error(self, resp: Response, idempotency_key: Optional[str]) -> errors.KilnError:
        try:
            body = resp.json()
        except ValueError:
            body = None
        err: errors.KilnError
        if 300 <= resp.status < 400:
            err = errors.ConnectionError(
                f"unexpected redirect {resp.status} to {resp.headers.get('Location')!r}",
                code="connection_error", request_id=resp.request_id)
        else:
            err = errors.make_error(resp.status, body, resp.request_id, resp.headers.get("Retry-After"))
        err.idempotency_key = idempotency_key
        return err

    def stream(self, method: str, path: str, *, query: Query = None, json: Any = None,
               headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
               idempotency_key: Optional[str] = None) -> "StreamedResponse":
        """A streamed answer on its own connection (closed when the stream is)."""
        if self.api_key is None:
            raise errors.AuthenticationError("no API key", code="missing_api_key")
        hdrs = dict(self._base_headers)
        if headers:
            hdrs.update(headers)
        body = None
        if json is not None:
            body = _json.dumps(json, separators=(",", ":")).encode()
            hdrs["Content-Type"] = "application/json"
        if idempotency_key:
            hdrs["Idempotency-Key"] = idempotency_key
        t = self.timeout if timeout is None else timeout
        conn = self.new_connection(t)
        try:
            conn.request(method, self._prefix + path + encode_query(query), body=body, headers=hdrs)
            r = conn.getresponse()
        except socket.timeout as e:
            conn.close()
            raise errors.TimeoutError(f"{method} {path}: no answer within {t:g} s",
                                      code="request_timeout") from e
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise errors.ConnectionError(f"{method} {path}: {type(e).__name__}: {e}",
                                         code="connection_error") from e
        if r.status >= 300:
            resp = Response(r.status, r.headers, r.read())
            conn.close()
            raise self._error(resp, idempotency_key)
        return StreamedResponse(conn, r)


class StreamedResponse:
    """An answer read as it arrives; use as a context manager."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self.conn = conn
        self.raw = resp
        self.headers = resp.headers

    def lines(self) -> Iterator[Dict[str, Any]]:
        """NDJSON objects, one per line."""
        try:
            while True:
                line = self.raw.readline()
                if not line:
                    return
                if line.strip():
                    yield _json.loads(line)
        except socket.timeout as e:
            raise errors.TimeoutError("stream stalled past its timeout", code="request_timeout") from e
        except (OSError, http.client.HTTPException) as e:
            raise errors.ConnectionError(f"stream broke: {e}", code="connection_error") from e

    def read(self, n: int = -1) -> bytes:
        return self.raw.read(n)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "StreamedResponse":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _stream_length(f: Any) -> int:
    pos = f.tell()
    f.seek(0, 2)
    end = f.tell()
    f.seek(pos)
    return end - pos


def _backoff(attempt: int) -> float:
    return min(8.0, 0.25 * 2 ** attempt) * random.uniform(0.5, 1.5)


def _retry_delay(err: errors.KilnError, attempt: int) -> float:
    if err.retry_after_ms is not None:
        return min(30.0, err.retry_after_ms / 1000.0) * random.uniform(0.9, 1.1)
    return _backoff(attempt)


def _raise_late_error(resp: Response) -> None:
    """A late answer (reference §1.3) whose body is only an error is that error."""
    try:
        body = resp.json()
    except ValueError as e:
        raise errors.ServiceUnavailableError("unparseable late answer", code="bad_gateway",
                                             status=502, request_id=resp.request_id) from e
    if isinstance(body, dict) and set(body) == {"error"}:
        raise errors.make_error(int((body["error"] or {}).get("status") or 500), body, resp.request_id)
