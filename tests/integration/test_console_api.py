"""What the web console needs from kilnd beyond the API every client uses: its files at /ui
under a strict Content-Security-Policy, terminal tickets (a browser cannot put a key on a
WebSocket), GET /v1/capacity and GET /v1/usage's time buckets. The console itself, in a real
browser, is test_console.py."""
import json
import time

import pytest

from client import Client, assert_error
from conftest import start_kilnd, stop_kilnd
from test_terminal import MiniWebSocket, Screen


def _ticket(api, sid):
    t = api.ok("POST", f"/v1/sandboxes/{sid}/terminal-tickets", json={})
    assert t["ticket"].startswith("tkt_") and len(t["ticket"]) == 68, t
    assert t["sandboxId"] == sid, t
    return t["ticket"]


def _ticket_ws(kilnd, sid, ticket, protocols="runtime.terminal.v1, runtime.ticket.{t}"):
    return MiniWebSocket(kilnd.url, f"/v1/sandboxes/{sid}/terminal?cols=90&rows=20", key=None,
                         headers=[f"Sec-WebSocket-Protocol: {protocols.format(t=ticket)}"])


@pytest.fixture(scope="module")
def tenant(api):
    secret = api.ok("POST", "/v1/keys", json={"name": "console-tenant"})["secret"]
    return Client(api.base_url, key=secret)


def test_a_ticket_opens_its_sandboxs_terminal_once(kilnd, api, sid):
    ticket = _ticket(api, sid)
    ws = _ticket_ws(kilnd, sid, ticket)
    assert ws.status == 101, ws.head
    # The browser fails the socket unless the server picks the protocol it offered.
    assert "sec-websocket-protocol: runtime.terminal.v1" in ws.head.lower(), ws.head
    screen = Screen(ws)
    ws.send(b"echo ticket-$((20+22))\r")
    screen.until("ticket-42")
    ws.close()
    again = _ticket_ws(kilnd, sid, ticket)
    assert again.status == 401, again.head
    assert b"ticket" in again.body, again.body
    again.close()


def test_a_ticket_is_bound_to_one_sandbox(kilnd, api, sid, sandboxes):
    other = sandboxes.create()["id"]
    ticket = _ticket(api, sid)
    ws = _ticket_ws(kilnd, other, ticket)
    assert ws.status == 401, ws.head
    ws.close()
    # Presented for the wrong sandbox, it is spent: not usable for its own either.
    ws = _ticket_ws(kilnd, sid, ticket)
    assert ws.status == 401, ws.head
    ws.close()


def test_a_ticket_is_bound_to_its_key(kilnd, api, tenant, sid):
    # A tenant cannot get a ticket for a sandbox it cannot see, nor use a made-up one.
    assert_error(tenant.post(f"/v1/sandboxes/{sid}/terminal-tickets", json={}), 404, "not_found")
    ws = _ticket_ws(kilnd, sid, "tkt_" + "0" * 64)
    assert ws.status == 401, ws.head
    ws.close()
    # A revoked key's ticket opens nothing.
    created = api.ok("POST", "/v1/keys", json={"name": "soon-revoked"})
    mine = Client(api.base_url, key=created["secret"])
    own = mine.create()["id"]
    try:
        ticket = _ticket(mine, own)
        api.ok("POST", f"/v1/keys/{created['id']}:revoke", json={})
        ws = _ticket_ws(kilnd, own, ticket)
        assert ws.status == 401, ws.head
        ws.close()
    finally:
        api.request("DELETE", f"/v1/sandboxes/{own}")


def test_ticket_refusals_and_the_log(kilnd, api, sid):
    assert_error(api.post("/v1/sandboxes/sbx_nope/terminal-tickets", json={}), 404, "not_found")
    assert_error(api.post(f"/v1/sandboxes/{sid}/terminal-tickets", json={"x": 1}), 400,
                 "invalid_request", issue_path="body.x")
    # Only the terminal takes a ticket: any other route still wants the key.
    ticket = _ticket(api, sid)
    r = Client(api.base_url).request(
        "GET", f"/v1/sandboxes/{sid}",
        headers={"Sec-WebSocket-Protocol": f"runtime.terminal.v1, runtime.ticket.{ticket}"})
    assert_error(r, 401, "unauthorized")
    ws = _ticket_ws(kilnd, sid, ticket)  # still unspent
    assert ws.status == 101, ws.head
    ws.close()
    # Neither a ticket nor a key is ever written to kilnd's log.
    log = kilnd.log_path.read_text(errors="replace")
    assert ticket not in log and ticket[4:] not in log
    assert kilnd.admin_key not in log


