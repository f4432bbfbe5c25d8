"""The reach-in surfaces' credentials (issue 42, items 2, 5 and 8), each tried as its attacker
would: a tenant who visits another tenant's preview with its own key, the owner's and the
admin's keys on every relay, a page of another preview that sends the visitor's cookie, a
planted cookie, and a large body behind an Idempotency-Key.

Everything runs against real kilnds with real gVisor sandboxes. The server inside the
sandbox is port_server.py's handler (its /echo answers the headers it got) wrapped by
reach_in.SEEN_SERVER, which also appends each request line it parses, with its headers, to
/tmp/seen-PORT.log: a request kilnd refused must never be in that log, and an upgraded
(WebSocket) request's headers are read from it. Every loop is bounded in count and time;
waits poll with deadlines; only loopback addresses are used."""
import json
import re
import socket
import urllib.parse
import uuid

import pytest

from client import assert_error
from oci import layer

from reach_in import (  # noqa: F401  fixtures too
    HTTP_PORT,
    COOKIE,
    CREDENTIAL_HEADERS,
    _http,
    _marker,
    _assert_never_seen,
    _echo,
    _assert_clean,
    _assert_clean_headers,
    _logged_headers,
    world,
    _secrets,
    _preview_creds,
    _all_creds,
    _follow_url_with_token,
    https_kilnd)

# ---- item 2: no kiln or E2B credential passes into a sandbox ------------------------------------


def test_another_tenants_key_with_a_preview_token_never_reaches_the_sandbox(world):
    """Attack (issue 42 item 2): tenant A's server logs the headers it gets; tenant B visits
    A's private preview by host name with A's preview token and B's own `Authorization:
    Bearer kiln_...` (or its E2B spelling, or X-API-Key). Checks: B is let in by the token,
    and A's server sees neither B's key (in any spelling) nor the token, in a header or
    the cookie, while B's ordinary header and cookie pass."""
    w = world
    cases = {
        "token header + Bearer kiln_ key": [("Authorization", f"Bearer {w.b.secret}"),
                                            *_preview_creds(w)],
        "token header + Bearer e2b_ key": [("Authorization", f"Bearer {w.b.e2b}"), ("X-API-Key", w.b.e2b),
                                           ("X-Kiln-Preview-Token", w.token), ("X-App-Marker", "kept"),
                                           ("Cookie", "app=1")],
        "cookie + Bearer kiln_ key": [("Authorization", f"Bearer {w.b.secret}"), ("X-App-Marker", "kept"),
                                      ("Cookie", f"app=1; {COOKIE}={w.token}")],
        "daytona header + Bearer kiln_ key": [("Authorization", f"Bearer {w.b.secret}"),
                                              ("X-Daytona-Preview-Token", w.token),
                                              ("X-App-Marker", "kept"), ("Cookie", "app=1")],
        "runtime header + Bearer kiln_ key": [("Authorization", f"Bearer {w.b.secret}"),
                                              ("X-Runtime-Preview-Token", w.token),
                                              ("X-App-Marker", "kept"), ("Cookie", f"{COOKIE}={w.token}; app=1")],
    }
    for what, headers in cases.items():
        r = _http(w.d, "GET", f"/echo/{_marker('b-visit')}", headers, host=w.host)
        _assert_clean(r, _secrets(w), f"tenant B on A's preview ({what})")


def test_owner_and_admin_keys_never_reach_the_sandbox_on_any_relay(world):
    """Attack (item 2): the trainer (the sandbox's owner) or an operator (admin) opens the
    sandbox's port with its key, on the by-path route, the preview host name and E2B's
    sandbox plane (by path and by host name), while every other kiln/E2B credential rides
    along in its own header and the preview cookie. Checks: the policy's server inside
    sees none of them, whichever key it was."""
    w = world
    for who, key in (("owner", w.a.secret), ("owner (e2b_ spelling)", w.a.e2b), ("admin", w.d.admin_key)):
        auth = ("Authorization", f"Bearer {key}")
        if "e2b_" not in key:  # kiln's /v1 routes take kiln's spelling only
            r = _http(w.d, "GET", f"/v1/sandboxes/{w.sid}/ports/{HTTP_PORT}/echo/{_marker('path')}",
                      [auth, *_all_creds(w)])
            _assert_clean(r, _secrets(w), f"{who} by path")
            r = _http(w.d, "GET", f"/echo/{_marker('host')}", [auth, *_preview_creds(w)], host=w.host)
            _assert_clean(r, _secrets(w), f"{who} on the preview host")
        e2b = [("E2b-Sandbox-Id", w.sid), ("E2b-Sandbox-Port", str(HTTP_PORT))]
        r = _http(w.d, "GET", f"/e2b/sandbox/echo/{_marker('e2b')}", [*e2b, auth, *_preview_creds(w)])
        _assert_clean(r, _secrets(w), f"{who} on E2B's plane by path")
        r = _http(w.d, "GET", f"/echo/{_marker('e2b-host')}",
                  [("E2b-Sandbox-Id", w.sid), auth, *_preview_creds(w)], host=w.host)
        _assert_clean(r, _secrets(w), f"{who} on E2B's plane by host name")


