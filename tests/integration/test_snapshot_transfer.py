"""Snapshots that move between hosts (issue 16, item 1): GET /v1/snapshots/{id}/archive on
one kilnd, POST /v1/snapshots:import on another with its own state directory. A server
holding a counter in memory keeps counting on the second host; every way a tar can be
wrong is refused with its reason and leaves nothing in the state directory."""
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from client import Client, assert_error
from conftest import REPO, start_kilnd, stop_kilnd
from counter_server import counter, start_counter
from transfer_util import POLICY, TAR, Host, begin_import, entries, export, leftovers, retar, two_hosts

sys.path.insert(0, str(REPO / "sdk" / "python"))
import kiln  # noqa: E402

@pytest.fixture(scope="module")
def hosts(kilnd):
    yield from two_hosts(kilnd, "transfer")


@pytest.fixture(scope="module")
def moved(hosts):
    """On A: a sandbox with a file and a server at counter 2, snapshotted and exported; the
    tar imported on B by B's key."""
    a, b, _ = hosts
    src = a.client.create(vcpu=1, memoryMiB=512, network=POLICY)["id"]
    try:
        a.client.sh(src, "echo moved > /workspace/moved.txt")
        start_counter(a.client, src)
        assert counter(a.client, src) == 1  # the probe took 0
        snap = a.client.ok("POST", f"/v1/sandboxes/{src}:snapshot",
                           json={"name": "travels", "labels": {"t": "transfer"}, "retentionDays": 3})
    finally:
        a.client.request("DELETE", f"/v1/sandboxes/{src}")
    tar = export(a.client, snap["id"])
    t0 = time.monotonic()
    r = b.client.request("POST", "/v1/snapshots:import", data=tar, headers=TAR, timeout=300)
    assert r.status == 201, r
    yield {"snap": snap, "tar": tar, "imported": r.json(), "import_s": time.monotonic() - t0}
    a.client.request("POST", f"/v1/snapshots/{snap['id']}:delete", json={})
    try:
        b.client.request("POST", f"/v1/snapshots/{snap['id']}:delete", json={})
    except OSError:
        pass  # B was restarted on another port (the last test); its state dir goes with it


def test_the_tar_lists_every_file_with_its_checksum(moved):
    items = entries(moved["tar"])
    assert items[0][0] == "kiln-snapshot.json"
    manifest = json.loads(items[0][1])
    assert manifest["format"] == "kiln-snapshot/1"
    assert manifest["record"]["id"] == moved["snap"]["id"]
    assert manifest["engine"] and manifest["base"].startswith("base-")
    names = [n for n, _ in items[1:]]
    assert sorted(names) == sorted(manifest["files"]) and "checkpoint/pages.img" in names
    for name, data in items[1:]:
        assert manifest["files"][name]["size"] == len(data)
        assert len(manifest["files"][name]["xxh3_128"]) == 32


def test_restored_on_b_the_server_keeps_counting(hosts, moved):
    a, b, daemon_b = hosts
    snap, got = moved["snap"], moved["imported"]
    assert got["id"] == snap["id"] and got["name"] == "travels" and got["labels"] == {"t": "transfer"}
    assert got["network"] == POLICY and got["retentionDays"] == 3 and got["shape"] == snap["shape"]
    assert got["sizeBytes"] > 0
    # Owned by B's key: listed for it, 404 for another key of B, recorded as its owner.
    assert snap["id"] in [s["id"] for s in b.client.ok("GET", "/v1/snapshots")["data"]]
    other = Host(daemon_b, "transfer-b-other")
    assert_error(other.client.get(f"/v1/snapshots/{snap['id']}"), 404, "snapshot_not_found")
    manifest = json.loads((Path(daemon_b.state_dir) / "snapshots" / snap["id"] / "manifest.json").read_text())
    assert manifest["record"]["owner"] == b.key_id
    # Its storage is metered to B's key (which has nothing else), like a snapshot it took.
    time.sleep(1)
    assert b.client.ok("GET", "/v1/usage")["total"]["gbMonths"] > 0
    for _ in range(2):  # each copy starts from the snapshot's state
        copy = b.client.create(snapshot=snap["id"])
        try:
            assert copy["state"] == "running" and copy["network"] == POLICY
            assert counter(b.client, copy["id"]) == 2
            assert counter(b.client, copy["id"]) == 3
            assert b.client.read_file(copy["id"], "/workspace/moved.txt").body == b"moved\n"
        finally:
            b.client.request("DELETE", f"/v1/sandboxes/{copy['id']}")