def test_capacity(api, tenant, sid):
    c = api.ok("GET", "/v1/capacity")
    assert c["running"] >= 1, c
    for part in ("memoryMiB", "vcpus"):
        assert c[part]["budget"] > 0, c
        assert c[part]["reserved"] > 0, c
        assert c[part]["free"] == pytest.approx(c[part]["budget"] - c[part]["reserved"]), c
    assert isinstance(c["pools"], list) and isinstance(c["queued"], int), c
    # A tenant reads it too, without anyone's pools but its own.
    t = tenant.ok("GET", "/v1/capacity")
    assert t["running"] == c["running"] or abs(t["running"] - c["running"]) <= 2, t
    assert t["pools"] == [] or all(p["kind"] == "snapshot" for p in t["pools"]), t


def test_usage_buckets(api, tenant):
    s = tenant.create()["id"]
    try:
        tenant.sh(s, "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
    finally:
        tenant.stop(s)
    now = time.time()
    frm = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 3600))
    to = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + 60))
    u = tenant.ok("GET", "/v1/usage", query={"from": frm, "to": to, "bucketSeconds": 600,
                                             "groupBy": "key"})
    assert u["bucketSeconds"] == 600 and len(u["buckets"]) == 7, u
    assert u["buckets"][0]["from"].startswith(frm[:16]), u["buckets"][0]
    cpu = sum(b["total"]["cpuSeconds"] for b in u["buckets"])
    assert cpu > 0 and cpu == pytest.approx(u["total"]["cpuSeconds"], rel=1e-6), u
    assert all(d["group"] == u["data"][0]["group"] for b in u["buckets"] for d in b["data"]), u
    r = tenant.get("/v1/usage", query={"from": frm, "to": to, "bucketSeconds": 10})
    assert_error(r, 400, "invalid_request", issue_path="query.bucketSeconds")
    r = tenant.get("/v1/usage", query={"bucketSeconds": 60})  # 30 days of minutes
    assert_error(r, 400, "invalid_request", issue_path="query.bucketSeconds", mentions=["500"])


@pytest.fixture(scope="module")
def console_kilnd(tmp_path_factory):
    root = tmp_path_factory.mktemp("console")
    files = root / "files"
    (files / "assets").mkdir(parents=True)
    (files / "index.html").write_text("<!doctype html><title>kiln</title>")
    (files / "app.js").write_text("console.log(1)")
    (files / "assets" / "x.woff2").write_bytes(b"\0\1")
    (root / "secret.txt").write_text("outside")
    d = start_kilnd(root / "state", "--console-dir", str(files))
    yield d
    stop_kilnd(d)


def test_console_files_and_their_headers(console_kilnd):
    c = Client(console_kilnd.url)  # no key: the console asks for one itself
    r = c.get("/ui")
    assert r.status == 308 and r.headers.get("location") == "/ui/", r
    r = c.get("/ui/")
    assert r.status == 200 and b"<title>kiln</title>" in r.body, r
    csp = r.headers.get("content-security-policy", "")
    for directive in ("default-src 'none'", "script-src 'self'", "style-src 'self'",
                      "connect-src 'self'", "frame-ancestors 'none'"):
        assert directive in csp, csp
    assert "unsafe" not in csp, csp
    assert r.headers.get("x-content-type-options") == "nosniff", r.headers
    assert r.headers.get("content-type", "").startswith("text/html"), r.headers
    js = c.get("/ui/app.js")
    assert js.status == 200 and js.headers["content-type"].startswith("text/javascript"), js
    etag = js.headers["etag"]
    assert c.get("/ui/app.js", headers={"If-None-Match": etag}).status == 304
    assert c.get("/ui/assets/x.woff2").body == b"\0\1"
    for bad in ("/ui/../secret.txt", "/ui/%2e%2e/secret.txt", "/ui/assets/../../secret.txt",
                "/ui/nope.js", "/ui/a/b/c.js"):
        r = c.get(bad)
        assert r.status in (400, 404) and b"outside" not in r.body, (bad, r)


def test_a_kilnd_without_a_console_says_how_to_build_it(tmp_path):
    d = start_kilnd(tmp_path / "state", "--console-dir", str(tmp_path / "absent"))
    try:
        r = Client(d.url).get("/ui/")
        assert_error(r, 404, "not_found", mentions=["make setup"])
    finally:
        stop_kilnd(d)