def test_e2b_tokens_and_keys_never_reach_the_sandbox_on_e2b_plane(world):
    """Attack (item 2): a client of E2B's plane reaches a relayed (non-envd) port with the
    traffic token and also sends a kiln key (B's, in both spellings), X-API-Key, envd's
    X-Access-Token, the preview token headers and cookie. Checks: the server sees none of
    them, by path and by host name `{port}-{id}.localhost`."""
    w = world
    for who, key in (("B's kiln_ key", w.b.secret), ("B's e2b_ key", w.b.e2b)):
        creds = [("E2B-Traffic-Access-Token", w.traffic), ("X-Access-Token", w.envd),
                 ("Authorization", f"Bearer {key}"), *_preview_creds(w)]
        r = _http(w.d, "GET", f"/e2b/sandbox/echo/{_marker('e2b')}",
                  [("E2b-Sandbox-Id", w.sid), ("E2b-Sandbox-Port", str(HTTP_PORT)), *creds])
        _assert_clean(r, _secrets(w), f"E2B plane by path with {who}")
        r = _http(w.d, "GET", f"/echo/{_marker('e2b-host')}", creds, host=w.host)
        _assert_clean(r, _secrets(w), f"E2B plane by host name with {who}")


@pytest.mark.parametrize("app_auth", ["Basic dXNlcjpwYXNz", "Bearer app-token-1234"])
def test_the_apps_own_authorization_passes(world, app_auth):
    """The other side of item 2: the stripping must not break the app in the sandbox. A
    visitor let in by a preview token (header or cookie), or by E2B's traffic token, sends
    the app's own `Authorization` (Basic, or a Bearer token that is no kiln/E2B key).
    Checks: the server gets it unchanged, on the preview host and E2B's plane (by path and
    by host name), while the token itself is dropped."""
    w = world
    routes = {
        "preview, token header": (f"/echo/{_marker('app')}", [("X-Kiln-Preview-Token", w.token)], w.host),
        "preview, cookie": (f"/echo/{_marker('app')}", [("Cookie", f"app=1; {COOKIE}={w.token}")], w.host),
        "E2B plane by path": (f"/e2b/sandbox/echo/{_marker('app')}",
                              [("E2b-Sandbox-Id", w.sid), ("E2b-Sandbox-Port", str(HTTP_PORT)),
                               ("E2B-Traffic-Access-Token", w.traffic)], None),
        "E2B plane by host name": (f"/echo/{_marker('app')}", [("E2B-Traffic-Access-Token", w.traffic)], w.host),
    }
    dropped = []
    for what, (target, creds, host) in routes.items():
        r = _http(w.d, "GET", target, [*creds, ("Authorization", app_auth)], host=host)
        got, h = _echo(r)
        assert not [n for n in CREDENTIAL_HEADERS if n in h], f"{what}: {h}"
        assert COOKIE not in h.get("cookie", ""), f"{what}: {h}"
        if h.get("authorization") != app_auth:
            dropped.append(f"{what}: the server got Authorization {h.get('authorization')!r}")
    assert not dropped, f"the app's own Authorization: {app_auth} did not pass: {dropped}"


