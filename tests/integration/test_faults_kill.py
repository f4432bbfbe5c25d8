"""kill -9 of kilnd in the middle of a fork, a warm-pool refill and an image
pull (issue 15). After a restart on the same state dir: nothing on the host
that the new kilnd does not account for, every sandbox running (re-adopted)
or stopped with a reason, nothing half-made usable, and the operation can be
redone. (Pause and wake under kill -9: tests/integration/test_pause.py.)"""
import os
import threading
from pathlib import Path

import pytest

from faults_util import daemons, kill9, orphans, restart  # noqa: F401
from lib.waits import wait_for
from host import find_paths
from oci import Registry, build_image, busybox_rootfs
from test_images import wait_image

SHAPE = {"vcpu": 1, "memoryMiB": 256}


def in_background(fn):
    box = {}

    def run():
        try:
            box["answer"] = fn()
        except OSError as e:  # the daemon died under the call
            box["error"] = e

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th, box


def after_restart(d, ever):
    """The invariants every restart must keep: each sandbox running (and
    answering) or stopped with a reason; every runsc container and sandbox
    dir is a running sandbox or a ready pool copy; no trace of any other
    sandbox. Polled for up to 60 s (a pool refills meanwhile)."""
    listed, problems = [], []

    def look():
        nonlocal listed, problems
        listed = d.api.ok("GET", "/v1/sandboxes", query={"includeStopped": "true", "limit": 500})["data"]
        problems = [f"sandbox {s['id']} is {s['state']} ({s.get('stopReason')})" for s in listed
                    if s["state"] not in ("running", "stopped") or
                    (s["state"] == "stopped" and not s["stopReason"])]
        running = {s["id"] for s in listed if s["state"] == "running"}
        ready = sum(s["pool"]["ready"] for s in d.api.ok("GET", "/v1/snapshots")["data"])
        # and the images' warm copies' pools (the built-in image's by default)
        ready += sum(i["pool"]["ready"] for i in d.api.ok("GET", "/v1/images")["data"])
        extra = set(d.host.runsc_ids()) - running
        sdir = Path(d.state_dir) / "sandboxes"
        dirs = {p.name for p in sdir.iterdir()} - running if sdir.exists() else set()
        if len(extra) != ready:
            problems.append(f"{len(extra)} runsc containers beyond the running sandboxes, {ready} pool copies")
        if dirs != extra:
            problems.append(f"sandbox dirs {sorted(dirs - extra)} without a container")
        problems += orphans(d.state_dir, running | extra, set(ever) | {s["id"] for s in listed})
        return not problems

    try:
        wait_for(look, 60, "the host to match the daemon", every=0.5)
    except AssertionError:
        raise AssertionError(f"after the restart: {problems}") from None
    for s in listed:
        if s["state"] == "running":
            assert d.api.exec(s["id"], argv=["true"])["exitCode"] == 0, s
    return listed


def runsc_count(d):
    return len(d.host.runsc_ids())


def test_kill_9_during_a_fork(daemons):
    d = daemons()
    src = d.api.create(**SHAPE)["id"]
    d.api.sh(src, "echo forked-state > /workspace/mark")
    base = runsc_count(d)
    th, box = in_background(lambda: d.api.post(f"/v1/sandboxes/{src}:fork", json={"count": 3}))
    # Kill once the capture has started (its .partial dir) or a copy runs.
    snaps = Path(d.state_dir) / "snapshots"
    partial = lambda: find_paths(snaps, lambda n: n.endswith(".partial"))  # noqa: E731
    wait_for(lambda: runsc_count(d) > base or partial(),
             60, "the fork to begin", every=0.02)
    kill9(d)
    th.join(30)
    assert "answer" not in box, f"the fork finished before the kill: {box['answer']!r}"
    restart(d)
    after_restart(d, [src])
    # A fork's snapshot is usable in full or not listed at all.
    for snap in d.api.ok("GET", "/v1/snapshots")["data"]:
        copy = d.api.create(snapshot=snap["id"])
        assert d.api.sh(copy["id"], "cat /workspace/mark") == "forked-state\n"
    # The source was re-adopted and can be forked again.
    assert d.api.sh(src, "cat /workspace/mark") == "forked-state\n"
    again = d.api.ok("POST", f"/v1/sandboxes/{src}:fork", json={"count": 2})
    ids = [c["id"] for c in again["sandboxes"]]
    assert len(ids) == 2
    for sid in ids:
        assert d.api.sh(sid, "cat /workspace/mark") == "forked-state\n"


def test_kill_9_during_a_pool_refill(daemons):
    d = daemons()
    src = d.api.create(**SHAPE)["id"]
    d.api.sh(src, "echo pooled > /workspace/mark")
    snap = d.api.ok("POST", f"/v1/sandboxes/{src}:snapshot", json={})
    base = runsc_count(d)
    d.api.ok("POST", f"/v1/snapshots/{snap['id']}:pool", json={"size": 3})
    wait_for(lambda: runsc_count(d) > base, 60, "the first pool copy to start", every=0.02)
    kill9(d)
    restart(d)
    after_restart(d, [src])
    # A pinned size is kept (<state>/pool-pins.json): the dead daemon's copies
    # are removed and the pool refills by itself.
    wait_for(lambda: d.api.ok("GET", f"/v1/snapshots/{snap['id']}")["pool"]["ready"] == 3, 120,
             "3 ready copies after the restart")
    info = d.api.ok("GET", f"/v1/snapshots/{snap['id']}")
    assert info["pool"]["mode"] == "pinned" and info["pool"]["size"] == 3, info
    copy = d.api.create(snapshot=snap["id"])
    assert d.api.sh(copy["id"], "cat /workspace/mark") == "pooled\n"
    after_restart(d, [src, copy["id"]])


@pytest.fixture
def big_image_registry(tmp_path):
    with Registry(tmp_path / "reg") as reg:
        root = busybox_rootfs(tmp_path / "root")
        (root / "data.bin").write_bytes(os.urandom(48 << 20))
        reg.big = reg.push(build_image(tmp_path / "layout", [root], tag="big"), "big:1")
        yield reg


def test_kill_9_during_an_image_pull(daemons, big_image_registry):
    d = daemons()
    image = d.api.ok("POST", "/v1/images", json={"image": big_image_registry.big, "name": "big"})
    wait_for(lambda: d.api.ok("GET", f"/v1/images/{image['id']}")["state"] not in ("queued",), 60,
             "the pull to start", every=0.02)
    state = d.api.ok("GET", f"/v1/images/{image['id']}")["state"]
    kill9(d)
    restart(d)
    after = d.api.ok("GET", f"/v1/images/{image['id']}")
    if state != "ready":  # caught mid-pull: failed, said why, not usable
        assert after["state"] == "failed", after
        assert after["error"]["code"] in ("build_interrupted",), after
        r = d.api.post("/v1/sandboxes", json={"image": image["id"], **SHAPE})
        assert r.status >= 400, r
    after_restart(d, [])
    image = d.api.ok("POST", "/v1/images", json={"image": big_image_registry.big, "name": "big"})
    image, lines = wait_image(d.api, image["id"], within=300)
    assert image["state"] == "ready", (image, lines[-20:])
    s = d.api.create(image=image["id"], **SHAPE)
    assert d.api.exec(s["id"], argv=["/bin/sh", "-c", "wc -c < /data.bin"])["stdout"].strip() == str(48 << 20)