def test_reimport_is_idempotent_and_another_key_gets_its_own_id(hosts, moved):
    """A key cannot squat an id it merely has the tar of: another key importing the same tar
    gets a snapshot of its own under a new id, with the sender's id as sourceId, and its
    import again finds that one. The first key's snapshot is untouched."""
    _, b, daemon_b = hosts
    snap_id = moved["snap"]["id"]
    r = b.client.request("POST", "/v1/snapshots:import", data=moved["tar"], headers=TAR, timeout=300)
    assert r.status == 200, r
    assert r.json()["id"] == snap_id
    other = Host(daemon_b, "transfer-b-conflict")
    r = other.client.request("POST", "/v1/snapshots:import", data=moved["tar"], headers=TAR, timeout=300)
    assert r.status == 201, r
    theirs = r.json()
    assert theirs["id"] != snap_id and theirs["sourceId"] == snap_id
    again = other.client.request("POST", "/v1/snapshots:import", data=moved["tar"], headers=TAR, timeout=300)
    assert again.status == 200 and again.json()["id"] == theirs["id"], again
    assert b.client.ok("GET", f"/v1/snapshots/{snap_id}")["id"] == snap_id
    assert_error(other.client.get(f"/v1/snapshots/{snap_id}"), 404, "snapshot_not_found")
    assert leftovers(daemon_b, snap_id) == [snap_id]
    other.client.ok("POST", f"/v1/snapshots/{theirs['id']}:delete", json={})


def test_another_key_cannot_export(hosts, moved):
    a, _, _ = hosts
    other = Host(a.daemon, "transfer-a-other")
    assert_error(other.client.get(f"/v1/snapshots/{moved['snap']['id']}/archive"), 404, "snapshot_not_found")