def _upgrade(d, target, headers, host=None):
    """A WebSocket upgrade; returns the answer's status (the socket is closed at once)."""
    u = urllib.parse.urlsplit(d.url)
    with socket.create_connection((u.hostname, u.port), timeout=30) as s:
        lines = [f"GET {target} HTTP/1.1", f"Host: {host or u.netloc}", "Upgrade: websocket",
                 "Connection: Upgrade", "Sec-WebSocket-Version: 13",
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", *[f"{k}: {v}" for k, v in headers]]
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
    return int(head.split(b" ")[1]) if head else 0, head


def test_websocket_upgrades_carry_no_credentials(world):
    """Attack (item 2) on the relayed WebSockets: the same credentials ride an Upgrade
    request through each relay (by path with the owner's key, the preview host with B's key
    and A's preview token, E2B's plane with the traffic token and B's key). Checks: each
    upgrades (101) and the server's log of that request holds no kiln/E2B credential, while
    the app's own header and cookie pass."""
    w = world
    e2b = [("E2b-Sandbox-Id", w.sid), ("E2b-Sandbox-Port", str(HTTP_PORT))]
    routes = {
        "by path, owner's key": (f"/v1/sandboxes/{w.sid}/ports/{HTTP_PORT}/ws",
                                 [("Authorization", f"Bearer {w.a.secret}"), *_all_creds(w)], None),
        "preview host, B's key and A's token": ("/ws", [("Authorization", f"Bearer {w.b.secret}"),
                                                        *_preview_creds(w)], w.host),
        "E2B plane by path, traffic token and B's key": (
            "/e2b/sandbox/ws", [*e2b, ("E2B-Traffic-Access-Token", w.traffic), ("X-Access-Token", w.envd),
                                ("Authorization", f"Bearer {w.b.e2b}"), *_preview_creds(w)], None),
        "E2B plane by host name, traffic token and B's key": (
            "/ws", [("E2B-Traffic-Access-Token", w.traffic), ("Authorization", f"Bearer {w.b.secret}"),
                    *_preview_creds(w)], w.host),
    }
    for what, (target, headers, host) in routes.items():
        m = _marker("ws")
        status, head = _upgrade(w.d, f"{target}?m={m}", headers, host)
        assert status == 101, f"{what}: {head[:300]!r}"
        got, h = _logged_headers(w.admin, w.sid, HTTP_PORT, m)
        _assert_clean_headers(h, got, _secrets(w), f"WebSocket {what}")
        assert h.get("x-app-marker") == "kept" and h.get("cookie") == "app=1", f"WebSocket {what}: {h}"



# ---- item 5: preview cookies ---------------------------------------------------------------------


def test_a_planted_junk_cookie_does_not_lock_the_visitor_out(world):
    """Attack (item 5): a page on another preview host of the same domain plants a junk
    `kiln_preview_token` cookie, which the browser sends before the visitor's real one.
    Checks: the visitor still gets in (every cookie of that name is tried, before or after
    the junk), a junk cookie alone is still 401, and neither cookie reaches the server."""
    w = world
    junk = "9999999999999.0000"
    for order in ([junk, w.token], [w.token, junk]):
        cookie = "; ".join([f"{COOKIE}={order[0]}", "app=1", f"{COOKIE}={order[1]}"])
        r = _http(w.d, "GET", f"/echo/{_marker('junk')}", [("Cookie", cookie), ("X-App-Marker", "kept")],
                  host=w.host)
        _assert_clean(r, _secrets(w) + [junk], f"cookies {order}")
    r = _http(w.d, "GET", "/echo/junk-only", [("Cookie", f"{COOKIE}={junk}")], host=w.host)
    assert r.status == 401, r


FETCH_CASES = [
    # (Sec-Fetch-Site, Sec-Fetch-Mode, method, expected status)
    ("same-site", "cors", "GET", 403),
    ("cross-site", "no-cors", "GET", 403),
    ("same-site", "no-cors", "POST", 403),
    ("cross-site", "navigate", "POST", 403),  # a form posted from another site
    ("same-site", "navigate", "GET", 200),  # a link followed from another preview
    ("cross-site", "navigate", "GET", 200),
    ("same-origin", "cors", "GET", 200),
    ("same-origin", "cors", "POST", 200),
    ("none", "navigate", "GET", 200),  # typed into the address bar
    (None, None, "GET", 200),  # curl: no Sec-Fetch-* at all
    (None, None, "POST", 200),
]


@pytest.mark.parametrize("site,mode,method,expected", FETCH_CASES,
                         ids=[f"{s}-{m}-{x}" for s, m, x, _ in FETCH_CASES])
def test_the_cookie_alone_does_not_let_another_sites_request_in(world, site, mode, method, expected):
    """Attack (item 5): every preview host is one site, so SameSite=Lax lets a page of one
    preview (or any site, for navigations) send requests to another preview with the
    visitor's cookie. Checks: a request let in by the cookie alone that the browser marks
    `Sec-Fetch-Site: same-site|cross-site` is 403 unless it is a top-level GET/HEAD
    navigation, and the refused request never reaches the server; same-origin, `none` and
    requests without Sec-Fetch-* (curl) get in."""
    w = world
    m = _marker("fetch")
    headers = [("Cookie", f"app=1; {COOKIE}={w.token}"), ("X-App-Marker", "kept")]
    if site:
        headers += [("Sec-Fetch-Site", site), ("Sec-Fetch-Mode", mode), ("Sec-Fetch-Dest", "empty")]
    r = _http(w.d, method, f"/echo/{m}", headers, body=b"{}" if method == "POST" else None, host=w.host)
    assert r.status == expected, f"{method} Sec-Fetch-Site {site} Mode {mode}: {r!r}"
    if expected == 403:
        _assert_never_seen(w.admin, w.sid, HTTP_PORT, [m])
    else:
        _assert_clean(r, _secrets(w), f"{method} {site} {mode}")


def test_a_token_header_from_another_site_still_works(world):
    """The other side of item 5: only the cookie is a browser's ambient credential. A
    request from another site's page that sends the token itself (x-kiln-preview-token, as
    a page's own script must) is let in."""
    w = world
    r = _http(w.d, "GET", f"/echo/{_marker('hdr')}",
              [("X-Kiln-Preview-Token", w.token), ("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "cors"),
               ("X-App-Marker", "kept"), ("Cookie", "app=1")], host=w.host)
    _assert_clean(r, _secrets(w), "token header from another site")


def test_a_cross_site_websocket_with_the_cookie_is_refused(world):
    """Attack (item 5, cross-site WebSocket hijacking): another preview's page opens a
    WebSocket to this preview; the browser sends the visitor's cookie with `Sec-Fetch-Site:
    same-site` (or cross-site), `Sec-Fetch-Mode: websocket`. Checks: 403 and the server
    never sees the upgrade; the same socket from the preview's own page (same-origin)
    upgrades (101)."""
    w = world
    m = _marker("ws")
    for site, expected in (("same-site", 403), ("cross-site", 403), ("same-origin", 101)):
        target = f"/ws?m={m}" if expected == 403 else "/ws"
        status, head = _upgrade(w.d, target, [("Cookie", f"{COOKIE}={w.token}"), ("Sec-Fetch-Site", site),
                                              ("Sec-Fetch-Mode", "websocket"), ("Sec-Fetch-Dest", "websocket")],
                                w.host)
        assert status == expected, f"WebSocket with Sec-Fetch-Site {site}: {head[:300]!r}"
    _assert_never_seen(w.admin, w.sid, HTTP_PORT, [m])



def test_the_cookie_over_http_is_not_secure(world):
    """Item 5, the plain side: behind kilnd's own http listener (no --preview-url), the
    cookie urlWithToken sets carries no `Secure` (a browser would drop it over http), but is
    HttpOnly."""
    cookie = _follow_url_with_token(world.d, world.preview)
    assert cookie.startswith(f"{COOKIE}={world.token};"), cookie
    assert "httponly" in cookie.lower(), cookie
    assert not re.search(r";\s*secure\b", cookie, re.I), cookie




def test_the_cookie_behind_an_https_preview_url_is_secure(https_kilnd):
    """Attack (item 5): behind an https preview URL (`--preview-url https:8443`), a token
    cookie without `Secure` would be sent over any plain-http request to that host name,
    where a network attacker reads it. Checks: urlWithToken is https on that port, and
    following it sets the cookie with `Secure` (and HttpOnly)."""
    d, admin = https_kilnd
    sid = admin.ok("POST", "/v1/sandboxes", json={})["id"]
    try:
        p = admin.ok("POST", f"/v1/sandboxes/{sid}/previews", json={"port": HTTP_PORT})
        assert p["url"] == f"https://{HTTP_PORT}-{sid}.localhost:8443/", p
        assert p["urlWithToken"].startswith(p["url"] + "?"), p
        cookie = _follow_url_with_token(d, p)
        assert cookie.startswith(f"{COOKIE}={p['token']};"), cookie
        assert re.search(r";\s*secure\b", cookie, re.I), f"no Secure behind https: {cookie}"
        assert "httponly" in cookie.lower(), cookie
    finally:
        admin.request("DELETE", f"/v1/sandboxes/{sid}")




# ---- item 8: a route's body cap holds with an Idempotency-Key ------------------------------------


def test_terminal_tickets_body_cap_holds_with_an_idempotency_key(world):
    """Attack (item 8): `POST /v1/sandboxes/{id}/terminal-tickets` takes a body of at most
    1 KiB; a key holder adds an `Idempotency-Key` so that kilnd's replay layer reads (and
    keeps) 64 KiB of it. The body is `{}` padded with JSON whitespace, a valid request but
    for its size. Checks: 413 payload_too_large with the key, as without it, and a small
    body with a key still gets its ticket (201)."""
    w = world
    big = b"{" + b" " * (64 * 1024) + b"}"
    path = f"/v1/sandboxes/{w.sid}/terminal-tickets"
    r = w.A.request("POST", path, data=big, headers={"Content-Type": "application/json",
                                                     "Idempotency-Key": "reach-in-" + uuid.uuid4().hex})
    assert_error(r, 413, "payload_too_large")
    r = w.A.request("POST", path, data=big, headers={"Content-Type": "application/json"})
    assert_error(r, 413, "payload_too_large")
    r = w.A.request("POST", path, data=b"{}", headers={"Content-Type": "application/json",
                                                       "Idempotency-Key": "reach-in-" + uuid.uuid4().hex})
    assert r.status == 201 and r.json()["ticket"] and r.json()["sandboxId"] == w.sid, r
