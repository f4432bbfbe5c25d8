"""Reaching a server inside a sandbox (issue 28): HTTP by path and by host name,
WebSocket upgrades through both, raw TCP over the tunnel WebSocket, previews and their
tokens, and the refusals (a closed port, a stopped sandbox, a paused one with autoWake,
the connection cap). The server is tests/integration/port_server.py, run by the sandbox's
own python3; nothing here talks to it except through kilnd.

Nothing sleeps to assert: waits poll with a deadline."""
import hashlib
import http.client
import json
import socket
import struct
import time
import urllib.parse
from pathlib import Path

import pytest

from client import Client, assert_error
from conftest import start_kilnd, stop_kilnd
from test_terminal import MiniWebSocket

HTTP_PORT, ECHO_PORT = 8000, 9000
SERVER = (Path(__file__).resolve().parent / "port_server.py").read_text()


def _serve(api, sid, http_port=HTTP_PORT, echo_port=ECHO_PORT):
    api.write_file(sid, "/tmp/port_server.py", SERVER)
    api.spawn(sid, argv=["python3", "/tmp/port_server.py", str(http_port), str(echo_port)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = api.get(f"/v1/sandboxes/{sid}/ports/{http_port}/echo")
        if r.status == 200:
            return
        time.sleep(0.1)
    raise AssertionError(f"the port server did not come up: {r!r}")


@pytest.fixture(scope="module")
def served(api, sid):
    _serve(api, sid)
    return sid


def _raw(kilnd, method, target, headers=(), body=b"", host=None):
    """One request on a fresh connection; (status, headers dict, body) read to the close."""
    u = urllib.parse.urlsplit(kilnd.url)
    with socket.create_connection((u.hostname, u.port), timeout=30) as s:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host or u.netloc}", "Connection: close", *headers]
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    hdrs = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.decode("latin-1").partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, rest


# ---- HTTP by path ----------------------------------------------------------------------------


def test_get_by_path_passes_path_query_and_headers_but_not_the_key(api, kilnd, served):
    r = api.get(f"/v1/sandboxes/{served}/ports/{HTTP_PORT}/echo/a%20b", query={"x": "1", "y": "two"},
                headers={"X-Custom": "yes"})
    assert r.status == 200, r
    got = r.json()
    assert got["path"] == "/echo/a%20b?x=1&y=two", got
    headers = {k.lower(): v for k, v in got["headers"].items()}
    assert headers["x-custom"] == "yes"
    assert "authorization" not in headers, "the kiln key must not reach the sandbox"
    assert headers["x-forwarded-prefix"] == f"/v1/sandboxes/{served}/ports/{HTTP_PORT}"
    assert headers["connection"] == "close"
    # The bare port is its root.
    r = api.get(f"/v1/sandboxes/{served}/ports/{HTTP_PORT}")
    assert r.status == 200 and r.json()["path"] == "/", r


def test_post_bodies_stream_both_ways(api, served):
    body = bytes(range(256)) * 8192  # 2 MiB
    r = api.request("POST", f"/v1/sandboxes/{served}/ports/{HTTP_PORT}/upload", data=body,
                    headers={"Idempotency-Key": "passed-on-not-kept"})
    assert r.status == 200, r
    assert r.json()["size"] == len(body) and r.json()["sha256"] == hashlib.sha256(body).hexdigest()
    assert r.json()["headers"].get("Idempotency-Key") == "passed-on-not-kept"
    # A chunked body arrives whole.
    conn = http.client.HTTPConnection(api.host, api.port, timeout=30)
    conn.putrequest("PUT", f"/v1/sandboxes/{served}/ports/{HTTP_PORT}/upload")
    conn.putheader("Authorization", f"Bearer {api.key}")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    pieces = [b"a" * 1000, b"b" * 70000, b"c"]
    for p in pieces:
        conn.send(f"{len(p):x}\r\n".encode() + p + b"\r\n")
    conn.send(b"0\r\n\r\n")
    got = json.loads(conn.getresponse().read())
    conn.close()
    assert got["size"] == 71001 and got["sha256"] == hashlib.sha256(b"".join(pieces)).hexdigest(), got
    # A large answer comes through whole.
    r = api.get(f"/v1/sandboxes/{served}/ports/{HTTP_PORT}/big", query={"n": 20_000_000}, timeout=120)
    assert r.status == 200 and len(r.body) == 20_000_000, r.status


def test_websocket_upgrade_by_path(kilnd, served):
    ws = MiniWebSocket(kilnd.url, f"/v1/sandboxes/{served}/ports/{HTTP_PORT}/ws", kilnd.admin_key)
    assert ws.status == 101, ws.head
    try:
        for message in ("hello", "x" * 70000):
            ws.send(message)
            assert ws.recv() == message
        ws.send(b"\x00\x01binary")
        assert ws.recv() == b"\x00\x01binary"
    finally:
        ws.close()


def test_closed_port_bad_port_and_no_key(api, kilnd, served):
    r = api.get(f"/v1/sandboxes/{served}/ports/8999/")
    assert_error(r, 502, "port_closed")
    for bad in ("0", "65536", "http", "-1"):
        r = api.get(f"/v1/sandboxes/{served}/ports/{bad}/")
        assert_error(r, 400, "invalid_request")
        assert "path.port" in r.json()["error"]["message"], r
    r = Client(kilnd.url).get(f"/v1/sandboxes/{served}/ports/{HTTP_PORT}/echo")
    assert_error(r, 401, "unauthorized")
    # Another key sees no such sandbox.
    other = Client(kilnd.url, key=api.ok("POST", "/v1/keys", json={"name": "ports-other"})["secret"])
    assert_error(other.get(f"/v1/sandboxes/{served}/ports/{HTTP_PORT}/echo"), 404, "not_found")


def test_stopped_sandbox_is_409_and_paused_one_wakes(api, sandboxes):
    sb = sandboxes.create(autoWake=True)
    _serve(api, sb["id"])
    api.ok("POST", f"/v1/sandboxes/{sb['id']}:pause", headers={"Prefer": "wait=60"})
    assert api.ok("GET", f"/v1/sandboxes/{sb['id']}")["state"] == "paused"
    # The server was captured with the sandbox: it answers after the wake.
    r = api.get(f"/v1/sandboxes/{sb['id']}/ports/{HTTP_PORT}/echo", timeout=120)
    assert r.status == 200, r
    assert api.ok("GET", f"/v1/sandboxes/{sb['id']}")["state"] == "running"
    api.ok("POST", f"/v1/sandboxes/{sb['id']}:stop", headers={"Prefer": "wait=60"})
    assert_error(api.get(f"/v1/sandboxes/{sb['id']}/ports/{HTTP_PORT}/echo"), 409, "not_running")


# ---- HTTP by host name -----------------------------------------------------------------------


def test_by_host_name_with_a_key(kilnd, served):
    host = f"{HTTP_PORT}-{served}.localhost"
    status, _, body = _raw(kilnd, "GET", "/echo?q=1", [f"Authorization: Bearer {kilnd.admin_key}"], host=host)
    assert status == 200, body
    got = json.loads(body)
    assert got["path"] == "/echo?q=1"
    assert "Authorization" not in got["headers"]
    # Without a key or preview: nothing.
    status, _, body = _raw(kilnd, "GET", "/echo", host=host)
    assert status == 404 and b"has no preview" in body, body


def test_private_preview_tokens_rotation_and_delete(api, kilnd, served):
    p = api.ok("POST", f"/v1/sandboxes/{served}/previews", json={"port": HTTP_PORT})
    assert p["visibility"] == "private" and p["token"] and p["sandboxId"] == served
    host = f"{HTTP_PORT}-{served}.localhost"
    assert p["url"] == f"http://{host}:{urllib.parse.urlsplit(kilnd.url).port}/", p
    # The token in a header.
    status, _, body = _raw(kilnd, "GET", "/echo", [f"x-kiln-preview-token: {p['token']}"], host=host)
    assert status == 200, body
    assert "x-kiln-preview-token" not in {k.lower() for k in json.loads(body)["headers"]}
    # The reference's header name works too.
    status, _, _ = _raw(kilnd, "GET", "/echo", [f"x-runtime-preview-token: {p['token']}"], host=host)
    assert status == 200
    # urlWithToken: a redirect that turns the token into a cookie and drops it from the URL.
    target = p["urlWithToken"].split(host, 1)[1].split("/", 1)[1]
    status, hdrs, _ = _raw(kilnd, "GET", "/" + target, host=host)
    assert status == 302 and hdrs["location"] == "/", hdrs
    cookie = hdrs["set-cookie"].split(";")[0]
    assert "HttpOnly" in hdrs["set-cookie"]
    status, _, body = _raw(kilnd, "GET", "/echo", [f"Cookie: a=1; {cookie}"], host=host)
    assert status == 200, body
    assert json.loads(body)["headers"].get("Cookie") == "a=1", "the token cookie is not passed on"
    # No token, a wrong one: 401.
    assert _raw(kilnd, "GET", "/echo", host=host)[0] == 401
    assert _raw(kilnd, "GET", "/echo", ["x-kiln-preview-token: 9999999999999.00"], host=host)[0] == 401
    # A WebSocket through the preview's host name.
    ws = MiniWebSocket(kilnd.url, "/ws", None, headers=[f"x-kiln-preview-token: {p['token']}", f"Host: {host}"])
    assert ws.status == 101, ws.head
    ws.send("through a preview")
    assert ws.recv() == "through a preview"
    # Listed and got with a fresh token; rotate refuses every earlier token and cuts the socket.
    listed = api.ok("GET", f"/v1/sandboxes/{served}/previews")["data"]
    assert [x["port"] for x in listed] == [HTTP_PORT]
    got = api.ok("GET", f"/v1/sandboxes/{served}/previews/{HTTP_PORT}", query={"ttlSeconds": 120})
    assert got["id"] == p["id"] and got["token"]
    rotated = api.ok("POST", f"/v1/sandboxes/{served}/previews/{HTTP_PORT}:rotate", json={})
    # The relay was cut: the client's socket ends (a close frame never comes from a cut).
    ws.sock.settimeout(15)
    assert ws.sock.recv(65536) == b"", "a rotate cuts the preview's open connections"
    for old in (p["token"], got["token"]):
        assert _raw(kilnd, "GET", "/echo", [f"x-kiln-preview-token: {old}"], host=host)[0] == 401
    assert _raw(kilnd, "GET", "/echo", [f"x-kiln-preview-token: {rotated['token']}"], host=host)[0] == 200
    # PandaStack's preview_urls reads the shared ports through its own front.
    ps = api.ok("GET", f"/pandastack/v1/sandboxes/{served}/ports")
    assert ps == {"ports": [{"port": HTTP_PORT, "url": p["url"], "visibility": "private"}]}, ps
    gone = api.ok("DELETE", f"/v1/sandboxes/{served}/previews/{HTTP_PORT}")
    assert gone == {"id": p["id"], "sandboxId": served, "port": HTTP_PORT, "deleted": True}
    assert _raw(kilnd, "GET", "/echo", [f"x-kiln-preview-token: {rotated['token']}"], host=host)[0] == 404
    assert_error(api.get(f"/v1/sandboxes/{served}/previews/{HTTP_PORT}"), 404, "not_found")
    assert api.ok("GET", f"/pandastack/v1/sandboxes/{served}/ports") == {"ports": []}


def test_preview_bad_input_and_public_refused_without_the_flag(api, served):
    r = api.post(f"/v1/sandboxes/{served}/previews", json={"port": HTTP_PORT, "visibility": "public"})
    assert_error(r, 403, "forbidden")
    assert "--allow-public-previews" in r.json()["error"]["message"]
    for body, field in (({}, "body.port"), ({"port": 0}, "body.port"), ({"port": 70000}, "body.port"),
                        ({"port": 80, "visibility": "open"}, "body.visibility"),
                        ({"port": 80, "ttlSeconds": 5}, "body.ttlSeconds"),
                        ({"port": 80, "embedOrigins": ["https://x.example"]}, "body.embedOrigins")):
        r = api.post(f"/v1/sandboxes/{served}/previews", json=body)
        assert_error(r, 400, "invalid_request", mentions=[field])
    assert_error(api.get(f"/v1/sandboxes/{served}/previews/abc"), 400, "invalid_request")


def test_public_preview_with_the_flag(tmp_path):
    d = start_kilnd(tmp_path / "state", "--allow-public-previews", "--preview-domain", "kiln.test")
    try:
        api = Client(d.url, key=d.admin_key)
        sid = api.ok("POST", "/v1/sandboxes", json={})["id"]
        _serve(api, sid)
        p = api.ok("POST", f"/v1/sandboxes/{sid}/previews", json={"port": HTTP_PORT, "visibility": "public"})
        assert p["token"] is None and p["url"].startswith(f"http://{HTTP_PORT}-{sid}.kiln.test:")
        status, _, body = _raw(d, "GET", "/echo", host=f"{HTTP_PORT}-{sid}.kiln.test")
        assert status == 200, body
        # localhost is not this kilnd's domain: the request is an API request (no key: 401).
        assert _raw(d, "GET", "/echo", host=f"{HTTP_PORT}-{sid}.localhost")[0] == 401
        # Made private again: a token is needed.
        api.ok("POST", f"/v1/sandboxes/{sid}/previews", json={"port": HTTP_PORT, "visibility": "private"})
        assert _raw(d, "GET", "/echo", host=f"{HTTP_PORT}-{sid}.kiln.test")[0] == 401
    finally:
        stop_kilnd(d)


# ---- the tunnel ------------------------------------------------------------------------------


def _frame(kind, stream, payload=b""):
    return kind + struct.pack("!I", stream) + payload


def test_tunnel_streams_echo_and_close(kilnd, served):
    ws = MiniWebSocket(kilnd.url, f"/v1/sandboxes/{served}/tunnel", kilnd.admin_key)
    assert ws.status == 101, ws.head
    try:
        assert json.loads(ws.recv()) == {"type": "ready"}
        ws.send(_frame(b"o", 1, f"tcp {ECHO_PORT}".encode()))
        ws.send(_frame(b"o", 2, b"tcp 8999"))  # nothing listens
        ws.send(_frame(b"o", 3, b"udp 53"))
        events = {}
        while len(events) < 3:
            m = ws.recv()
            events.setdefault(struct.unpack("!I", m[1:5])[0], (m[:1], m[5:]))
        assert events[1] == (b"o", b"")
        assert events[2] == (b"c", b"closed")
        assert events[3][0] == b"c" and b"invalid" in events[3][1]
        data = bytes(range(256)) * 4096  # 1 MiB: needs credit frames to get through
        sent, got, credited = 0, b"", 0
        while len(got) < len(data):
            while sent < len(data) and sent - credited < 1 << 20:
                piece = data[sent:sent + 65536]
                ws.send(_frame(b"d", 1, piece))
                sent += len(piece)
            m = ws.recv()
            kind, stream = m[:1], struct.unpack("!I", m[1:5])[0]
            if kind == b"a":
                assert stream == 0
                credited = max(credited, struct.unpack("!Q", m[5:])[0])
            elif kind == b"d":
                assert stream == 1
                got += m[5:]
        assert got == data
        ws.send(_frame(b"e", 1))
        kinds = []
        while b"c" not in kinds:
            m = ws.recv()
            if m[:1] != b"a":
                kinds.append(m[:1])
        assert kinds == [b"e", b"c"], kinds
    finally:
        ws.close()


def test_tunnel_refusals(api, kilnd, served):
    r = api.get(f"/v1/sandboxes/{served}/tunnel")
    assert_error(r, 400, "invalid_request")
    ws = MiniWebSocket(kilnd.url, f"/v1/sandboxes/{served}/tunnel?port=0", kilnd.admin_key)
    assert ws.status == 400 and "query.port" in ws.body.decode(errors="replace") + ws.head, ws.head
    # ?port= restricts the tunnel to one port, and an empty open names it.
    ws = MiniWebSocket(kilnd.url, f"/v1/sandboxes/{served}/tunnel?port={ECHO_PORT}", kilnd.admin_key)
    try:
        assert json.loads(ws.recv()) == {"type": "ready"}
        ws.send(_frame(b"o", 7, f"tcp {HTTP_PORT}".encode()))
        m = ws.recv()
        assert m[:1] == b"c" and b"refused" in m[5:], m
        ws.send(_frame(b"o", 8))
        assert ws.recv()[:1] == b"o"
    finally:
        ws.close()


def test_connection_cap(tmp_path):
    d = start_kilnd(tmp_path / "state", "--max-port-connections", "2")
    try:
        api = Client(d.url, key=d.admin_key)
        sid = api.ok("POST", "/v1/sandboxes", json={})["id"]
        _serve(api, sid)
        ws = MiniWebSocket(d.url, f"/v1/sandboxes/{sid}/tunnel", d.admin_key)
        assert json.loads(ws.recv()) == {"type": "ready"}

        def open_stream(n):
            ws.send(_frame(b"o", n, f"tcp {ECHO_PORT}".encode()))
            m = ws.recv()
            assert struct.unpack("!I", m[1:5])[0] == n
            return m

        # The HTTP requests of _serve give their slots back as their handlers end, just
        # after their answers: the first two streams may wait for that.
        opened, n, deadline = [], 0, time.monotonic() + 10
        while len(opened) < 2:
            n += 1
            m = open_stream(n)
            if m[:1] == b"o":
                opened.append(n)
            else:
                assert b"--max-port-connections" in m and time.monotonic() < deadline, m
                time.sleep(0.05)
        m = open_stream(n + 1)
        assert m[:1] == b"c" and b"--max-port-connections" in m, m
        # HTTP too, while the two are open.
        assert_error(api.get(f"/v1/sandboxes/{sid}/ports/{HTTP_PORT}/echo"), 429, "too_many_streams")
        ws.send(_frame(b"c", opened[0]))
        deadline = time.monotonic() + 15
        while api.get(f"/v1/sandboxes/{sid}/ports/{HTTP_PORT}/echo").status != 200:
            assert time.monotonic() < deadline, "the closed stream's slot did not come back"
            time.sleep(0.1)
        ws.close()
    finally:
        stop_kilnd(d)


def _rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_a_flood_of_streams_hits_the_cap_not_memory(api, kilnd, served):
    """300 tunnel streams at once against the default cap of 256: the rest are refused at
    once, kilnd's memory stays bounded, and every slot comes back when the tunnel ends."""
    before = _rss_mib(kilnd.proc.pid)
    ws = MiniWebSocket(kilnd.url, f"/v1/sandboxes/{served}/tunnel", kilnd.admin_key)
    try:
        assert json.loads(ws.recv()) == {"type": "ready"}
        for n in range(1, 301):
            ws.send(_frame(b"o", n, f"tcp {ECHO_PORT}".encode()))
        answers = {}
        while len(answers) < 300:
            m = ws.recv(timeout=60)
            answers[struct.unpack("!I", m[1:5])[0]] = m
        opened = [n for n, m in answers.items() if m[:1] == b"o"]
        refused = [m for m in answers.values() if m[:1] == b"c"]
        assert len(opened) <= 256 and len(opened) + len(refused) == 300, (len(opened), len(refused))
        assert len(opened) >= 200, f"only {len(opened)} streams opened"
        other = [m for m in refused if b"--max-port-connections" not in m]
        assert not other, other[:3]
        # Every open stream carries bytes.
        for n in opened[:20]:
            ws.send(_frame(b"d", n, b"ping"))
        echoed = set()
        while len(echoed) < 20:
            m = ws.recv(timeout=60)
            if m[:1] == b"d":
                echoed.add(struct.unpack("!I", m[1:5])[0])
        grown = _rss_mib(kilnd.proc.pid) - before
        assert grown < 256, f"kilnd grew {grown:.0f} MiB for 256 streams"
    finally:
        ws.close()
    deadline = time.monotonic() + 30
    while api.get(f"/v1/sandboxes/{served}/ports/{HTTP_PORT}/echo").status != 200:
        assert time.monotonic() < deadline, "the slots did not come back after the tunnel ended"
        time.sleep(0.2)
