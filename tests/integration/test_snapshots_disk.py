"""Disk snapshots (issue 27, item 4): `:snapshot {mode: "disk"}` keeps the root filesystem's
changes only; a copy boots fresh from them (no process, no memory of the source), at the
snapshot's shape or one the create names, with at least its disk. Images' users and start
commands with a disk copy are in test_images.py; the reference client's paths in
test_withruntime_client.py."""
import pytest

from client import assert_error
from conftest import Sandboxes


@pytest.fixture(scope="module")
def disk(api):
    """A sandbox that changed its files (added, modified, deleted, in /tmp and /workspace)
    and runs a process, and a disk snapshot of it."""
    pool = Sandboxes(api)
    sid = pool.create(vcpu=1, memoryMiB=512)["id"]
    api.sh(sid, "echo kept > /workspace/kept.txt && mkdir -p /workspace/d/e && echo deep > /workspace/d/e/f"
                " && echo changed | sudo tee /etc/motd >/dev/null && sudo rm /etc/issue && echo tmp > /tmp/t && ln -s kept.txt /workspace/link"
                " && chmod 0600 /workspace/kept.txt")
    api.write_file(sid, "/workspace/bin.dat", bytes(range(256)) * 64)
    sleeper = api.spawn(sid, argv=["sleep", "100000"])
    api.sh(sid, "echo 41 > /workspace/memory-only; python3 -c 'import time; time.sleep(0)'")
    snap = api.ok("POST", f"/v1/sandboxes/{sid}:snapshot", json={"mode": "disk", "name": "disk", "labels": {"t": "disk"}})
    yield {"source": sid, "snap": snap, "sleeper": sleeper}
    pool.close()
    api.request("POST", f"/v1/snapshots/{snap['id']}:delete", json={})


def test_the_record_says_disk(api, disk):
    s = disk["snap"]
    assert (s["mode"], s["state"], s["name"], s["labels"]) == ("disk", "ready", "disk", {"t": "disk"}), s
    assert s["shape"] == {"vcpu": 1, "memoryMiB": 512, "diskMiB": 4096}
    assert 0 < s["sizeBytes"] < 64 << 20, s  # the changes, not the memory
    assert api.ok("GET", f"/v1/snapshots/{s['id']}")["mode"] == "disk"
    # The source ran on: its process is there.
    assert api.sh(disk["source"], "pgrep -x sleep >/dev/null && echo up") == "up\n"


def test_a_copy_has_the_files_and_boots_fresh(api, sandboxes, disk):
    c = sandboxes.create(snapshot=disk["snap"]["id"])
    assert (c["vcpu"], c["memoryMiB"], c["diskMiB"], c["labels"]) == (1, 512, 4096, {"t": "disk"}), c
    sid = c["id"]
    assert api.sh(sid, "cat /workspace/kept.txt /workspace/d/e/f /etc/motd /tmp/t /workspace/link") == \
        "kept\ndeep\nchanged\ntmp\nkept\n"
    assert api.sh(sid, "stat -c '%a %U' /workspace/kept.txt; readlink /workspace/link") == "600 user\nkept.txt\n"
    assert api.read_file(sid, "/workspace/bin.dat").body == bytes(range(256)) * 64
    assert api.exec(sid, argv=["test", "-e", "/etc/issue"])["exitCode"] == 1  # the deletion is kept
    # Fresh: no process of the source's, and the kernel started just now.
    assert api.exec(sid, command="pgrep -x sleep")["exitCode"] == 1
    procs = api.ok("GET", f"/v1/sandboxes/{sid}/processes")["data"]
    assert disk["sleeper"]["id"] not in [p["id"] for p in procs]
    assert float(api.sh(sid, "cut -d' ' -f1 /proc/uptime")) < 60
    assert api.sh(sid, "id -un; pwd") == "user\n/workspace\n"
    # Its writes are its own.
    api.sh(sid, "echo mine > /workspace/mine")
    assert api.exec(disk["source"], argv=["test", "-e", "/workspace/mine"])["exitCode"] == 1


def test_a_copy_at_another_shape(api, sandboxes, disk):
    snap = disk["snap"]["id"]
    big = sandboxes.create(snapshot=snap, vcpu=2, memoryMiB=1024, diskMiB=8192)
    assert (big["vcpu"], big["memoryMiB"], big["diskMiB"]) == (2, 1024, 8192), big
    assert api.sh(big["id"], "nproc; cat /workspace/kept.txt") == "2\nkept\n"
    total_mib = int(api.sh(big["id"], "free -m | awk '/Mem:/ {print $2}'"))
    assert 900 <= total_mib <= 1024, total_mib
    # Only what the create names changes: the rest is the snapshot's.
    part = sandboxes.create(snapshot=snap, memoryMiB=768)
    assert (part["vcpu"], part["memoryMiB"], part["diskMiB"]) == (1, 768, 4096), part
    err = assert_error(api.post("/v1/sandboxes", json={"snapshot": snap, "diskMiB": 2048}), 400, "invalid_request",
                       mentions=["4096"])
    assert "diskMiB" in err["message"], err


