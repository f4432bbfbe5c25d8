"""Another tenant's ids on every route: key A owns a sandbox (a file, a
background process, a name and labels), a snapshot, an image and a registry
credential; key B (not admin) calls every operation of src/api/kiln/openapi.json
with A's ids in its path, query and body. Every answer naming A's resource
must be 404 (403 for admin-only routes), no answer may hold A's data, and
nothing of A's may change."""
import io
import json
import re
import secrets
import tarfile
import time
import urllib.parse

import pytest

from client import Client
from escape_common import escape_guard, marker  # noqa: F401 -- fixtures
from test_terminal import MiniWebSocket

METHODS = ("get", "put", "post", "delete", "patch")


class TenantA:
    pass


def _wait_image(client, image_id, within=180):
    deadline = time.monotonic() + within
    while True:
        info = client.ok("GET", f"/v1/images/{image_id}")
        if info["state"] in ("ready", "failed") or time.monotonic() > deadline:
            return info
        time.sleep(0.5)


@pytest.fixture(scope="module")
def tenants(api):
    key_a = api.ok("POST", "/v1/keys", json={"name": "escape-a"})
    key_b = api.ok("POST", "/v1/keys", json={"name": "escape-b"})
    a, b = Client(api.base_url, key=key_a["secret"]), Client(api.base_url, key=key_b["secret"])
    t = TenantA()
    t.key, t.client = key_a, a
    t.secret = "tenant-a-secret-" + secrets.token_hex(12)
    t.label = "a-" + secrets.token_hex(6)
    t.image_name = "escape-a-" + secrets.token_hex(4)
    image = a.ok("POST", "/v1/images", json={"name": t.image_name, "recipe": {
        "base": "base", "files": [{"path": "/opt/a.txt", "content": t.secret}]}})
    t.sandbox = a.create(vcpu=1, memoryMiB=256, name="tenant-a", labels={"owner": t.label})
    sid = t.sandbox["id"]
    a.write_file(sid, "/workspace/a.txt", t.secret.encode())
    t.process = a.spawn(sid, command="echo " + t.secret + "; sleep 900")
    t.snapshot = a.ok("POST", f"/v1/sandboxes/{sid}:snapshot", json={"name": "a-snap", "labels": {"o": t.label}})
    a.ok("POST", "/v1/images/registries",
         json={"registry": "a-registry.test", "username": "a-user", "password": t.secret})
    t.image = _wait_image(a, image["id"])
    assert t.image["state"] == "ready", t.image
    t.network = a.ok("GET", f"/v1/sandboxes/{sid}/network")
    t.before = a.sandbox(sid)
    yield t, b
    a.request("DELETE", f"/v1/sandboxes/{sid}")
    a.request("POST", f"/v1/snapshots/{t.snapshot['id']}:delete", json={})
    a.request("POST", f"/v1/images/{t.image['id']}:delete", json={})
    a.request("POST", "/v1/images/registries:delete", json={"registry": "a-registry.test"})
    for k in (key_a, key_b):
        api.request("POST", f"/v1/keys/{k['id']}:revoke", json={})


def _tar():
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w") as t:
        ti = tarfile.TarInfo("a.txt")
        ti.size = 6
        t.addfile(ti, io.BytesIO(b"pwned\n"))
    return b.getvalue()


class _Answer:
    def __init__(self, status, body):
        self.status, self.body = status, body


def _terminal(b, url):
    """The WebSocket route: refused before the upgrade (a 404), or upgraded
    and then an error frame and a close; answers (status, what it sent)."""
    target = url + "?" + urllib.parse.urlencode({"command": "cat /workspace/a.txt; sleep 5"})
    ws = MiniWebSocket(b.base_url, target, b.key)
    try:
        if ws.status != 101:
            return _Answer(ws.status, ws.body)
        sent = []
        while True:
            m = ws.recv(timeout=20)
            if m is None:
                break
            sent.append(m if isinstance(m, str) else m.decode("utf-8", "replace"))
        frames = [json.loads(x) for x in sent if x.startswith("{")]
        refused = (frames and frames[0].get("type") == "error"
                   and frames[0]["error"]["code"] == "not_found" and ws.close_code == 1008)
        return _Answer(404 if refused else 101, "\n".join(sent).encode())
    finally:
        ws.close()


