"""Snapshots of built images move between hosts (issue 16, item 1): the export sends the
image's layers as tars, the receiver stores each under the sha256 it computed of what it
received, flattens the root and restores on it with the server's memory intact. Layers the
receiver holds can be skipped; a skipped layer it lacks, or a layer whose bytes do not match
their digest, is refused and leaves nothing in the state directory or the image store."""
import hashlib
import json
import sys
import time
import uuid
from pathlib import Path

import pytest

from client import assert_error
from conftest import REPO
from counter_server import counter, start_counter
from test_images import build
from transfer_util import TAR, begin_import, entries, export, leftovers, retar, two_hosts


@pytest.fixture(scope="module")
def hosts(kilnd):
    yield from two_hosts(kilnd, "layers")


@pytest.fixture(scope="module")
def image_snap(hosts):
    """On A: an image built on the base (one RUN layer), a sandbox of it with a counter server
    at 2, snapshotted."""
    a, _, _ = hosts
    image, lines = build(a.client, name="travelling", recipe={
        "commands": ["mkdir -p /srv/app && echo built on A > /srv/app/built.txt"]})
    assert image["state"] == "ready", [line["text"] for line in lines[-20:]]
    sid = a.client.create(image=image["id"], vcpu=1, memoryMiB=512)["id"]
    try:
        start_counter(a.client, sid)
        assert counter(a.client, sid) == 1
        snap = a.client.ok("POST", f"/v1/sandboxes/{sid}:snapshot", json={"name": "image-travels"})
    finally:
        a.client.request("DELETE", f"/v1/sandboxes/{sid}")
    return {"image": image, "snap": snap, "tar": export(a.client, snap["id"])}


def store_listing(daemon):
    """The image store's layers and roots, and anything in its tmp/."""
    store = Path(daemon.state_dir) / "image-store"
    return {sub: sorted(p.name for p in (store / sub).iterdir()) for sub in ("layers", "roots", "tmp")}


def manifest_of(tar):
    items = entries(tar)
    assert items[0][0] == "kiln-snapshot.json"
    return items, json.loads(items[0][1])


def test_the_tar_carries_the_layer_named_by_its_sha256(hosts, image_snap):
    items, m = manifest_of(image_snap["tar"])
    assert m["record"]["image"] == image_snap["image"]["id"]
    base, layer = m["layers"]
    assert base == {"base": m["base"]}  # kiln's base never travels: the receiver has it
    assert layer["included"] is True
    sent = dict(items)[f"layers/{layer['sha256']}.tar"]
    assert len(sent) == layer["size"] and hashlib.sha256(sent).hexdigest() == layer["sha256"]
    assert [n for n, _ in items if n.startswith("layers/")] == [f"layers/{layer['sha256']}.tar"]
    # The layer's tar is the same bytes every time (its digest is its name).
    assert export(hosts[0].client, image_snap["snap"]["id"]) == image_snap["tar"]


def test_restored_on_b_with_the_image_and_the_servers_memory(hosts, image_snap):
    a, b, daemon_b = hosts
    _, m = manifest_of(image_snap["tar"])
    sha = m["layers"][1]["sha256"]
    r = b.client.request("POST", "/v1/snapshots:import", data=image_snap["tar"], headers=TAR, timeout=300)
    assert r.status == 201, r
    # The image A ran is provenance only (the sender chose it): never B's `image`.
    assert r.json()["sourceImage"] == image_snap["image"]["id"] and "image" not in r.json()
    assert sha in store_listing(daemon_b)["layers"]  # stored under the digest B computed
    assert store_listing(daemon_b)["tmp"] == []
    copy = b.client.create(snapshot=image_snap["snap"]["id"])
    try:
        assert copy["image"] is None
        assert b.client.sh(copy["id"], "cat /srv/app/built.txt") == "built on A\n"
        assert counter(b.client, copy["id"]) == 2  # A's server, still counting
    finally:
        b.client.request("DELETE", f"/v1/sandboxes/{copy['id']}")
    # B lists the layer as one an export for it may skip; the listing is the admin's.
    listed = {entry["sha256"] for entry in b.admin.ok("GET", "/v1/images:layers")["layers"]}
    assert sha in listed
    assert_error(b.client.get("/v1/images:layers"), 403, "forbidden")
    # A prune on B keeps what the imported snapshot stands on; B can export it again,
    # byte for byte the same layer.
    b.admin.ok("POST", "/v1/images:prune", json={})
    again = export(b.client, image_snap["snap"]["id"])
    _, m2 = manifest_of(again)
    assert m2["layers"] == m["layers"]
    assert dict(entries(again))[f"layers/{sha}.tar"] == dict(entries(image_snap["tar"]))[f"layers/{sha}.tar"]
    copy = b.client.create(snapshot=image_snap["snap"]["id"])
    assert counter(b.client, copy["id"]) == 2
    b.client.request("DELETE", f"/v1/sandboxes/{copy['id']}")


