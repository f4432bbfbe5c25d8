"""What the reach-in credential tests share (test_reach_in_credentials.py,
test_reach_in_tokens.py): a server in the sandbox that logs every request it sees, raw HTTP
from a chosen loopback source, tenants made through kiln's and E2B's control planes, the
session kilnd's world (tenant A's sandbox with a server and a private preview, tenant B)
and a kilnd with public previews behind an https preview URL."""
import http.client
import json
import re
import shutil
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from client import Client
from conftest import start_kilnd, stop_kilnd
from test_ports import SERVER

HTTP_PORT, PUBLIC_PORT = 8000, 8001
ENVD = 49983
COOKIE = "kiln_preview_token"

# port_server.py's handler, logging each request line it parses and its headers (before it
# answers) to /tmp/seen-PORT.log: the log shows whether a request ever reached the sandbox's
# server, and what it carried.
SEEN_SERVER = r'''
import http.server, json, sys
sys.path.insert(0, "/tmp")
import port_server
port = int(sys.argv[1])
log = open(f"/tmp/seen-{port}.log", "a", buffering=1)

class Logged(port_server.Handler):
    def parse_request(self):
        ok = super().parse_request()
        if ok:
            log.write(f"{self.command} {self.path} {json.dumps(dict(self.headers.items()))}\n")
        return ok

http.server.ThreadingHTTPServer.request_queue_size = 1024
server = http.server.ThreadingHTTPServer(("0.0.0.0", port), Logged)
server.daemon_threads = True
print("ready", flush=True)
server.serve_forever()
'''

# The headers no relay may pass on (spec item 2), whoever sends them.
CREDENTIAL_HEADERS = ("x-api-key", "x-kiln-preview-token", "x-runtime-preview-token",
                      "x-access-token", "e2b-traffic-access-token")


# ---- helpers ----------------------------------------------------------------------------------


class Answer:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def header(self, name):
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"<HTTP {self.status} {self.body[:400]!r}>"


def _http(d, method, target, headers=(), body=None, host=None, source=None, timeout=60):
    """One request on a fresh connection to kilnd `d` (from loopback address `source`);
    `headers` a list of (name, value)."""
    u = urllib.parse.urlsplit(d.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout,
                                      source_address=(source, 0) if source else None)
    try:
        conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host or u.netloc)
        for k, v in headers:
            conn.putheader(k, v)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        r = conn.getresponse()
        return Answer(r.status, r.getheaders(), r.read())
    finally:
        conn.close()


def _marker(what):
    return f"{what}-{uuid.uuid4().hex[:10]}"


def _key(api, name):
    k = api.ok("POST", "/v1/keys", json={"name": name})
    return SimpleNamespace(id=k["id"], secret=k["secret"], e2b="e2b_" + k["secret"][len("kiln_"):],
                           hex=k["secret"][len("kiln_"):])


def _e2b_create(d, secret):
    """A sandbox made by E2B's control plane under `secret`: (id, envd token, traffic token)."""
    r = Client(d.url).request("POST", "/e2b/sandboxes", json={"templateID": "base", "timeout": 600},
                              headers={"X-API-Key": "e2b_" + secret[len("kiln_"):]})
    assert r.status == 201, r
    body = r.json()
    return body["sandboxID"], body["envdAccessToken"], body["trafficAccessToken"]


def _serve_logged(c, sid, ports):
    c.write_file(sid, "/tmp/port_server.py", SERVER)
    c.write_file(sid, "/tmp/seen_server.py", SEEN_SERVER)
    for p in ports:
        c.spawn(sid, argv=["python3", "/tmp/seen_server.py", str(p)])
    for p in ports:
        deadline = time.monotonic() + 30
        while True:
            r = c.get(f"/v1/sandboxes/{sid}/ports/{p}/echo/up")
            if r.status == 200:
                break
            assert time.monotonic() < deadline, f"the server on {p} did not come up: {r!r}"
            time.sleep(0.1)


def _assert_never_seen(admin, sid, port, markers):
    """The server on `port` logged an admin's sentinel request (sent now, after the
    requests of `markers`) and none of `markers`."""
    sentinel = _marker("sentinel")
    r = admin.get(f"/v1/sandboxes/{sid}/ports/{port}/echo/{sentinel}")
    assert r.status == 200, r
    deadline = time.monotonic() + 10
    while True:
        log = admin.read_file(sid, f"/tmp/seen-{port}.log").body.decode(errors="replace")
        if sentinel in log:
            break
        assert time.monotonic() < deadline, f"the sentinel never reached the log: {log[-500:]!r}"
        time.sleep(0.1)
    reached = [m for m in markers if m in log]
    assert not reached, f"requests kilnd refused reached the sandbox's server: {reached}"


def _echo(answer):
    assert answer.status == 200, answer
    got = answer.json()
    return got, {k.lower(): v for k, v in got["headers"].items()}


