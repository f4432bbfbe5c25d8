"""A tiny stdlib HTTP client for kilnd's /v1 API (docs/api.md).

One new connection per request, so it is safe to share between threads.
"""
import http.client
import json
import re
import time
import urllib.parse

DEFAULT_TIMEOUT = 180.0  # seconds; a hung daemon fails the test, not the run


class Response:
    def __init__(self, status, headers, body, elapsed):
        self.status = status
        self.headers = headers  # http.client.HTTPMessage (case-insensitive)
        self.body = body
        self.elapsed = elapsed

    @property
    def request_id(self):
        return self.headers.get("x-request-id")

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        text = self.body[:600].decode("utf-8", "replace")
        return f"<HTTP {self.status} {text!r}>"


class Stream:
    """An NDJSON answer read line by line; `events` are (arrival_s, obj)."""

    def __init__(self, status, headers, timed_events, body=b""):
        self.status = status
        self.headers = headers
        self.timed_events = timed_events
        self.body = body  # the whole body when the answer was not 200

    @property
    def events(self):
        return [e for _, e in self.timed_events]

    def __repr__(self):
        return f"<Stream {self.status} {self.events[:20]!r} {self.body[:300]!r}>"


def _encode_query(query):
    if not query:
        return ""
    items = []
    for k, v in query.items():
        for one in v if isinstance(v, (list, tuple)) else [v]:
            items.append((k, str(one).lower() if isinstance(one, bool) else str(one)))
    return "?" + urllib.parse.urlencode(items)


