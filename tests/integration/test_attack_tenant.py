"""A tenant key as kiln's attacker: it chooses what a registry serves kilnd,
what it builds and what archives it imports, and kilnd turns that into host
paths, shared stores and connections. Every attack runs against a real
kilnd and a real registry on this machine's loopback (Debian's
docker-registry; crafted images pushed through its own API), or names
addresses that kilnd refuses before it connects: nothing leaves the machine.
A neighbour's exec median is printed during each (attacks.py)."""
import hashlib
import io
import json
import os
import subprocess
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from attacks import neighbour, rss_kib, under_attack  # noqa: F401 -- fixture
from client import Client, assert_error
from conftest import IMAGE_DIR, start_kilnd, stop_kilnd
from host import find_paths
from oci import Registry, image_config, layer
from test_images import build, context_tar, upload_context, wait_image
from transfer_util import TAR, entries, export, retar

# Alone, after the parallel part of make test (conftest.py: serial): it times a neighbour.
pytestmark = pytest.mark.serial

MiB = 1 << 20


@pytest.fixture(scope="module")
def registry():
    root = Path(tempfile.mkdtemp(prefix="kiln-registry-"))
    with Registry(root / "registry") as reg:
        yield reg


@pytest.fixture(scope="module")
def keys(api):
    """Two tenants' clients: A and B."""
    out = []
    for name in ("tenant-a", "tenant-b"):
        key = api.ok("POST", "/v1/keys", json={"name": name})
        out.append(Client(api.base_url, key=key["secret"]))
    return out


def layer_store(kilnd):
    return sorted(p.name for p in (Path(kilnd.state_dir) / "image-store" / "layers").iterdir())


# ---- 1. diff ids that would become host paths ---------------------------------------------------


@pytest.fixture(scope="module")
def stored_layer(registry, keys):
    """A layer tenant A pulled (so that the stored-layers shortcut applies to A's next pulls)."""
    a, _ = keys
    gz, diff = layer({"hello": b"from a real layer\n", "...json": b"{}"})
    ref = registry.push_raw("real", "1", image_config([diff]), [gz])
    image, lines = build(a, image=ref, name="real")
    assert image["state"] == "ready", [x["text"] for x in lines[-10:]]
    return {"gz": gz, "diff": diff}


