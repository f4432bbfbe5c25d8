"""Leases up to a day (issue 44, item 3) on every front, against real kilnds: kiln's
timeoutSeconds, E2B's timeout (the e2b SDK, as Harbor creates its sandboxes: a day) and
PandaStack's ttl_seconds take 86400 by default; --max-lease-seconds lowers that for all of
them, a longer ask is refused naming the front's own field, and an extend moves a lease at
most that far past now. Billing is as before: a lease is what a sandbox may run, metered as
it runs."""
import json
import time
import urllib.error
from datetime import datetime
import urllib.request

from client import Client
from e2b_clients import GROUP, e2b_env, e2b_key, e2b_python, run_python  # noqa: F401
from lib.kilnd import own_kilnd

DAY = 86400


def at(text):
    """Unix seconds of an RFC 3339 UTC time as kiln writes them."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def lease_s(info):
    """A kiln SandboxInfo's lease, seconds from its createdAt."""
    return at(info["expiresAt"]) - at(info["createdAt"])


def http(url, method, body, headers):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method=method,
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_every_front_takes_a_days_lease(api, kilnd):
    info = api.create(timeoutSeconds=DAY)
    try:
        assert info["timeoutSeconds"] == DAY and abs(lease_s(info) - DAY) < 5, info
    finally:
        api.delete(info["id"])
    r = api.request("POST", "/v1/sandboxes", json={"timeoutSeconds": DAY + 1})
    assert r.status == 400 and "body.timeoutSeconds" in r.body.decode(), r
    status, body = http(kilnd.url + "/pandastack/v1/sandboxes", "POST",
                        {"template": "base", "ttl_seconds": DAY},
                        {"Authorization": f"Bearer {api.key}"})
    assert status in (200, 201), body
    sid = body.get("id") or body.get("sandbox_id")
    try:
        assert api.sandbox(sid)["timeoutSeconds"] == DAY
    finally:
        api.delete(sid)
    status, body = http(kilnd.url + "/pandastack/v1/sandboxes", "POST",
                        {"template": "base", "ttl_seconds": DAY + 1},
                        {"Authorization": f"Bearer {api.key}"})
    assert status == 400 and "ttl_seconds" in json.dumps(body), body


@GROUP
def test_e2bs_sdk_creates_and_extends_a_days_lease(e2b_python, e2b_env, api):
    out = run_python(e2b_python, e2b_env, """
        from e2b import Sandbox
        s = Sandbox.create("base", timeout=86400)
        i = s.get_info()
        s.set_timeout(86400)
        j = s.get_info()
        out([s.sandbox_id, (i.end_at - i.started_at).total_seconds(),
             (j.end_at - j.started_at).total_seconds()])
    """)
    sid, first, extended = out
    try:
        assert abs(first - DAY) < 5, out
        assert DAY - 5 < extended < DAY + 60, out  # a day from the set_timeout
        assert api.sandbox(sid)["timeoutSeconds"] == DAY
    finally:
        api.request("DELETE", f"/v1/sandboxes/{sid}")


def test_an_operators_maximum_holds_on_every_front(tmp_path):
    with own_kilnd() as start:
        d = start("--max-lease-seconds", "7200")
        api = Client(d.url, key=d.admin_key)
        e2b_key = "e2b_" + d.admin_key[len("kiln_"):]
        r = api.request("POST", "/v1/sandboxes", json={"timeoutSeconds": 7201})
        assert r.status == 400 and "body.timeoutSeconds" in r.body.decode() and "7200" in r.body.decode(), r
        status, body = http(d.url + "/e2b/sandboxes", "POST",
                            {"templateID": "base", "timeout": 7201}, {"X-API-Key": e2b_key})
        assert status == 400 and "timeout" in body["message"] and "7200" in body["message"], body
        status, body = http(d.url + "/pandastack/v1/sandboxes", "POST",
                            {"template": "base", "ttl_seconds": 7201},
                            {"Authorization": f"Bearer {d.admin_key}"})
        assert status == 400, body
        info = api.create()  # the default lease fits under the maximum
        assert info["timeoutSeconds"] == 1800, info
        # An extend moves the lease at most the maximum past now.
        ext = api.ok("POST", f"/v1/sandboxes/{info['id']}:extend", json={"seconds": DAY})
        left = at(ext["expiresAt"]) - time.time()
        assert 7100 < left <= 7201, ext
        api.delete(info["id"])
