"""Tokens die with their key, and the sandbox plane tells strangers nothing (issue 42,
items 6 and 7): a key holder whose key was revoked tries every token and preview of its
sandboxes; a stranger enumerates E2B sandbox ids; a flood of host-routed requests from one
address. Real kilnds, real gVisor sandboxes; the server in the sandbox logs what reaches it
(reach_in.SEEN_SERVER), so "never seen" is checked, not assumed. Loopback only (127.0.0.x
sources for the per-address rate limit)."""
import json
import re
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from client import Client, assert_error
from conftest import start_kilnd, stop_kilnd

from reach_in import (  # noqa: F401  fixtures too
    HTTP_PORT,
    PUBLIC_PORT,
    ENVD,
    COOKIE,
    _http,
    _marker,
    _key,
    _e2b_create,
    _serve_logged,
    _assert_never_seen,
    _envd_stat,
    world,
    https_kilnd)

# ---- item 6: tokens die with their key -----------------------------------------------------------


@pytest.fixture(scope="module")
def revoked(https_kilnd):
    """Tenant T makes a sandbox with E2B's control plane (envd and traffic tokens), runs
    servers on 8000 (a private preview) and 8001 (a public preview); every credential is
    checked to work; then the admin revokes T's key."""
    d, admin = https_kilnd
    t = _key(admin, "reach-in-revoked")
    sid, envd, traffic = _e2b_create(d, t.secret)
    T = Client(d.url, key=t.secret)
    try:
        _serve_logged(T, sid, [HTTP_PORT, PUBLIC_PORT])
        private = T.ok("POST", f"/v1/sandboxes/{sid}/previews", json={"port": HTTP_PORT})
        public = T.ok("POST", f"/v1/sandboxes/{sid}/previews", json={"port": PUBLIC_PORT, "visibility": "public"})
        w = SimpleNamespace(d=d, admin=admin, sid=sid, envd=envd, traffic=traffic, token=private["token"],
                            host=f"{HTTP_PORT}-{sid}.localhost", public_host=f"{PUBLIC_PORT}-{sid}.localhost")
        # Before: each credential lets its holder in.
        assert _envd_stat(d, sid, [("X-Access-Token", envd)]).status == 200
        assert _envd_stat(d, sid, [("X-Access-Token", envd)], host=f"{ENVD}-{sid}.localhost").status == 200
        for what, ask, _, _ in _token_requests(w, "before"):
            r = ask()
            assert r.status in (200, 302), f"{what} before the revocation: {r!r}"
        # T's key goes.
        admin.ok("POST", f"/v1/keys/{t.id}:revoke", json={})
        assert_error(T.get(f"/v1/sandboxes/{sid}"), 401, "unauthorized")
        yield w
    finally:
        admin.request("DELETE", f"/v1/sandboxes/{sid}")


def _token_requests(w, tag):
    """(what, port, marker, request) of every token-borne way in."""
    out = []

    def add(what, port, fn):
        m = _marker(f"{tag}-" + re.sub(r"[^a-z]+", "-", what))
        out.append((what, lambda: fn(m), port, m))

    e2b = [("E2b-Sandbox-Id", w.sid), ("E2b-Sandbox-Port", str(HTTP_PORT))]
    add("traffic token by path", HTTP_PORT, lambda m: _http(
        w.d, "GET", f"/e2b/sandbox/echo/{m}", [*e2b, ("E2B-Traffic-Access-Token", w.traffic)]))
    add("traffic token by host", HTTP_PORT, lambda m: _http(
        w.d, "GET", f"/echo/{m}", [("E2B-Traffic-Access-Token", w.traffic)], host=w.host))
    add("envd token on a relayed port", HTTP_PORT, lambda m: _http(
        w.d, "GET", f"/e2b/sandbox/echo/{m}", [*e2b, ("X-Access-Token", w.envd)]))
    add("preview token header", HTTP_PORT, lambda m: _http(
        w.d, "GET", f"/echo/{m}", [("X-Kiln-Preview-Token", w.token)], host=w.host))
    add("preview runtime header", HTTP_PORT, lambda m: _http(
        w.d, "GET", f"/echo/{m}", [("X-Runtime-Preview-Token", w.token)], host=w.host))
    add("preview cookie", HTTP_PORT, lambda m: _http(
        w.d, "GET", f"/echo/{m}", [("Cookie", f"{COOKIE}={w.token}")], host=w.host))
    add("preview query POST", HTTP_PORT, lambda m: _http(
        w.d, "POST", f"/echo/{m}?{COOKIE}={w.token}", [], body=b"{}", host=w.host))
    add("preview query GET (urlWithToken)", HTTP_PORT, lambda m: _http(
        w.d, "GET", f"/echo/{m}?{COOKIE}={w.token}", [], host=w.host))
    add("public preview", PUBLIC_PORT, lambda m: _http(w.d, "GET", f"/echo/{m}", [], host=w.public_host))
    return out