class Client:
    def __init__(self, base_url, timeout=DEFAULT_TIMEOUT, key=None):
        u = urllib.parse.urlsplit(base_url)
        self.key = key
        self.base_url = base_url.rstrip("/")
        self.host, self.port = u.hostname, u.port
        self.timeout = timeout

    def connect(self, timeout=None):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout or self.timeout)

    def _send(self, conn, method, path, json_body, data, query, headers):
        hdrs = {"Accept": "application/json"}
        if self.key:
            hdrs["Authorization"] = f"Bearer {self.key}"
        body = None
        if json_body is not None:
            body = json.dumps(json_body).encode()
            hdrs["Content-Type"] = "application/json"
        elif data is not None:
            body = data
            hdrs.setdefault("Content-Type", "application/octet-stream")
        hdrs.update(headers or {})
        conn.request(method, path + _encode_query(query), body=body, headers=hdrs)

    def request(self, method, path, json=None, data=None, query=None, headers=None, timeout=None):
        """`json` is sent as a JSON body; `data` as raw bytes (e.g. malformed JSON)."""
        conn = self.connect(timeout)
        t0 = time.monotonic()
        try:
            try:
                self._send(conn, method, path, json, data, query, headers)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may answer early (e.g. 413) and stop reading; see its answer
            r = conn.getresponse()
            body = r.read()
            return Response(r.status, r.headers, body, time.monotonic() - t0)
        finally:
            conn.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, json=None, **kw):
        return self.request("POST", path, json=json, **kw)

    def ok(self, method, path, **kw):
        """The parsed JSON of a 2xx answer; anything else fails the test."""
        r = self.request(method, path, **kw)
        assert 200 <= r.status < 300, f"{method} {path} -> {r!r}"
        assert r.request_id, f"{method} {path}: no x-request-id header"
        return r.json()

    def stream(self, method, path, json=None, query=None, timeout=None):
        """Reads an NDJSON answer to the end, noting when each line arrived."""
        conn = self.connect(timeout)
        t0 = time.monotonic()
        try:
            self._send(conn, method, path, json, None, query, {"Accept": "application/x-ndjson"})
            r = conn.getresponse()
            if r.status != 200:
                return Stream(r.status, r.headers, [], r.read())
            events = []
            while True:
                line = r.readline()
                if not line:
                    break
                if line.strip():
                    events.append((time.monotonic() - t0, _loads_line(line)))
            return Stream(r.status, r.headers, events)
        finally:
            conn.close()

    # --- sandbox shortcuts -------------------------------------------------

    def health(self, timeout=10):
        return self.get("/v1/health", timeout=timeout)

    def create(self, **fields):
        return self.ok("POST", "/v1/sandboxes", json=fields)

    def sandbox(self, sid):
        return self.ok("GET", f"/v1/sandboxes/{sid}")

    def stop(self, sid):
        return self.ok("POST", f"/v1/sandboxes/{sid}:stop", json={})

    def delete(self, sid):
        return self.ok("DELETE", f"/v1/sandboxes/{sid}")

    def exec(self, sid, timeout=None, **fields):
        """POST :exec and return the CommandResult (asserts 200)."""
        return self.ok("POST", f"/v1/sandboxes/{sid}:exec", json=fields, timeout=timeout)

    def sh(self, sid, command, **fields):
        """Runs `command` with bash; asserts exit 0 and returns stdout."""
        r = self.exec(sid, command=command, **fields)
        assert r["exitCode"] == 0, f"{command!r} -> {r!r}"
        return r["stdout"]

    def exec_stream(self, sid, timeout=None, **fields):
        return self.stream("POST", f"/v1/sandboxes/{sid}:exec", json={**fields, "stream": True},
                           timeout=timeout)

    def spawn(self, sid, **fields):
        return self.ok("POST", f"/v1/sandboxes/{sid}/processes", json=fields)

    def process(self, sid, pid):
        return self.ok("GET", f"/v1/sandboxes/{sid}/processes/{pid}")

    def wait_process(self, sid, pid, timeout=15.0):
        """Polls until the process is no longer running; returns its ProcessInfo."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.process(sid, pid)
            if info["state"] != "running" or time.monotonic() > deadline:
                return info
            time.sleep(0.05)

    def write_file(self, sid, path, content, mode=None):
        q = {"path": path}
        if mode is not None:
            q["mode"] = mode
        return self.ok("PUT", f"/v1/sandboxes/{sid}/files/content", data=content, query=q)

    def read_file(self, sid, path):
        r = self.get(f"/v1/sandboxes/{sid}/files/content", query={"path": path})
        assert r.status == 200, f"read {path} -> {r!r}"
        return r

    def stat(self, sid, path):
        return self.ok("GET", f"/v1/sandboxes/{sid}/files/stat", query={"path": path})


def _loads_line(line):
    try:
        return json.loads(line)
    except ValueError as e:
        raise AssertionError(f"NDJSON line is not JSON: {line[:300]!r}") from e


def assert_error(resp, status, code, mentions=(), issue_path=None):
    """Checks the error shape {"error": {code, status, message, requestId, details?}}.

    `mentions`: strings that must appear in the message or the details.
    `issue_path`: for invalid_request, a `details.issues[].path` that must exist
    (exact match).  Returns the error object.
    """
    assert resp.status == status, f"expected {status} {code}, got {resp!r}"
    rid = resp.request_id
    assert rid, f"no x-request-id on {resp!r}"
    try:
        body = resp.json()
    except ValueError:
        raise AssertionError(f"error body is not JSON: {resp!r}")
    assert isinstance(body, dict) and isinstance(body.get("error"), dict), f"bad error shape: {body!r}"
    err = body["error"]
    assert err.get("code") == code, f"expected code {code}: {err!r}"
    assert err.get("status") == status, f"error.status != {status}: {err!r}"
    assert isinstance(err.get("message"), str) and err["message"], f"no message: {err!r}"
    assert err.get("requestId") == rid, f"requestId {err.get('requestId')!r} != header {rid!r}"
    text = err["message"] + " " + json.dumps(err.get("details"))
    for m in mentions:
        assert m in text, f"{m!r} not named in the error: {err!r}"
    if issue_path is not None:
        paths = issue_paths(err)
        assert issue_path in paths, f"no issue with path {issue_path!r}: {err!r}"
    return err


def issue_paths(err):
    issues = (err.get("details") or {}).get("issues")
    assert isinstance(issues, list) and issues, f"invalid_request without details.issues: {err!r}"
    for i in issues:
        assert isinstance(i.get("path"), str) and isinstance(i.get("message"), str), f"bad issue {i!r}"
    return [i["path"] for i in issues]


def metric(api, name, **labels):
    """The value of the first series of `name` in /metrics whose labels include
    `labels` (None if there is none)."""
    text = api.get("/metrics").body.decode()
    for line in text.splitlines():
        m = re.match(r"^(\w+)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return None