def test_memory_snapshots_keep_their_shape(api, sandboxes, disk):
    mem = api.ok("POST", f"/v1/sandboxes/{disk['source']}:snapshot", json={})
    try:
        assert mem["mode"] == "memory"
        c = sandboxes.create(snapshot=mem["id"], vcpu=2, memoryMiB=1024)
        assert (c["vcpu"], c["memoryMiB"]) == (1, 512), c  # a restore is its source's size
        assert api.sh(c["id"], "pgrep -x sleep >/dev/null && echo up") == "up\n"
    finally:
        api.ok("POST", f"/v1/snapshots/{mem['id']}:delete", json={})


def test_a_sandbox_that_cannot_pause_takes_disk_snapshots_only(api, sandboxes):
    sid = sandboxes.create(vcpu=1, memoryMiB=256, pausable=False)["id"]
    api.sh(sid, "echo np > /workspace/np")
    assert_error(api.post(f"/v1/sandboxes/{sid}:snapshot", json={}), 409, "not_pausable")
    snap = api.ok("POST", f"/v1/sandboxes/{sid}:snapshot", json={"mode": "disk"})
    try:
        c = sandboxes.create(snapshot=snap["id"])
        assert api.sh(c["id"], "cat /workspace/np") == "np\n"
    finally:
        api.ok("POST", f"/v1/snapshots/{snap['id']}:delete", json={})


def test_a_copy_of_a_copy(api, sandboxes, disk):
    first = sandboxes.create(snapshot=disk["snap"]["id"])
    api.sh(first["id"], "echo second > /workspace/second && rm /workspace/d/e/f")
    again = api.ok("POST", f"/v1/sandboxes/{first['id']}:snapshot", json={"mode": "disk"})
    try:
        c = sandboxes.create(snapshot=again["id"])
        assert api.sh(c["id"], "cat /workspace/kept.txt /workspace/second; ls /workspace/d/e | wc -l") == \
            "kept\nsecond\n0\n"
    finally:
        api.ok("POST", f"/v1/snapshots/{again['id']}:delete", json={})


def test_a_disk_copy_pauses_snapshots_and_forks_like_any_sandbox(api, sandboxes, disk):
    """runsc refuses to restore a checkpoint whose spec annotations differ: a disk copy's
    memory captures (pause, snapshot, fork) and their copies' must restore all the same."""
    c = sandboxes.create(snapshot=disk["snap"]["id"])["id"]
    api.ok("POST", f"/v1/sandboxes/{c}/processes", json={"argv": ["sleep", "100000"]})
    assert api.ok("POST", f"/v1/sandboxes/{c}:pause", json={})["state"] == "paused"
    assert api.ok("POST", f"/v1/sandboxes/{c}:wake", json={})["state"] == "running"
    assert api.sh(c, "cat /workspace/kept.txt; pgrep -x sleep >/dev/null && echo up") == "kept\nup\n"
    mem = api.ok("POST", f"/v1/sandboxes/{c}:snapshot", json={})
    try:
        m = sandboxes.create(snapshot=mem["id"])["id"]
        assert api.sh(m, "cat /workspace/kept.txt; pgrep -x sleep >/dev/null && echo up") == "kept\nup\n"
        # A copy of that copy, once more through memory and a fork.
        again = api.ok("POST", f"/v1/sandboxes/{m}:snapshot", json={})
        try:
            assert api.sh(sandboxes.create(snapshot=again["id"])["id"], "cat /workspace/kept.txt") == "kept\n"
        finally:
            api.ok("POST", f"/v1/snapshots/{again['id']}:delete", json={})
    finally:
        api.ok("POST", f"/v1/snapshots/{mem['id']}:delete", json={})
    forked = api.ok("POST", f"/v1/sandboxes/{c}:fork", json={"count": 2})["sandboxes"]
    sandboxes.ids.extend(f["id"] for f in forked)
    for f in forked:
        assert api.sh(f["id"], "cat /workspace/kept.txt") == "kept\n"
    # The disk snapshot's own deletion does not touch its copies' later restores.
    other = api.ok("POST", f"/v1/sandboxes/{disk['source']}:snapshot", json={"mode": "disk"})
    c2 = sandboxes.create(snapshot=other["id"])["id"]
    api.ok("POST", f"/v1/snapshots/{other['id']}:delete", json={})
    assert api.ok("POST", f"/v1/sandboxes/{c2}:pause", json={})["state"] == "paused"
    assert api.ok("POST", f"/v1/sandboxes/{c2}:wake", json={})["state"] == "running"
    assert api.sh(c2, "cat /workspace/kept.txt") == "kept\n"


def test_bad_modes_are_refused_by_name(api, disk):
    for mode in ("Disk", "", "files", 3):
        assert_error(api.post(f"/v1/sandboxes/{disk['source']}:snapshot", json={"mode": mode}), 400,
                     "invalid_request", issue_path="body.mode")
