"""Unit tests of the Python SDK (sdk/python, package `kiln`) against a local fake HTTP server.

No kilnd: a ThreadingHTTPServer on 127.0.0.1:0 records every request (method, path, query,
headers, JSON body) and answers from a per-test script of canned responses.
"""
import json
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import kiln
from kiln import Runtime

KEY = "test-key-123"
SID = "sbx_unit1"
INFO = {"id": SID, "state": "running"}


def err_body(code, status, message="boom", **extra):
    e = {"code": code, "status": status, "message": message}
    e.update(extra)
    return {"error": e}


class FakeServer:
    """Records requests; answers each with the next scripted (status, body, headers)."""

    def __init__(self):
        self.requests = []
        self.script = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                u = urllib.parse.urlsplit(self.path)
                with fake.lock:
                    fake.requests.append({
                        "method": self.command,
                        "path": u.path,
                        "query": urllib.parse.parse_qs(u.query),
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                    })
                    if fake.script:
                        status, payload, headers = fake.script.pop(0)
                    else:
                        status, payload, headers = 500, err_body("unscripted", 500), {}
                data = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def answer(self, status, payload=None, headers=None):
        self.script.append((status, payload, headers or {}))
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(monkeypatch):
    for name in ("RUNTIME_API_URL", "RUNTIME_API_KEY", "KILN_API_URL", "KILN_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    s = FakeServer()
    yield s
    s.stop()


@pytest.fixture
def rt(server):
    r = Runtime(server.url, KEY, wait_for_capacity=5, timeout=5)
    yield r
    r.close()


def sandbox(rt):
    return kiln.Sandbox(dict(INFO), rt)


# --- 1. request shapes --------------------------------------------------------


def test_create_request_shape(server, rt):
    server.answer(200, INFO)
    sbx = rt.sandboxes.create(vcpu=1, memory_mib=256, timeout_seconds=60, labels={"team": "a"},
                              network={"internet": False})
    assert isinstance(sbx, kiln.Sandbox)
    assert sbx.id == SID and sbx.state == "running"
    assert len(server.requests) == 1
    req = server.requests[0]
    assert req["method"] == "POST"
    assert req["path"] == "/v1/sandboxes"
    assert req["query"] == {}
    assert req["body"] == {"vcpu": 1, "memoryMiB": 256, "timeoutSeconds": 60, "labels": {"team": "a"},
                           "network": {"internet": False}}
    h = req["headers"]
    assert h["authorization"] == f"Bearer {KEY}"
    assert h["content-type"] == "application/json"
    assert h["accept"] == "application/json"
    assert h["user-agent"].startswith("kiln-sdk-python/")
    assert 1 <= len(h["idempotency-key"]) <= 128
    assert h["prefer"] == "wait=5"  # wait_for_capacity=5


def test_create_explicit_idempotency_key_and_prefer_wait(server, rt):
    server.answer(200, INFO)
    rt.sandboxes.create(vcpu=1, idempotency_key="my-key.1", prefer_wait=2)
    h = server.requests[0]["headers"]
    assert h["idempotency-key"] == "my-key.1"
    assert h["prefer"] == "wait=2"


def test_create_unknown_field_is_type_error(server, rt):
    with pytest.raises(TypeError, match="memory_mib"):
        rt.sandboxes.create(memory_mb=256)
    assert server.requests == []


def test_exec_string_sends_command(server, rt):
    server.answer(200, {"exitCode": 0, "stdout": "hi\n", "stderr": "", "timedOut": False, "durationMs": 3})
    res = sandbox(rt).exec("echo hi")
    assert res.ok and res.exit_code == 0 and res.stdout == "hi\n" and res.duration_ms == 3
    req = server.requests[0]
    assert (req["method"], req["path"]) == ("POST", f"/v1/sandboxes/{SID}:exec")
    assert req["body"] == {"command": "echo hi"}
    assert req["headers"]["authorization"] == f"Bearer {KEY}"
    assert "idempotency-key" not in req["headers"]


def test_exec_list_sends_argv(server, rt):
    server.answer(200, {"exitCode": 2, "stdout": "", "stderr": "nope"})
    res = sandbox(rt).exec(["ls", "-l"], cwd="/tmp", env={"A": "1"}, timeout_ms=1500)
    assert not res.ok and res.exit_code == 2 and res.stderr == "nope"
    req = server.requests[0]
    assert req["path"] == f"/v1/sandboxes/{SID}:exec"
    assert req["body"] == {"argv": ["ls", "-l"], "cwd": "/tmp", "env": {"A": "1"}, "timeoutMs": 1500}
    server.answer(200, {"exitCode": None, "signal": "SIGKILL", "stdout": "y", "stderr": "", "stdoutTruncated": True})
    res = sandbox(rt).exec(["yes"], stop_at_output_cap=True)
    assert res.stdout_truncated and res.exit_code is None
    assert server.requests[1]["body"] == {"argv": ["yes"], "stopAtOutputCap": True}


def test_exec_check_raises_command_error(server, rt):
    server.answer(200, {"exitCode": 3, "stdout": "o", "stderr": "e"})
    with pytest.raises(kiln.CommandError) as ei:
        sandbox(rt).exec("false", check=True)
    assert ei.value.exit_code == 3 and ei.value.code == "command_failed"
    assert ei.value.stdout == "o" and ei.value.stderr == "e"


def test_network_set_puts_rules(server, rt):
    server.answer(200, {"internet": True, "allow": ["a.test"]})
    out = sandbox(rt).network.set(internet=True, allow=["a.test"])
    assert out == {"internet": True, "allow": ["a.test"]}
    req = server.requests[0]
    assert (req["method"], req["path"]) == ("PUT", f"/v1/sandboxes/{SID}/network")
    assert req["body"] == {"internet": True, "allow": ["a.test"]}


def test_network_set_without_internet_is_type_error(server, rt):
    with pytest.raises(TypeError):
        sandbox(rt).network.set(allow=["a.test"])
    assert server.requests == []


def test_extend_and_stop(server, rt):
    server.answer(200, {**INFO, "expiresAt": "2030-01-01T00:00:00Z"})
    server.answer(200, {"id": SID, "state": "stopped"})
    sbx = sandbox(rt)
    assert sbx.extend(60)["expiresAt"] == "2030-01-01T00:00:00Z"
    assert sbx.stop()["state"] == "stopped"
    assert sbx.state == "stopped"
    ext, stop = server.requests
    assert (ext["method"], ext["path"], ext["body"]) == ("POST", f"/v1/sandboxes/{SID}:extend", {"seconds": 60})
    assert (stop["method"], stop["path"], stop["body"]) == ("POST", f"/v1/sandboxes/{SID}:stop", {})
    assert ext["headers"]["idempotency-key"] and stop["headers"]["idempotency-key"]
    assert ext["headers"]["idempotency-key"] != stop["headers"]["idempotency-key"]


def test_get_and_list_query(server, rt):
    server.answer(200, INFO)
    server.answer(200, {"data": [INFO], "nextCursor": "c2"})
    server.answer(200, {"data": [{"id": "sbx_2", "state": "running"}]})
    assert rt.sandboxes.get(SID).id == SID
    page = rt.sandboxes.list(labels={"team": "a"}, include_stopped=True)
    assert [s.id for s in page] == [SID, "sbx_2"] and page.has_more is False
    get, l1, l2 = server.requests
    assert (get["method"], get["path"]) == ("GET", f"/v1/sandboxes/{SID}")
    assert l1["query"] == {"label": ["team:a"], "includeStopped": ["true"], "limit": ["100"]}
    assert l2["query"] == {"label": ["team:a"], "includeStopped": ["true"], "limit": ["100"], "cursor": ["c2"]}


# --- 2. retries ---------------------------------------------------------------


def test_create_no_capacity_retried_with_same_key(server, rt):
    server.answer(409, err_body("no_capacity", 409, "full"), {"Retry-After": "1"})
    server.answer(200, INFO)
    waits = []
    t0 = time.monotonic()
    sbx = rt.sandboxes.create(vcpu=1, memory_mib=256, on_capacity_wait=lambda e, s: waits.append((e, s)))
    elapsed = time.monotonic() - t0
    assert sbx.id == SID
    assert len(server.requests) == 2
    a, b = server.requests
    assert a["headers"]["idempotency-key"] == b["headers"]["idempotency-key"]
    assert a["body"] == b["body"] == {"vcpu": 1, "memoryMiB": 256}
    assert len(waits) == 1
    err, sleep = waits[0]
    assert isinstance(err, kiln.CapacityError) and isinstance(err, kiln.ConflictError)
    assert err.code == "no_capacity" and err.status == 409 and err.retry_after_ms == 1000
    assert sleep == 1.0
    assert 0.9 <= elapsed < 3


def test_create_no_capacity_retry_after_ms_in_body(server, rt):
    server.answer(409, err_body("no_capacity", 409, retryAfterMs=50))
    server.answer(409, err_body("quota_exceeded", 409, retryAfterMs=50))
    server.answer(200, INFO)
    assert rt.sandboxes.create(vcpu=1).id == SID
    keys = {r["headers"]["idempotency-key"] for r in server.requests}
    assert len(server.requests) == 3 and len(keys) == 1


def test_create_no_capacity_gives_up_when_budget_spent(server, rt):
    server.answer(409, err_body("no_capacity", 409, retryAfterMs=50))
    with pytest.raises(kiln.CapacityError) as ei:
        rt.sandboxes.create(vcpu=1, wait_for_capacity=0)
    assert ei.value.code == "no_capacity"
    assert len(server.requests) == 1
    assert server.requests[0]["headers"]["prefer"] == "wait=0"


def test_get_503_retried(server, rt):
    server.answer(503, err_body("daemon_busy", 503, retryAfterMs=10))
    server.answer(503, err_body("daemon_busy", 503), {"Retry-After": "0"})
    server.answer(200, INFO)
    assert rt.sandboxes.get(SID).id == SID
    assert [r["method"] for r in server.requests] == ["GET"] * 3
    assert all(r["path"] == f"/v1/sandboxes/{SID}" for r in server.requests)


def test_get_503_gives_up_after_max_retries(server):
    rt = Runtime(server.url, KEY, timeout=5, max_retries=2)
    try:
        for _ in range(3):
            server.answer(503, err_body("daemon_busy", 503, retryAfterMs=1))
        with pytest.raises(kiln.ServiceUnavailableError) as ei:
            rt.sandboxes.get(SID)
        assert ei.value.status == 503 and ei.value.code == "daemon_busy"
        assert len(server.requests) == 3  # 1 + max_retries
    finally:
        rt.close()


def test_get_503_deliberate_code_not_retried(server, rt):
    server.answer(503, err_body("network_unavailable", 503, retryAfterMs=1))
    with pytest.raises(kiln.ServiceUnavailableError) as ei:
        sandbox(rt).network.get()
    assert ei.value.code == "network_unavailable"
    assert ei.value.retryable is False
    assert len(server.requests) == 1


def test_exec_503_not_retried_without_idempotency_key(server, rt):
    # exec sends no Idempotency-Key by default, so a POST is not safe to repeat.
    server.answer(503, err_body("daemon_busy", 503, retryAfterMs=1))
    server.answer(200, {"exitCode": 0})
    with pytest.raises(kiln.ServiceUnavailableError) as ei:
        sandbox(rt).exec("echo hi")
    assert ei.value.status == 503 and ei.value.idempotency_key is None
    assert len(server.requests) == 1


def test_exec_503_retried_with_idempotency_key(server, rt):
    server.answer(503, err_body("daemon_busy", 503, retryAfterMs=1))
    server.answer(200, {"exitCode": 0, "stdout": "hi\n"})
    res = sandbox(rt).exec("echo hi", idempotency_key="exec-1")
    assert res.stdout == "hi\n"
    assert len(server.requests) == 2
    assert [r["headers"]["idempotency-key"] for r in server.requests] == ["exec-1", "exec-1"]


def test_exec_429_retried_after_retry_after_without_idempotency_key(server, rt):
    # A 429 was refused before anything ran: even an unkeyed POST is sent again,
    # once its Retry-After (seconds) has passed.
    server.answer(429, err_body("rate_limited", 429, "over its rate limit of 5 requests/s"),
                  {"Retry-After": "1"})
    server.answer(200, {"exitCode": 0, "stdout": "hi\n"})
    t0 = time.monotonic()
    res = sandbox(rt).exec("echo hi")
    waited = time.monotonic() - t0
    assert res.stdout == "hi\n"
    assert len(server.requests) == 2
    assert 0.85 <= waited < 5, waited


def test_429_gives_up_after_max_retries_as_rate_limit_error(server):
    rt = Runtime(server.url, KEY, timeout=5, max_retries=1)
    try:
        for _ in range(2):
            server.answer(429, err_body("too_many_streams", 429, "cap 64", retryAfterMs=10))
        with pytest.raises(kiln.RateLimitError) as ei:
            sandbox(rt).exec("echo hi")
        assert ei.value.code == "too_many_streams" and ei.value.status == 429
        assert ei.value.retry_after_ms == 10 and ei.value.retryable
        assert len(server.requests) == 2
    finally:
        rt.close()


def test_stop_503_retried_same_key(server, rt):
    # :stop carries a fresh Idempotency-Key, which makes it safe to retry.
    server.answer(502, err_body("bad_gateway", 502, retryAfterMs=1))
    server.answer(200, {"id": SID, "state": "stopped"})
    sandbox(rt).stop()
    assert len(server.requests) == 2
    a, b = server.requests
    assert a["headers"]["idempotency-key"] == b["headers"]["idempotency-key"]


@pytest.mark.parametrize("call", ["get", "create", "exec", "network_set"])
def test_400_never_retried(server, rt, call):
    for _ in range(3):
        server.answer(400, err_body("invalid_request", 400, "bad"), {"Retry-After": "0"})
    with pytest.raises(kiln.InvalidRequestError):
        if call == "get":
            rt.sandboxes.get(SID)
        elif call == "create":
            rt.sandboxes.create(vcpu=1)
        elif call == "exec":
            sandbox(rt).exec("x", idempotency_key="k1")
        else:
            sandbox(rt).network.set(internet=True)
    assert len(server.requests) == 1


# --- 3. errors ----------------------------------------------------------------


def test_404_not_found(server, rt):
    server.answer(404, err_body("not_found", 404, "no such sandbox"), {"x-request-id": "req-404"})
    with pytest.raises(kiln.NotFoundError) as ei:
        rt.sandboxes.get("sbx_missing")
    e = ei.value
    assert isinstance(e, kiln.KilnError)
    assert e.code == "not_found" and e.status == 404 and e.request_id == "req-404"
    assert e.message == "no such sandbox"
    assert "req-404" in str(e)
    assert len(server.requests) == 1


def test_request_id_in_body_wins(server, rt):
    server.answer(404, err_body("not_found", 404, requestId="req-body"), {"x-request-id": "req-hdr"})
    with pytest.raises(kiln.NotFoundError) as ei:
        rt.sandboxes.get(SID)
    assert ei.value.request_id == "req-body"


def test_401_auth_error(server, rt):
    server.answer(401, err_body("unauthorized", 401, "bad key"), {"x-request-id": "req-401"})
    with pytest.raises(kiln.AuthError) as ei:
        rt.sandboxes.get(SID)
    assert kiln.AuthError is kiln.AuthenticationError
    assert ei.value.code == "unauthorized" and ei.value.status == 401 and ei.value.request_id == "req-401"


@pytest.mark.parametrize("code", ["not_running", "conflict", "idempotency_key_reused"])
def test_409_conflict(server, rt, code):
    server.answer(409, err_body(code, 409, "state forbids it"))
    with pytest.raises(kiln.ConflictError) as ei:
        sandbox(rt).exec("echo hi")
    assert not isinstance(ei.value, kiln.CapacityError)
    assert ei.value.code == code and ei.value.status == 409
    assert len(server.requests) == 1


def test_400_invalid_request_details(server, rt):
    details = {"issues": [{"field": "vcpu", "message": "must be >= 1"}]}
    server.answer(400, err_body("invalid_request", 400, "bad field", details=details, hint="fix vcpu"),
                  {"x-request-id": "req-400"})
    with pytest.raises(kiln.InvalidRequestError) as ei:
        rt.sandboxes.create(vcpu=0)
    e = ei.value
    assert e.code == "invalid_request" and e.status == 400 and e.request_id == "req-400"
    assert e.details == details and e.hint == "fix vcpu"
    assert e.idempotency_key == server.requests[0]["headers"]["idempotency-key"]


def test_error_without_json_body(server, rt):
    server.answer(404, None)
    with pytest.raises(kiln.NotFoundError) as ei:
        rt.sandboxes.get(SID)
    assert ei.value.code == "http_404" and ei.value.status == 404


def test_dead_port_connection_error(monkeypatch):
    for name in ("RUNTIME_API_URL", "RUNTIME_API_KEY", "KILN_API_URL", "KILN_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens here now
    rt = Runtime(f"http://127.0.0.1:{port}", KEY, timeout=2, max_retries=0)
    try:
        with pytest.raises(kiln.ConnectionError) as ei:
            rt.sandboxes.get(SID)
        e = ei.value
        assert kiln.ConnectionError is kiln.RuntimeConnectionError
        assert isinstance(e, ConnectionError)  # the builtin too
        assert e.code == "connection_error" and e.status == 0 and e.retryable
        with pytest.raises(kiln.ConnectionError):
            kiln.Sandbox(dict(INFO), rt).exec("echo hi")
    finally:
        rt.close()


def test_bad_api_key_rejected_locally(server):
    with pytest.raises(kiln.AuthError) as ei:
        Runtime(server.url, "has space")
    assert ei.value.code == "missing_api_key"
    assert server.requests == []