def _call(b, t, method, path):
    """B's request for one operation, filled with A's ids. Returns
    (response, names_a_resource)."""
    sid, snap, image = t.sandbox["id"], t.snapshot["id"], t.image["id"]
    values = {"pid": t.process["id"], "name": t.image_name, "digest": "0" * 64,
              "a": "sandboxes", "b": sid, "c": "fs", "d": "x", "wid": "w1", "port": "8000",
              "alias": t.image_name, "hash": "0" * 64, "build": t.image["id"],
              "key": b.key,  # SandboxFusion's front: the caller's own key is in the path
              "sid": "s1", "cid": t.process["id"]}  # Daytona's sessions and their commands
    if path.startswith(("/v1/snapshots/{id}", "/pandastack/v1/snapshots/{id}", "/e2b/templates/{id}")):
        values["id"] = snap
    elif path.startswith(("/v1/images/{id}", "/daytona/snapshots/{id}")):  # Daytona: an image
        values["id"] = image
    elif path.startswith("/v1/keys/{id}"):
        values["id"] = t.key["id"]
    else:
        values["id"] = sid
    url = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path).replace("{path...}", "a/b")
    names_a = any(x in url for x in (sid, snap, image, t.key["id"], t.process["id"], t.image_name))
    query = {"path": "/workspace/a.txt", "ref": t.image_name, "sandboxId": sid, "sandbox_id": sid,
             "name": "tenant-a", "label": "owner", "groupBy": "label"}
    headers, body, data = {}, {}, None
    if method == "get":
        body = None
    if path.endswith("/terminal"):
        return _terminal(b, url), names_a
    bodies = {
        ("post", "/v1/sandboxes"): {"snapshot": snap},
        ("post", "/v1/sandboxes/{id}:extend"): {"seconds": 600},
        ("post", "/v1/sandboxes/{id}:exec"): {"command": "cat /workspace/a.txt"},
        ("post", "/v1/sandboxes/{id}/processes"): {"command": "cat /workspace/a.txt"},
        ("post", "/v1/sandboxes/{id}/processes/{pid}:write"): {"data": "x"},
        ("post", "/v1/sandboxes/{id}/processes/{pid}:signal"): {"signal": "SIGKILL"},
        ("post", "/v1/sandboxes/{id}/processes/{pid}:resize"): {"cols": 10, "rows": 10},
        ("post", "/v1/sandboxes/{id}/files:mkdir"): {"path": "/workspace/b"},
        ("post", "/v1/sandboxes/{id}/files:remove"): {"path": "/workspace/a.txt"},
        ("post", "/v1/sandboxes/{id}/files:rename"): {"from": "/workspace/a.txt", "to": "/workspace/c"},
        ("post", "/v1/sandboxes/{id}:fork"): {"count": 1},
        ("post", "/v1/sandboxes/{id}:update"): {"name": "stolen", "labels": {}},
        ("put", "/v1/sandboxes/{id}/network"): {"internet": True},
        ("post", "/v1/snapshots/{id}:pool"): {"size": 1},
        ("post", "/v1/images"): {"name": "b-image", "recipe": {"base": t.image_name}},
        ("post", "/v1/images/{id}:tag"): {"tag": "stolen"},
        ("post", "/v1/images/{id}:untag"): {"tag": "latest"},
        ("post", "/v1/images/{id}:pool"): {"size": 1},
        ("post", "/v1/images/registries:delete"): {"registry": "a-registry.test"},
        ("post", "/pandastack/v1/sandboxes"): {"template": t.image_name},
        ("post", "/pandastack/v1/sandboxes/{id}/exec"): {"cmd": "cat /workspace/a.txt"},
        ("post", "/pandastack/v1/sandboxes/{id}/exec/stream"): {"cmd": "cat /workspace/a.txt"},
        ("post", "/pandastack/v1/sandboxes/{id}/fork-tree"): {"count": 1},
        ("patch", "/pandastack/v1/sandboxes/{id}/lifecycle"): {"ttl_seconds": 3000},
        ("post", "/e2b/sandboxes"): {"templateID": snap},
        ("post", "/e2b/v2/sandboxes"): {"templateID": t.image_name},
        ("post", "/e2b/sandboxes/{id}/timeout"): {"timeout": 3000},
        ("post", "/e2b/sandboxes/{id}/fork"): {"count": 1},
        ("post", "/daytona/sandbox"): {"snapshot": t.image_name},
        ("post", "/daytona/snapshots"): {"name": "b-snap", "imageName": t.image_name},
        ("put", "/daytona/sandbox/{id}/labels"): {"labels": {"stolen": "yes"}},
        ("post", "/daytona/sandbox/{id}/network-settings"): {"networkBlockAll": False},
        ("post", "/daytona/toolbox/{id}/process/execute"): {"command": "cat /workspace/a.txt"},
        ("post", "/daytona/toolbox/{id}/process/code-run"): {
            "code": "print(open('/workspace/a.txt').read())", "language": "python"},
        ("post", "/daytona/toolbox/{id}/process/session"): {"sessionId": "s1"},
        ("post", "/daytona/toolbox/{id}/process/session/{sid}/exec"): {
            "command": "cat /workspace/a.txt"},
        ("post", "/daytona/toolbox/{id}/files/bulk-download"): {"paths": ["/workspace/a.txt"]},
    }
    body = bodies.get((method, path), body)
    if method == "put" and ("/files/" in path or "/fs" in path):
        body, data = None, (_tar() if path.endswith("/archive") else b"pwned\n")
    r = b.request(method.upper(), url, json=body, data=data, query=query, headers=headers, timeout=60)
    return r, names_a