def test_skip_layers_leaves_them_out_and_b_uses_its_own(hosts, image_snap):
    a, b, daemon_b = hosts
    _, m = manifest_of(image_snap["tar"])
    sha = m["layers"][1]["sha256"]
    assert sha in store_listing(daemon_b)["layers"]  # from the test before
    lean = export(a.client, image_snap["snap"]["id"], query={"skipLayers": sha})
    items, lm = manifest_of(lean)
    assert lm["layers"][1] == {"sha256": sha, "size": m["layers"][1]["size"], "included": False}
    assert not [n for n, _ in items if n.startswith("layers/")]
    assert len(lean) < len(image_snap["tar"]) - m["layers"][1]["size"] + 1024
    lm["record"]["id"] = str(uuid.uuid4())
    r = b.client.request("POST", "/v1/snapshots:import", data=retar(items, lm), headers=TAR, timeout=300)
    assert r.status == 201, r
    copy = b.client.create(snapshot=lm["record"]["id"])
    try:
        assert b.client.sh(copy["id"], "cat /srv/app/built.txt") == "built on A\n"
        assert counter(b.client, copy["id"]) == 2
    finally:
        b.client.request("DELETE", f"/v1/sandboxes/{copy['id']}")
    b.client.ok("POST", f"/v1/snapshots/{lm['record']['id']}:delete", json={})
    assert_error(a.client.get(f"/v1/snapshots/{image_snap['snap']['id']}/archive",
                              query={"skipLayers": "abc"}), 400, "invalid_request", mentions=("skipLayers",))