def _assert_clean(answer, secrets, what):
    """The echoed request carries no kiln or E2B credential, by name or by value, but does
    carry the test's own header and cookie (the relay did not drop everything)."""
    got, h = _echo(answer)
    _assert_clean_headers(h, got, secrets, what)


def _assert_clean_headers(h, got, secrets, what):
    auth = h.get("authorization", "")
    assert not re.search(r"(kiln|e2b)_", auth), f"{what}: the server got Authorization: {auth}"
    leaked = [n for n in CREDENTIAL_HEADERS if n in h]
    assert not leaked, f"{what}: the sandbox's server got {leaked}: {h}"
    assert COOKIE not in h.get("cookie", ""), f"{what}: the server got the token cookie: {h}"
    text = json.dumps(got)
    for s in secrets:
        assert s not in text, f"{what}: a credential's value reached the server: {h}"
    assert h.get("x-app-marker") == "kept", f"{what}: the relay dropped an ordinary header: {h}"
    assert h.get("cookie") == "app=1", f"{what}: the app's own cookie did not pass: {h}"


def _logged_headers(admin, sid, port, marker):
    """The headers (lowercase names) of the request whose target holds `marker`, from the
    server's log."""
    deadline = time.monotonic() + 10
    while True:
        log = admin.read_file(sid, f"/tmp/seen-{port}.log").body.decode(errors="replace")
        line = next((x for x in log.splitlines() if marker in x.split(" ", 2)[1]), None)
        if line:
            got = json.loads(line.split(" ", 2)[2])
            return got, {k.lower(): v for k, v in got.items()}
        assert time.monotonic() < deadline, f"{marker} never reached the server: {log[-500:]!r}"
        time.sleep(0.1)


def _envd_stat(d, sid, headers, host=None):
    """envd's Filesystem/Stat of /tmp on E2B's plane (by path, or by host name)."""
    base = [("Content-Type", "application/json"), *headers]
    if host:
        return _http(d, "POST", "/filesystem.Filesystem/Stat", base, b'{"path": "/tmp"}', host=host)
    return _http(d, "POST", "/e2b/sandbox/filesystem.Filesystem/Stat",
                 [("E2b-Sandbox-Id", sid), ("E2b-Sandbox-Port", str(ENVD)), *base], b'{"path": "/tmp"}')


# ---- the session kilnd: tenants A and B, A's sandbox with a server and a private preview ------


@pytest.fixture(scope="module")
def world(kilnd, api):
    a, b = _key(api, "reach-in-a"), _key(api, "reach-in-b")
    sid, envd, traffic = _e2b_create(kilnd, a.secret)
    A, B = Client(kilnd.url, key=a.secret), Client(kilnd.url, key=b.secret)
    try:
        _serve_logged(A, sid, [HTTP_PORT])
        preview = A.ok("POST", f"/v1/sandboxes/{sid}/previews", json={"port": HTTP_PORT})
        host = f"{HTTP_PORT}-{sid}.localhost"
        assert preview["url"].startswith(f"http://{host}:"), preview
        yield SimpleNamespace(d=kilnd, admin=api, a=a, b=b, A=A, B=B, sid=sid, envd=envd,
                              traffic=traffic, token=preview["token"], preview=preview, host=host)
    finally:
        api.request("DELETE", f"/v1/sandboxes/{sid}")


def _secrets(w):
    return [w.a.hex, w.b.hex, w.d.admin_key[len("kiln_"):], w.token, w.envd, w.traffic]


def _preview_creds(w):
    """Every preview credential and a kiln key in headers that are not the request's own
    credential, plus the test's own header and cookie."""
    return [("X-API-Key", w.b.secret), ("X-Kiln-Preview-Token", w.token),
            ("X-Runtime-Preview-Token", w.token), ("X-Daytona-Preview-Token", w.token),
            ("X-App-Marker", "kept"),
            ("Cookie", f"app=1; {COOKIE}={w.token}")]


def _all_creds(w):
    return [*_preview_creds(w), ("X-Access-Token", w.envd), ("E2B-Traffic-Access-Token", w.traffic)]




def _follow_url_with_token(d, preview):
    u = urllib.parse.urlsplit(preview["urlWithToken"])
    r = _http(d, "GET", f"{u.path}?{u.query}", host=u.netloc)
    assert r.status == 302, r
    return r.header("Set-Cookie")




# ---- a kilnd with public previews and an https preview URL ---------------------------------------


@pytest.fixture(scope="module")
def https_kilnd():
    state = tempfile.mkdtemp(prefix="kiln-reach-https-", dir="/tmp")
    d = start_kilnd(state, "--allow-public-previews", "--preview-url", "https:8443")
    try:
        yield d, Client(d.url, key=d.admin_key)
    finally:
        stop_kilnd(d)
        shutil.rmtree(state, ignore_errors=True)
        Path(state + ".log").unlink(missing_ok=True)  # a failed test's report holds its tail