def test_the_envd_token_dies_with_its_key(revoked):
    """Attack (item 6): a key is revoked (leaked, or its tenant is gone) but whoever holds
    its sandbox's envd access token keeps commanding the sandbox. Checks: after the
    revocation envd's X-Access-Token is refused (401 or 404) by path and by host name."""
    w = revoked
    for host in (None, f"{ENVD}-{w.sid}.localhost"):
        r = _envd_stat(w.d, w.sid, [("X-Access-Token", w.envd)], host=host)
        assert r.status in (401, 404), f"envd token after revoke ({host or 'by path'}): {r!r}"


def test_every_preview_and_traffic_token_dies_with_its_key(revoked):
    """Attack (item 6): after the key that made the sandbox is revoked, its holder (or
    anyone it shared with) still reaches the sandbox's ports with the traffic token, a
    private preview's token (header, cookie, query) or the public preview. Checks: each is
    refused with 401 or 404, a urlWithToken link no longer sets a cookie, and the server
    in the sandbox never saw any of these requests."""
    w = revoked
    seen = {HTTP_PORT: [], PUBLIC_PORT: []}
    for what, fn, port, m in _token_requests(w, "after"):
        r = fn()
        assert r.status in (401, 404), f"{what} after the key's revocation: {r!r}"
        assert r.header("Set-Cookie") is None, f"{what}: {r.headers}"
        seen[port].append(m)
    assert w.admin.sandbox(w.sid)["state"] == "running", "the check needs the servers up"
    for port, markers in seen.items():
        _assert_never_seen(w.admin, w.sid, port, markers)



# ---- item 7: E2B's plane tells no one which ids exist; host routes are rate limited ---------------


def _normalized(r, *ids):
    text = r.body.decode(errors="replace")
    for i in ids:
        text = text.replace(i, "ID")
    return r.status, text


@pytest.mark.parametrize("route", ["envd by path", "port by path", "envd by host"])
def test_e2b_plane_answers_a_missing_id_like_another_keys_sandbox(world, route):
    """Attack (item 7): a stranger, or another tenant's key, probes E2B's sandbox plane with
    ids to learn which sandboxes exist. Checks: without a valid credential (none, or a
    wrong access token) the answer is 401 and the same, byte for byte but for the id, for
    A's sandbox and a missing id; with B's key (kiln_ or e2b_ spelling) it is the same 404
    for both."""
    w = world
    missing = str(uuid.uuid4())
    port = HTTP_PORT if route == "port by path" else ENVD

    def ask(sid, creds):
        if route == "envd by host":
            return _envd_stat(w.d, sid, creds, host=f"{ENVD}-{sid}.localhost")
        return _http(w.d, "POST", "/e2b/sandbox/filesystem.Filesystem/Stat" if port == ENVD else "/e2b/sandbox/echo",
                     [("E2b-Sandbox-Id", sid), ("E2b-Sandbox-Port", str(port)),
                      ("Content-Type", "application/json"), *creds], b'{"path": "/tmp"}')

    wrong = "0" * len(w.envd)
    token_header = "X-Access-Token" if port == ENVD else "E2B-Traffic-Access-Token"
    for what, creds, expected in (("no credential", [], 401),
                                  ("a wrong access token", [(token_header, wrong)], 401),
                                  ("B's kiln key", [("Authorization", f"Bearer {w.b.secret}")], 404),
                                  ("B's e2b key", [("Authorization", f"Bearer {w.b.e2b}")], 404)):
        there, gone = ask(w.sid, creds), ask(missing, creds)
        assert there.status == expected, f"{route}, {what}, A's sandbox: {there!r}"
        assert _normalized(there, w.sid) == _normalized(gone, missing), \
            f"{route}, {what}: A's sandbox {there!r} vs a missing id {gone!r}"