def test_every_route_refuses_another_tenants_ids(api, tenants):
    t, b = tenants
    doc = api.ok("GET", "/v1/openapi.json")
    secrets_of_a = [t.secret, t.label, t.key["secret"]]
    ids_of_a = [t.sandbox["id"], t.snapshot["id"], t.image["id"], t.key["id"], "a-registry.test"]
    problems, seen = [], 0
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method not in item:
                continue
            seen += 1
            r, names_a = _call(b, t, method, path)
            name = f"{method.upper()} {path} -> {r.status} {r.body[:200]!r}"
            text = r.body.decode("utf-8", "replace")
            leaked = [s for s in secrets_of_a if s in text]
            if 200 <= r.status < 300:
                leaked += [s for s in ids_of_a if s in text]
            if leaked:
                problems.append(f"{name}: holds A's {leaked}")
            admin_only = path.startswith(("/v1/keys", "/metrics")) or path == "/v1/images:prune"
            if names_a and not (r.status == 404 or (admin_only and r.status == 403)
                                or (r.status == 501 and "{a}" in path)):
                problems.append(f"{name}: not refused")
            if r.status in (200, 201) and method == "post" and path in (
                    "/v1/sandboxes", "/pandastack/v1/sandboxes", "/e2b/sandboxes", "/e2b/v2/sandboxes"):
                problems.append(f"{name}: created from A's snapshot or image")
    assert seen >= 90, f"only {seen} operations in the document"
    assert not problems, "\n".join(problems)


def test_a_name_or_labels_of_a_give_b_nothing(api, tenants):
    t, b = tenants
    # getOrCreate by A's name makes B a sandbox of its own.
    mine = b.create(vcpu=1, memoryMiB=256, name="tenant-a", getOrCreate=True)
    try:
        assert mine["id"] != t.sandbox["id"] and not mine.get("reused"), mine
        assert b.sh(mine["id"], "cat /workspace/a.txt 2>&1; true") != t.secret
        for r in (b.get("/v1/sandboxes", query={"name": "tenant-a", "includeStopped": True}),
                  b.get("/v1/sandboxes", query={"label": f"owner:{t.label}"}),
                  b.get("/v1/snapshots", query={"sandboxId": t.sandbox["id"]}),
                  b.get("/v1/images", query={"name": t.image_name}),
                  b.get("/v1/images/registries"),
                  b.get("/v1/usage", query={"groupBy": "label", "label": "owner"}),
                  b.get("/pandastack/v1/sandboxes"), b.get("/pandastack/v1/templates"),
                  b.get("/e2b/v2/sandboxes"), b.get("/e2b/templates"), b.get("/e2b/snapshots")):
            assert r.status == 200, r
            text = r.body.decode()
            for s in (t.sandbox["id"], t.snapshot["id"], t.image["id"], t.label, "a-registry.test", t.image_name):
                assert s not in text, (s, r)
        r = b.post("/v1/sandboxes", json={"image": t.image["id"]})
        assert r.status == 404 and r.json()["error"]["code"] == "image_not_found", r
        r = b.post("/v1/sandboxes", json={"image": t.image_name})
        assert r.status == 404, r
    finally:
        b.request("DELETE", f"/v1/sandboxes/{mine['id']}")


def test_nothing_of_a_changed(tenants):
    t, _ = tenants
    a, sid = t.client, t.sandbox["id"]
    now = a.sandbox(sid)
    for k in ("state", "name", "labels", "expiresAt", "timeoutSeconds", "sudo", "persistent", "idlePauseSeconds"):
        assert now.get(k) == t.before.get(k), (k, t.before.get(k), now.get(k))
    assert now["state"] == "running"
    assert a.read_file(sid, "/workspace/a.txt").body == t.secret.encode()
    assert a.sh(sid, "ls /workspace") == "a.txt\n"
    assert a.process(sid, t.process["id"])["state"] == "running"
    assert a.ok("GET", f"/v1/sandboxes/{sid}/network")["version"] == t.network["version"]
    snap = a.ok("GET", f"/v1/snapshots/{t.snapshot['id']}")
    assert snap["state"] == "ready" and snap.get("pool", {}).get("size", 0) == 0, snap
    image = a.ok("GET", f"/v1/images/{t.image['id']}")
    assert (image["state"], image["tags"], image["pool"]["size"]) == ("ready", t.image["tags"], 0), image
    regs = a.ok("GET", "/v1/images/registries")["data"]
    assert [r["registry"] for r in regs] == ["a-registry.test"], regs
    # A's key still works (B's revoke was refused).
    assert len(a.ok("GET", "/v1/sandboxes")["data"]) == 1