def test_missing_and_corrupted_layers_are_refused_and_leave_nothing(hosts, image_snap):
    _, b, daemon_b = hosts
    items, m = manifest_of(image_snap["tar"])
    layer = m["layers"][1]
    entry = f"layers/{layer['sha256']}.tar"
    before = store_listing(daemon_b)

    def refused(body, status, code, mentions, snap_id):
        r = b.client.request("POST", "/v1/snapshots:import", data=body, headers=TAR, timeout=300)
        err = assert_error(r, status, code, mentions=mentions)
        assert leftovers(daemon_b, snap_id) == []
        assert store_listing(daemon_b) == before
        return err

    # A skipped layer this host does not hold: 409 naming it, before any byte is stored.
    fake = hashlib.sha256(b"no such layer").hexdigest()
    m1 = json.loads(json.dumps(m))
    m1["record"]["id"] = str(uuid.uuid4())
    m1["layers"][1] = {"sha256": fake, "size": 10, "included": False}
    err = refused(retar([i for i in items if i[0] != entry], m1), 409, "snapshot_incompatible",
                  ("skipLayers",), m1["record"]["id"])
    assert err["details"]["missingLayers"] == [fake]
    # A layer whose bytes are not the digest it is named by: refused, never stored.
    m2 = json.loads(json.dumps(m))
    m2["record"]["id"] = str(uuid.uuid4())
    data = bytearray(dict(items)[entry])
    data[len(data) // 2] ^= 0x01
    bad = [(n, bytes(data) if n == entry else d) for n, d in items]
    refused(retar(bad, m2), 400, "invalid_archive", (entry, "sha256"), m2["record"]["id"])
    # Content planted under another layer's digest (a layer B would trust): the same.
    m3 = json.loads(json.dumps(m))
    m3["record"]["id"] = str(uuid.uuid4())
    planted = [(n, d.replace(b"built on A", b"planted!!!") if n == entry else d) for n, d in items]
    refused(retar(planted, m3), 400, "invalid_archive", (entry, "sha256"), m3["record"]["id"])
    # A layer listed as included but absent from the tar.
    m4 = json.loads(json.dumps(m))
    m4["record"]["id"] = str(uuid.uuid4())
    refused(retar([i for i in items if i[0] != entry], m4), 400, "invalid_archive", (entry,),
            m4["record"]["id"])
    # An image named without its layers.
    m5 = json.loads(json.dumps(m))
    m5["record"]["id"] = str(uuid.uuid4())
    del m5["layers"]
    refused(retar([i for i in items if i[0] != entry], m5), 400, "invalid_archive", ("layers",),
            m5["record"]["id"])


def test_python_sdk_exports_only_what_the_receiver_lacks(hosts, image_snap, tmp_path):
    a, b, _ = hosts
    sys.path.insert(0, str(REPO / "sdk" / "python"))
    import kiln
    ra = kiln.Runtime(a.secret, a.daemon.url)
    rb = kiln.Runtime(b.secret, b.daemon.url)
    rb_admin = kiln.Runtime(b.daemon.admin_key, b.daemon.url)
    try:
        held = rb_admin.snapshots.layers()
        _, m = manifest_of(image_snap["tar"])
        assert m["layers"][1]["sha256"] in held
        path = ra.snapshots.export(image_snap["snap"]["id"], tmp_path / "lean.tar", skip_layers=held)
        items, lm = manifest_of(Path(path).read_bytes())
        assert lm["layers"][1]["included"] is False and not [n for n, _ in items if n.startswith("layers/")]
        with pytest.raises(kiln.errors.KilnError) as ei:
            rb.snapshots.layers()  # which layers a host holds is the admin's to know
        assert ei.value.code == "forbidden"
        # B may leave out only a layer it holds (its imported snapshot has it):
        # the lean tar imports as a second snapshot while the first is kept.
        items, lm = manifest_of(Path(path).read_bytes())
        lm["record"]["id"] = str(uuid.uuid4())
        lean = tmp_path / "lean2.tar"
        lean.write_bytes(retar(items, lm))
        second = rb.snapshots.import_(lean)
        assert second["id"] == lm["record"]["id"]
        with rb.sandboxes.create(snapshot=second["id"]) as copy:
            assert counter(b.client, copy.id) == 2
        rb.snapshots.delete(second["id"])
    finally:
        for r in (ra, rb, rb_admin):
            r.close()


def test_a_prune_during_an_import_collects_nothing(hosts, image_snap):
    """Last: what an import stores is in no record until it lists its snapshot, so while one
    is under way a prune keeps every layer and root; once it ended, unused ones go."""
    _, b, daemon_b = hosts
    items, m = manifest_of(image_snap["tar"])
    sha = m["layers"][1]["sha256"]
    b.client.ok("POST", f"/v1/snapshots/{image_snap['snap']['id']}:delete", json={})
    assert sha in store_listing(daemon_b)["layers"]  # now used by nothing
    m["record"]["id"] = str(uuid.uuid4())
    body = retar(items, m)
    s = begin_import(daemon_b, b.secret, body, len(body) // 2)
    try:
        partial = Path(daemon_b.state_dir) / "snapshots" / (m["record"]["id"] + ".import-partial")
        deadline = time.monotonic() + 60
        while not partial.exists() and not list((Path(daemon_b.state_dir) / "image-store/tmp").iterdir()):
            assert time.monotonic() < deadline, "the import never began"
            time.sleep(0.1)
        kept = b.admin.ok("POST", "/v1/images:prune", json={})
        assert kept["layersRemoved"] == 0 and kept["rootsRemoved"] == 0, kept
        assert sha in store_listing(daemon_b)["layers"]
    finally:
        s.close()
    deadline = time.monotonic() + 30
    while True:  # the import ends (its body cut short) and its layer store goes with it
        pruned = b.admin.ok("POST", "/v1/images:prune", json={})
        if pruned["layersRemoved"] >= 1:
            break
        assert time.monotonic() < deadline, pruned
        time.sleep(0.3)
    assert sha not in store_listing(daemon_b)["layers"]
    assert store_listing(daemon_b)["tmp"] == [] and leftovers(daemon_b, m["record"]["id"]) == []