@pytest.fixture(scope="module")
def limited():
    state = tempfile.mkdtemp(prefix="kiln-reach-rate-", dir="/tmp")
    d = start_kilnd(state, "--rate-limit", "1", "--rate-burst", "3")
    admin = Client(d.url, key=d.admin_key)  # admin keys are not limited
    try:
        sid, envd, traffic = _e2b_create(d, d.admin_key)
        _serve_logged(admin, sid, [HTTP_PORT])
        token = admin.ok("POST", f"/v1/sandboxes/{sid}/previews", json={"port": HTTP_PORT})["token"]
        yield SimpleNamespace(d=d, admin=admin, sid=sid, envd=envd, traffic=traffic, token=token,
                              host=f"{HTTP_PORT}-{sid}.localhost")
    finally:
        stop_kilnd(d)
        shutil.rmtree(state, ignore_errors=True)
        Path(state + ".log").unlink(missing_ok=True)  # a failed test's report holds its tail


def test_host_routed_requests_take_from_the_per_address_rate_limit(limited):
    """Attack (item 7): with a per-address rate limit on (--rate-limit 1 --rate-burst 3),
    one client floods a preview host, E2B's plane by path and by host name: 12 requests
    each, as fast as it can, each flood from its own loopback address. Checks: past the
    burst kilnd answers 429 (at most burst + elapsed x rate + 1 get through), and another
    address is still let in right after (the bucket is the address's)."""
    w = limited
    e2b = [("E2b-Sandbox-Id", w.sid), ("E2b-Sandbox-Port", str(HTTP_PORT))]
    floods = {
        "127.0.0.2": ("preview host", lambda src: _http(
            w.d, "GET", "/echo/flood", [("X-Kiln-Preview-Token", w.token)], host=w.host, source=src)),
        "127.0.0.3": ("E2B plane by path", lambda src: _http(
            w.d, "GET", "/e2b/sandbox/echo/flood", [*e2b, ("E2B-Traffic-Access-Token", w.traffic)], source=src)),
        "127.0.0.4": ("E2B plane by host", lambda src: _http(
            w.d, "GET", "/echo/flood", [("E2B-Traffic-Access-Token", w.traffic)], host=w.host, source=src)),
        "127.0.0.5": ("envd by host", lambda src: _http(
            w.d, "POST", "/filesystem.Filesystem/Stat",
            [("X-Access-Token", w.envd), ("Content-Type", "application/json")],
            b'{"path": "/tmp"}', host=f"{ENVD}-{w.sid}.localhost", source=src)),
    }
    for n, (src, (what, ask)) in enumerate(floods.items()):
        t0 = time.monotonic()
        statuses = [ask(src).status for _ in range(12)]
        elapsed = time.monotonic() - t0
        assert statuses[0] == 200, f"{what}: the first request was refused: {statuses}"
        passed = statuses.count(200)
        assert 429 in statuses, f"{what}: 12 requests in {elapsed:.1f} s, none rate limited: {statuses}"
        assert passed <= 3 + elapsed * 1 + 1, f"{what}: {passed} got through in {elapsed:.1f} s: {statuses}"
        assert set(statuses) <= {200, 429}, statuses
        # Another address has its own bucket.
        other = f"127.0.0.{20 + n}"
        assert ask(other).status == 200, f"{what}: a fresh address was refused after {src}'s flood"