CRAFTED = {
    "dotdot": (lambda d: image_config([d + "/.."]), "rootfs.diff_ids[0]"),
    "symlink-out": (lambda d: image_config([d + "/pwn"]), "rootfs.diff_ids[0]"),
    "not-a-string": (lambda d: image_config([42]), "rootfs.diff_ids[0]"),
    "rootfs-not-an-object": (lambda d: {**image_config([d]), "rootfs": "layers"}, "rootfs"),
    "no-diff-ids": (lambda d: {**image_config([d]), "rootfs": {"type": "layers"}}, "rootfs"),
    "other-algorithm": (lambda d: image_config(["sha512:" + d[7:]]), "rootfs.diff_ids[0]"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_config_is_refused_naming_its_field(api, kilnd, registry, keys, stored_layer,
                                                      neighbour, case):
    a, _ = keys
    craft, field = CRAFTED[case]
    ref = registry.push_raw(f"crafted-{case}", "1", craft(stored_layer["diff"]), [stored_layer["gz"]])
    before = layer_store(kilnd)
    image, lines = under_attack(api, kilnd, neighbour, f"crafted image config: {case}",
                                lambda: build(a, image=ref, name=f"crafted-{case}"))
    assert image["state"] == "failed", image
    assert field in image["error"]["message"], image["error"]
    assert image["error"]["code"] in ("invalid_image", "registry_error"), image["error"]
    assert layer_store(kilnd) == before  # nothing planted, nothing linked
    assert_error(a.post("/v1/sandboxes", json={"image": image["id"]}), 400, "invalid_request")


def test_a_layer_named_by_digest_alone_is_not_another_keys(api, kilnd, registry, keys, stored_layer,
                                                         neighbour):
    """B's registry names A's layer's diff id over a blob of its own: B does not hold that
    layer, so its blob is unpacked and checked, and the lie is refused."""
    _, b = keys
    junk, _ = layer({"hello": b"junk of b\n"})
    ref = registry.push_raw("borrowed", "1", image_config([stored_layer["diff"]]), [junk])
    image, lines = under_attack(api, kilnd, neighbour, "a config naming another key's layer",
                                lambda: build(b, image=ref, name="borrowed"))
    assert image["state"] == "failed", image
    text = json.dumps(image["error"]) + " ".join(x["text"] for x in lines)
    assert "diff" in text, text
    assert "every layer" not in text  # the stored-layers shortcut did not apply


# ---- 4. the build cache is per key --------------------------------------------------------------


def test_two_keys_building_the_same_dockerfile_share_no_layer(api, kilnd, keys, neighbour):
    a, b = keys
    dockerfile = ("FROM base\nUSER root\n"
                  "RUN sleep 4 && head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \\n' > /stamp\n")

    def a_builds_and_plants():
        image = a.ok("POST", "/v1/images", json={"name": "same", "dockerfile": dockerfile})
        # While A's RUN runs, A changes its own build sandbox: the layer it makes is A's word.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            boxes = [s for s in a.get("/v1/sandboxes").json()["data"]
                     if s["labels"].get("kiln.image") == image["id"] and s["state"] == "running"]
            if boxes:
                a.exec(boxes[0]["id"], command="echo planted-by-a > /planted", user="root")
                break
            time.sleep(0.1)
        return wait_image(a, image["id"])

    image_a, _ = under_attack(api, kilnd, neighbour, "plant a layer in one's own build",
                              a_builds_and_plants)
    assert image_a["state"] == "ready", image_a
    image_b, lines_b = build(b, name="same", dockerfile=dockerfile)
    assert image_b["state"] == "ready", image_b
    assert image_b["stepsRun"] >= 1, image_b  # B's RUN ran: nothing of A's cache
    sa = a.create(image=image_a["id"])["id"]
    sb = b.create(image=image_b["id"])["id"]
    try:
        assert a.sh(sa, "cat /planted") == "planted-by-a\n"
        assert b.exec(sb, command="test -e /planted")["exitCode"] != 0
        assert a.sh(sa, "cat /stamp") != b.sh(sb, "cat /stamp")
    finally:
        a.delete(sa)
        b.delete(sb)


# ---- 6, 12. imports ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def a_snapshot(keys):
    """Tenant A: an image of its own (one RUN layer) and a snapshot of a sandbox of it."""
    a, _ = keys
    image, lines = build(a, name="a-private", recipe={"commands": ["echo secret of a > /a.txt"]})
    assert image["state"] == "ready", [x["text"] for x in lines[-10:]]
    sid = a.create(image=image["id"], vcpu=1, memoryMiB=512)["id"]
    try:
        snap = a.ok("POST", f"/v1/sandboxes/{sid}:snapshot", json={"name": "a-snap"})
    finally:
        a.delete(sid)
    tar = export(a, snap["id"])
    items = entries(tar)
    manifest = json.loads(items[0][1])
    return {"image": image, "snap": snap, "tar": tar, "items": items, "manifest": manifest,
            "layer": manifest["layers"][1]["sha256"]}


def _lean(a_snapshot, a, skip):
    return export(a, a_snapshot["snap"]["id"], query={"skipLayers": skip})


def test_an_import_may_leave_out_only_layers_its_key_holds(api, kilnd, keys, a_snapshot, neighbour):
    a, b = keys
    lean = _lean(a_snapshot, a, a_snapshot["layer"])
    # B names A's layer: refused as a layer this host does not have for B.
    refused = under_attack(api, kilnd, neighbour, "import naming another key's layer",
                           lambda: b.request("POST", "/v1/snapshots:import", data=lean, headers=TAR,
                                             timeout=120))
    assert_error(refused, 409, "snapshot_incompatible")
    assert refused.json()["error"]["details"]["missingLayers"] == [a_snapshot["layer"]]
    # A digest nobody has reads exactly the same: the answer says nothing of what others hold.
    items, m = entries(lean), json.loads(entries(lean)[0][1])
    m["layers"][1]["sha256"] = hashlib.sha256(b"nobody's").hexdigest()
    m["record"]["id"] = str(uuid.uuid4())
    absent = b.request("POST", "/v1/snapshots:import", data=retar(items, m), headers=TAR, timeout=120)
    assert_error(absent, 409, "snapshot_incompatible")

    def shape(r):  # the answer without what differs by request: ids, the digest asked about
        err = dict(r.json()["error"])
        text = err.pop("message")
        err.pop("requestId")
        err["details"] = sorted(err["details"])
        return err, len(text)
    assert shape(absent) == shape(refused)
    # A, who holds the layer, may leave it out.
    m = json.loads(entries(lean)[0][1])
    m["record"]["id"] = str(uuid.uuid4())
    mine = a.request("POST", "/v1/snapshots:import", data=retar(entries(lean), m), headers=TAR,
                     timeout=120)
    assert mine.status == 201, mine
    a.ok("POST", f"/v1/snapshots/{m['record']['id']}:delete", json={})


def test_an_import_cannot_squat_another_keys_id_nor_claim_its_image(api, kilnd, keys, a_snapshot,
                                                                    neighbour):
    a, b = keys
    first = under_attack(api, kilnd, neighbour, "import another key's snapshot id",
                         lambda: b.request("POST", "/v1/snapshots:import", data=a_snapshot["tar"],
                                           headers=TAR, timeout=120))
    assert first.status == 201, first
    mine = first.json()
    assert mine["id"] != a_snapshot["snap"]["id"] and mine["sourceId"] == a_snapshot["snap"]["id"]
    assert mine["sourceImage"] == a_snapshot["image"]["id"]
    assert a.ok("GET", f"/v1/snapshots/{a_snapshot['snap']['id']}")["id"] == a_snapshot["snap"]["id"]
    again = b.request("POST", "/v1/snapshots:import", data=a_snapshot["tar"], headers=TAR, timeout=120)
    assert again.status == 200 and again.json()["id"] == mine["id"], again
    # B's copy runs B's root, and names no image of A's.
    sid = b.create(snapshot=mine["id"])["id"]
    try:
        assert b.sandbox(sid)["image"] is None
        assert b.sh(sid, "cat /a.txt") == "secret of a\n"  # the bytes B sent, nothing more
    finally:
        b.delete(sid)
    assert_error(b.get(f"/v1/images/{a_snapshot['image']['id']}"), 404, "image_not_found")
    b.ok("POST", f"/v1/snapshots/{mine['id']}:delete", json={})


@pytest.mark.parametrize("field,value", [("vcpu", 1024), ("memoryMiB", 1 << 20), ("diskMiB", 1),
                                         ("vcpu", 0)])
def test_an_imported_record_keeps_the_apis_bounds(keys, a_snapshot, field, value):
    _, b = keys
    m = json.loads(json.dumps(a_snapshot["manifest"]))
    m["record"][field] = value
    m["record"]["id"] = str(uuid.uuid4())
    r = b.request("POST", "/v1/snapshots:import", data=retar(a_snapshot["items"], m), headers=TAR,
                  timeout=120)
    assert_error(r, 400, "invalid_archive", [f"record.{field}"])


# ---- 11. registry pulls reach public registries only -------------------------------------------


class ClosedNetwork:
    """A network namespace whose only way out is a veth pair to this host (198.18.77.0/30, a
    benchmarking range): no default route, so an address off this machine is unreachable from
    it. kilnd runs in it and the test reaches its API over the pair; were kilnd's address checks
    broken, its dial would fail in the namespace instead of leaving the machine."""
    HOST, INSIDE = "198.18.77.1", "198.18.77.2"

    def __init__(self):
        tag = f"{os.getpid() % 100000}"
        self.name, self.host_if, self.ns_if = f"kiln-closed-{tag}", f"kcl{tag}h", f"kcl{tag}n"
        for argv in (["ip", "netns", "add", self.name],
                     ["ip", "-n", self.name, "link", "set", "lo", "up"],
                     ["ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if,
                      "netns", self.name],
                     ["ip", "addr", "add", f"{self.HOST}/30", "dev", self.host_if],
                     ["ip", "link", "set", self.host_if, "up"],
                     ["ip", "-n", self.name, "addr", "add", f"{self.INSIDE}/30", "dev", self.ns_if],
                     ["ip", "-n", self.name, "link", "set", self.ns_if, "up"]):
            subprocess.run(argv, check=True, capture_output=True)
        routes = subprocess.run(["ip", "-n", self.name, "route", "show", "default"], check=True,
                                capture_output=True, text=True).stdout
        assert routes.strip() == "", routes

    def close(self):
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


@pytest.fixture(scope="module")
def closed_kilnd(tmp_path_factory):
    """A kilnd that allows no registry (as a production one), in a ClosedNetwork, with test
    names for the addresses it must refuse: kilnd refuses each before it connects."""
    root = tmp_path_factory.mktemp("closed")
    names = root / "names"
    names.write_text("loopback.test 127.0.0.1\nintranet.test 10.255.0.1\n"
                     "metadata.test 169.254.169.254\nazure.test 168.63.129.16\n")
    net = ClosedNetwork()
    try:
        d = start_kilnd(root / "state", "--test-resolver-file", str(names), loopback_registries=False,
                        netns=net.name, address=net.INSIDE)
        try:
            yield d, Client(d.url, key=d.admin_key)
        finally:
            stop_kilnd(d)
    finally:
        net.close()


@pytest.mark.parametrize("host,category", [("loopback.test", "loopback"),
                                           ("intranet.test", "private"),
                                           ("metadata.test", "link-local"),
                                           ("azure.test", "metadata"),
                                           ("169.254.169.254", "link-local"),
                                           ("10.255.0.1", "private")])
def test_a_pull_reaches_no_internal_address(closed_kilnd, api, kilnd, neighbour, host, category):
    d, admin = closed_kilnd
    image, lines = under_attack(api, kilnd, neighbour, f"pull from {host}",
                                lambda: build(admin, image=f"{host}/app:1", name="ssrf"))
    assert image["state"] == "failed", image
    assert image["error"]["code"] == "registry_error", image["error"]
    assert category in image["error"]["message"] and "refused" in image["error"]["message"], image


def test_a_pull_of_a_loopback_registry_not_allowed_never_reaches_it(tmp_path, registry):
    """On the host's network, a kilnd that allows no registry: the pull names the tests'
    registry on 127.0.0.1, and the registry never hears of it."""
    d = start_kilnd(tmp_path / "state", loopback_registries=False)
    try:
        admin = Client(d.url, key=d.admin_key)
        gz, diff = layer({"x": b"x"})
        ref = registry.push_raw("never", "1", image_config([diff]), [gz])
        log = registry.root / "registry.log"
        before = log.read_text(errors="replace").count("/v2/never/")
        image, _ = build(admin, image=ref, name="never")
        assert image["state"] == "failed", image
        assert "loopback" in image["error"]["message"], image["error"]
        # skopeo ran in a network namespace of its own: its 127.0.0.1 is not the host's.
        assert log.read_text(errors="replace").count("/v2/never/") == before
    finally:
        stop_kilnd(d)


# ---- 7. image files are out of host users' reach ------------------------------------------------


def test_setuid_files_of_images_are_out_of_host_users_reach(kilnd, keys):
    a, _ = keys
    image, lines = build(a, name="suid", dockerfile="FROM base\nUSER root\n"
                                                    "RUN cp /bin/true /opt/kiln-suid && chmod 4755 /opt/kiln-suid\n")
    assert image["state"] == "ready", [x["text"] for x in lines[-10:]]
    found = find_paths(Path(kilnd.state_dir) / "image-store", lambda n: n == "kiln-suid")
    assert found, "the layer is not on the host"
    assert any(p.stat().st_mode & 0o4000 for p in found)  # the image keeps its setuid file ...
    for folder in (Path(kilnd.state_dir), IMAGE_DIR):
        assert folder.stat().st_mode & 0o777 == 0o700, folder
    # ... and no host user but root can reach it.
    for p in found[:2]:
        r = subprocess.run(["runuser", "-u", "nobody", "--", "test", "-e", str(p)], capture_output=True)
        assert r.returncode != 0, p


# ---- 8, 13. contexts, logs and archives that grow -----------------------------------------------


def test_build_contexts_are_per_key_and_bounded(tmp_path, keys):
    a, b = keys
    digest = upload_context(a, {"Dockerfile": b"FROM base\n", "f": b"a's file\n"})
    # B never uploaded it: missing for B, and B cannot build from A's bytes by naming them.
    assert b.ok("POST", "/v1/images/context/missing", json={"digests": [digest]})["missing"] == [digest]
    assert_error(b.post("/v1/images", json={"name": "x", "dockerfile": "FROM base\nCOPY f /f\n",
                                            "context": digest}), 400, "invalid_request", ["context"])
    # A digest that is a path is refused by name, never looked up.
    assert_error(b.post("/v1/images/context/missing", json={"digests": ["sha256:../../etc/passwd"]}),
                 400, "invalid_request", ["digests[0]"])
    # Past the key's quota: refused, nothing kept.
    d = start_kilnd(tmp_path / "state", "--context-storage-mib", "1")
    try:
        c = Client(d.url, key=d.admin_key)
        upload_context(c, {"a": os.urandom(700 * 1024)})
        digest2, blob = context_tar({"b": os.urandom(700 * 1024)})
        r = c.request("PUT", f"/v1/images/context/{digest2}", data=blob,
                      headers={"Content-Type": "application/gzip"})
        assert_error(r, 409, "quota_exceeded", ["context-storage-mib"])
    finally:
        stop_kilnd(d)


def test_a_build_log_flood_is_capped(api, kilnd, keys, neighbour):
    a, _ = keys
    rss_before = rss_kib(kilnd.proc.pid)
    image, lines = under_attack(api, kilnd, neighbour, "a build printing 48 MB",
                                lambda: build(a, name="loud", dockerfile="FROM base\n"
                                              "RUN yes kiln-build-log-flood | head -c 48000000\n"))
    assert image["state"] == "ready", image
    log = Path(kilnd.state_dir) / "image-store" / "logs" / f"{image['id']}.ndjson"
    assert log.stat().st_size <= 16 * MiB + 4096, log.stat().st_size
    assert "later lines are not kept" in log.read_text(errors="replace")[-400:]
    assert rss_kib(kilnd.proc.pid) - rss_before < 96 * 1024


class _Zeros:
    """A file of `size` zero bytes that is never in memory at once."""

    def __init__(self, size):
        self.left = size

    def read(self, n=-1):
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return bytes(n)


def test_add_of_an_archive_that_expands_without_end_is_bounded(keys):
    """A 1 MiB context whose ADD archive unpacks to 2 GiB, against maxImageMiB 512 (its
    least): the build fails naming the bound, without filling the host."""
    a, _ = keys
    bomb = io.BytesIO()
    with tarfile.open(fileobj=bomb, mode="w:gz", compresslevel=1) as t:
        info = tarfile.TarInfo("zeros")
        info.size = 2048 * MiB
        t.addfile(info, _Zeros(info.size))
    assert len(bomb.getvalue()) < 16 * MiB
    digest = upload_context(a, {"bomb.tar.gz": bomb.getvalue()})
    image, lines = build(a, name="bomb", dockerfile="FROM base\nADD bomb.tar.gz /x/\n", context=digest,
                         build={"maxImageMiB": 512})
    assert image["state"] == "failed", image
    assert "unpackedBytes" in json.dumps(image["error"]), image["error"]


# ---- 9, 13. pools, the daily limit, idempotency, downloads --------------------------------------


def test_only_the_admin_sizes_the_built_in_images_pool(api, keys):
    """The built-in image's pool holds room every key shares: a tenant may read it, only the
    admin sizes it."""
    a, _ = keys
    base = a.ok("GET", "/v1/images/resolve", query={"ref": "base"})
    assert base["source"] == "builtin", base
    before = api.ok("GET", f"/v1/images/{base['id']}")["pool"]
    assert_error(a.post(f"/v1/images/{base['id']}:pool", json={"size": 5}), 403, "forbidden",
                 ["built-in"])
    assert api.ok("GET", f"/v1/images/{base['id']}")["pool"]["size"] == before["size"]
    # The admin's call is not refused for the same reason (it may wait for the warm copy).
    r = api.post(f"/v1/images/{base['id']}:pool", json={"size": before["size"]})
    assert r.status == 200 or r.json()["error"]["code"] == "build_in_progress", r


def test_pool_copies_hold_capacity_and_give_it_to_a_waiting_create(tmp_path):
    d = start_kilnd(tmp_path / "state", "--host-memory-mib", "1024", "--memory-overcommit", "1")
    try:
        c = Client(d.url, key=d.admin_key, timeout=120)
        sid = c.create(vcpu=1, memoryMiB=256)["id"]
        snap = c.ok("POST", f"/v1/sandboxes/{sid}:snapshot", json={})
        c.delete(sid)
        c.ok("POST", f"/v1/snapshots/{snap['id']}:pool", json={"size": 8})
        deadline = time.monotonic() + 90
        while c.ok("GET", f"/v1/snapshots/{snap['id']}")["pool"]["ready"] < 4:
            assert time.monotonic() < deadline, "the pool did not fill the host"
            time.sleep(0.5)
        time.sleep(2)
        # Four copies of 256 MiB fill the 1 GiB budget: the pool asks for no more.
        assert c.ok("GET", f"/v1/snapshots/{snap['id']}")["pool"]["ready"] == 4
        metrics = c.get("/metrics").body.decode()
        assert "kiln_capacity_reserved_memory_mib 1024" in metrics, metrics
        # A create that does not wait is refused at once (the room is taken) ...
        assert_error(c.post("/v1/sandboxes", json={"vcpu": 1, "memoryMiB": 512}), 409, "no_capacity")
        # ... and one that waits (as the SDKs do) gets the room pooled copies give back.
        t0 = time.monotonic()
        r = c.request("POST", "/v1/sandboxes", json={"vcpu": 1, "memoryMiB": 512},
                      headers={"Prefer": "wait=30"})
        assert r.status in (200, 201) and r.json()["state"] == "running", r
        assert time.monotonic() - t0 < 30
        assert c.ok("GET", f"/v1/snapshots/{snap['id']}")["pool"]["ready"] <= 2
        c.delete(r.json()["id"])
    finally:
        stop_kilnd(d)


def test_an_auto_wake_counts_against_the_daily_limit(api):
    key = api.ok("POST", "/v1/keys", json={"name": "frugal", "dailyLimitMicros": 1})
    c = Client(api.base_url, key=key["secret"])
    sid = c.create(vcpu=1, memoryMiB=256)["id"]
    try:
        c.sh(sid, "head -c 20M /dev/urandom | sha256sum >/dev/null")
        c.ok("POST", f"/v1/sandboxes/{sid}:pause", json={})
        assert_error(c.post(f"/v1/sandboxes/{sid}:exec", json={"argv": ["true"]}), 402,
                     "spending_limit_reached")
        assert c.sandbox(sid)["state"] == "paused"
    finally:
        api.request("DELETE", f"/v1/sandboxes/{sid}")


def test_an_idempotency_key_does_not_read_a_tar_ahead(keys, a_snapshot):
    _, b = keys
    m = json.loads(json.dumps(a_snapshot["manifest"]))
    m["record"]["id"] = str(uuid.uuid4())
    body = retar(a_snapshot["items"], m)
    r = b.request("POST", "/v1/snapshots:import", data=body,
                  headers={**TAR, "Idempotency-Key": "import-once"}, timeout=120)
    assert r.status == 201, r
    b.ok("POST", f"/v1/snapshots/{m['record']['id']}:delete", json={})


def test_a_downloaded_folder_never_restores_setuid(bin_dir, api, tmp_path):
    sid = api.create(vcpu=1, memoryMiB=256)["id"]
    try:
        api.sh(sid, "mkdir -p /tmp/out && cp /bin/true /tmp/out/t && sudo chown root /tmp/out/t && "
                    "sudo chmod 6755 /tmp/out/t")
        env = dict(os.environ, KILN_API_URL=api.base_url, KILN_API_KEY=api.key)
        r = subprocess.run([str(bin_dir / "kiln"), "sandbox", "cp", f"{sid}:/tmp/out", str(tmp_path / "got")],
                           capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        mode = (tmp_path / "got" / "t").stat().st_mode
        assert mode & 0o6000 == 0, oct(mode)
    finally:
        api.request("DELETE", f"/v1/sandboxes/{sid}")