def test_bad_tars_are_refused_and_leave_nothing(hosts, moved):
    _, b, daemon_b = hosts
    items = entries(moved["tar"])
    manifest = json.loads(items[0][1])

    def fresh(**changes):
        """The same snapshot under a new id (nothing of it on B), manifest changed."""
        m = json.loads(json.dumps(manifest))
        m["record"]["id"] = str(uuid.uuid4())
        for k, v in changes.items():
            m[k] = v
        return m

    def refused(body, status, code, mentions, m, headers=TAR):
        r = b.client.request("POST", "/v1/snapshots:import", data=body, headers=headers, timeout=300)
        assert_error(r, status, code, mentions=mentions)
        assert leftovers(daemon_b, m["record"]["id"]) == [], m["record"]["id"]
        assert_error(b.client.get(f"/v1/snapshots/{m['record']['id']}"), 404, "snapshot_not_found")

    m = fresh()
    whole = retar(items, m)
    refused(whole[: len(whole) // 2], 400, "invalid_archive", ("truncated",), m)
    pages = [i for i, (n, _) in enumerate(items) if n == "checkpoint/pages.img"][0]
    data = bytearray(items[pages][1])
    data[len(data) // 2] ^= 0x01
    flipped = items[:pages] + [("checkpoint/pages.img", bytes(data))] + items[pages + 1:]
    refused(retar(flipped, m), 400, "invalid_archive", ("checkpoint/pages.img", "xxh3_128"), m)
    refused(retar(items + [("checkpoint/extra.img", b"x")], m), 400, "invalid_archive",
            ("checkpoint/extra.img", "not listed"), m)
    refused(retar(items[:pages] + items[pages + 1:], m), 400, "invalid_archive",
            ("checkpoint/pages.img",), m)
    refused(os.urandom(70000), 400, "invalid_archive", ("not a tar",), m)
    refused(whole, 400, "invalid_request", ("Content-Type",), m, headers={"Content-Type": "application/json"})
    m = fresh(engine="v0.0.0-19990101000000-000000000000")
    refused(retar(items, m), 409, "snapshot_incompatible", ("runsc", manifest["engine"]), m)
    m = fresh(base="base-00000000deadbeef")
    refused(retar(items, m), 409, "snapshot_incompatible", ("base image", manifest["base"]), m)
    m = fresh(format="kiln-snapshot/9")
    refused(retar(items, m), 400, "invalid_archive", ("format",), m)
    # The good tar under the fresh id goes in, and away again.
    m = fresh()
    r = b.client.request("POST", "/v1/snapshots:import", data=retar(items, m), headers=TAR, timeout=300)
    assert r.status == 201, r
    b.client.ok("POST", f"/v1/snapshots/{m['record']['id']}:delete", json={})
    assert leftovers(daemon_b, m["record"]["id"]) == []


def test_a_disk_snapshot_moves_and_boots_fresh_on_b(hosts):
    a, b, daemon_b = hosts
    src = a.client.create(vcpu=1, memoryMiB=512)["id"]
    try:
        a.client.sh(src, "echo on-disk > /workspace/d.txt && rm /workspace/.bashrc 2>/dev/null; true")
        a.client.spawn(src, argv=["sleep", "100000"])
        snap = a.client.ok("POST", f"/v1/sandboxes/{src}:snapshot", json={"mode": "disk"})
    finally:
        a.client.request("DELETE", f"/v1/sandboxes/{src}")
    tar = export(a.client, snap["id"])
    items = entries(tar)
    manifest = json.loads(items[0][1])
    assert manifest["record"]["mode"] == "disk" and "runAs" not in manifest["record"], manifest["record"]
    assert sorted(manifest["files"]) == ["checkpoint/rootfs-upper.tar"], manifest["files"]
    # A disk snapshot is its upper tar alone: anything else is refused by name.
    extra = json.loads(json.dumps(manifest))
    extra["record"]["id"] = str(uuid.uuid4())
    extra["files"]["checkpoint/pages.img"] = {"size": 1, "xxh3_128": "0" * 32}
    r = b.client.request("POST", "/v1/snapshots:import", data=retar(items + [("checkpoint/pages.img", b"x")], extra),
                         headers=TAR, timeout=300)
    assert_error(r, 400, "invalid_archive", mentions=("rootfs-upper.tar",))
    assert leftovers(daemon_b, extra["record"]["id"]) == []
    bad = json.loads(json.dumps(manifest))
    bad["record"]["id"] = str(uuid.uuid4())
    bad["record"]["mode"] = "swap"
    r = b.client.request("POST", "/v1/snapshots:import", data=retar(items, bad), headers=TAR, timeout=300)
    assert_error(r, 400, "invalid_archive", mentions=("record.mode",))
    r = b.client.request("POST", "/v1/snapshots:import", data=tar, headers=TAR, timeout=300)
    assert r.status == 201, r
    try:
        assert r.json()["mode"] == "disk", r.json()
        copy = b.client.create(snapshot=snap["id"], memoryMiB=1024)["id"]
        try:
            assert b.client.sh(copy, "cat /workspace/d.txt; id -un") == "on-disk\nuser\n"
            assert b.client.exec(copy, command="pgrep -x sleep")["exitCode"] == 1
        finally:
            b.client.request("DELETE", f"/v1/sandboxes/{copy}")
    finally:
        a.client.request("POST", f"/v1/snapshots/{snap['id']}:delete", json={})
        b.client.request("POST", f"/v1/snapshots/{snap['id']}:delete", json={})


def test_cli_export_and_import(hosts, moved, tmp_path):
    a, b, daemon_b = hosts
    snap_id = moved["snap"]["id"]
    kiln_bin = Path(os.environ.get("KILN_BIN_DIR") or REPO / "build" / "bin") / "kiln"

    def run(host, *args):
        env = {**os.environ, "KILN_API_URL": host.daemon.url, "KILN_API_KEY": host.secret}
        return subprocess.run([str(kiln_bin), *args], env=env, capture_output=True, text=True, timeout=300)

    out = tmp_path / "snap.tar"
    p = run(a, "snapshot", "export", snap_id, "-o", str(out))
    assert p.returncode == 0, p
    assert entries(out.read_bytes())[0][0] == "kiln-snapshot.json"
    b.client.ok("POST", f"/v1/snapshots/{snap_id}:delete", json={})
    p = run(b, "snapshot", "import", str(out))
    assert p.returncode == 0, p
    assert p.stdout.strip() == snap_id
    assert b.client.ok("GET", f"/v1/snapshots/{snap_id}")["name"] == "travels"
    p = run(b, "snapshot", "export", snap_id)  # -o is required
    assert p.returncode != 0 and "output" in p.stderr, p
    p = run(a, "snapshot", "export", "00000000-0000-4000-8000-000000000000", "-o", str(tmp_path / "x.tar"))
    assert p.returncode != 0 and "snapshot_not_found" in p.stderr + p.stdout, p
    assert not (tmp_path / "x.tar").exists() and not list(tmp_path.glob("x.tar*"))


def test_python_sdk_round_trip(hosts, moved, tmp_path):
    a, b, _ = hosts
    snap_id = moved["snap"]["id"]
    ra = kiln.Runtime(a.secret, a.daemon.url)
    rb = kiln.Runtime(b.secret, b.daemon.url)
    path = ra.snapshots.export(snap_id, tmp_path / "sdk.tar")
    assert Path(path).stat().st_size == len(moved["tar"])
    rb.snapshots.delete(snap_id)
    got = rb.snapshots.import_(path)
    assert got["id"] == snap_id and got["labels"] == {"t": "transfer"}
    assert rb.snapshots.import_(path)["id"] == snap_id  # again: the same record
    with pytest.raises(kiln.errors.NotFoundError):
        ra.snapshots.export("00000000-0000-4000-8000-000000000000", tmp_path / "none.tar")
    assert not list(tmp_path.glob("none.tar*")) and not list(tmp_path.glob(".kiln-partial-*"))
    with pytest.raises(kiln.errors.KilnError) as ei:
        bad = tmp_path / "bad.tar"
        bad.write_bytes(moved["tar"][:-5000])
        rb.snapshots.import_(bad)
    assert ei.value.code == "invalid_archive"
    ra.close()
    rb.close()


def test_a_kill_mid_import_leaves_nothing_after_restart(hosts, moved):
    """Last: restarts B. An import cut off by kill -9 of kilnd is gone when it starts again."""
    _, b, daemon_b = hosts
    items = entries(moved["tar"])
    m = json.loads(items[0][1])
    m["record"]["id"] = str(uuid.uuid4())
    body = retar(items, m)
    s = begin_import(daemon_b, b.secret, body, len(body) - 100000)
    partial = Path(daemon_b.state_dir) / "snapshots" / (m["record"]["id"] + ".import-partial")
    deadline = time.monotonic() + 60
    while not partial.exists():
        assert time.monotonic() < deadline, "the import never began writing"
        time.sleep(0.1)
    daemon_b.proc.send_signal(signal.SIGKILL)
    daemon_b.proc.wait(timeout=30)
    s.close()
    assert partial.exists()
    again = start_kilnd(daemon_b.state_dir)
    try:
        assert leftovers(again, m["record"]["id"]) == []
        admin = Client(again.url, key=again.admin_key)
        assert_error(admin.get(f"/v1/snapshots/{m['record']['id']}"), 404, "snapshot_not_found")
        # What was imported before the kill is still there and whole.
        assert admin.ok("GET", f"/v1/snapshots/{moved['snap']['id']}")["id"] == moved["snap"]["id"]
    finally:
        stop_kilnd(again)
        daemon_b.proc = again.proc  # the fixture stops this one
