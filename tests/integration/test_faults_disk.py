"""The state directory's disk full (issue 15): a snapshot, an image build
and file uploads answer 507 `insufficient_storage`, leave nothing
half-written that could be used, and succeed on the same kilnd once there is
room again.

The state dir is a small ext4 on a loop device made by the test; a filler
file takes all but a few MiB of it."""
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

from client import assert_error
from conftest import stop_kilnd
from faults_util import daemons, free_bytes  # noqa: F401
from host import find_paths
from test_images import context_tar, upload_context, wait_image
from test_snapshot_transfer import entries, retar

MiB = 1 << 20
FS_MIB = 512
LEFT_MIB = 6  # what the filler leaves free


@pytest.fixture
def small_fs(request):
    """A FS_MIB ext4 (or the test's `fs_mib` mark) mounted on a loop device;
    yields its mount point."""
    mark = request.node.get_closest_marker("fs_mib")
    size = mark.args[0] if mark else FS_MIB
    work = Path(tempfile.mkdtemp(prefix="kiln-fault-fs-", dir="/tmp"))
    img, mnt = work / "fs.img", work / "mnt"
    mnt.mkdir()
    subprocess.run(["truncate", "-s", f"{size}M", str(img)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(img)], check=True, capture_output=True)
    dev = subprocess.run(["losetup", "--find", "--show", str(img)], check=True, capture_output=True,
                         text=True).stdout.strip()
    try:
        subprocess.run(["mount", dev, str(mnt)], check=True)
        try:
            yield mnt
        finally:
            # runsc may pin a namespace under the state dir: lazy unmounts first.
            with open("/proc/self/mountinfo") as f:
                inner = [line.split()[4] for line in f if line.split()[4].startswith(str(mnt) + "/")]
            for m in sorted(inner, key=len, reverse=True):
                subprocess.run(["umount", "-l", m], capture_output=True)
            subprocess.run(["umount", "-l", str(mnt)], check=True)
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)
        subprocess.run(["rm", "-rf", str(work)])


class Filler:
    """Takes all but `left` bytes of the file system at `root`."""

    def __init__(self, root):
        self.path = Path(root) / "filler"

    def fill(self, left=LEFT_MIB * MiB):
        self.path.unlink(missing_ok=True)
        size = free_bytes(self.path.parent) - left
        assert size > 0, free_bytes(self.path.parent)
        subprocess.run(["fallocate", "-l", str(size), str(self.path)], check=True)
        return free_bytes(self.path.parent)

    def remove(self):
        self.path.unlink(missing_ok=True)


@pytest.fixture
def full(small_fs, daemons):
    """A kilnd whose state dir is on the small file system, and its filler."""
    state = small_fs / "state"
    d = daemons(state_dir=str(state))
    d.filler = Filler(small_fs)
    # The built-in image warms on its first create (a snapshot of its own in
    # snapshots/): done before the disk fills, and left out of what is compared.
    d.api.stop(d.api.create()["id"])
    builtin = lambda: next(i for i in d.api.ok("GET", "/v1/images")["data"]  # noqa: E731
                           if i["source"] == "builtin")
    deadline = time.monotonic() + 180
    while not builtin()["warm"]:
        assert time.monotonic() < deadline, "the built-in image did not warm"
        time.sleep(0.2)
    snaps = Path(d.state_dir) / "snapshots"
    d.warm = {p.name for p in snaps.iterdir()} if snaps.exists() else set()
    yield d
    if d.alive():
        stop_kilnd(d)
    d.filler.remove()


def _no_partial_snapshots(state):
    snaps = Path(state) / "snapshots"
    if not snaps.exists():
        return []
    return [str(p) for p in find_paths(snaps, lambda n: n.endswith(".partial"))]


def test_snapshot_on_a_full_disk(full):
    d, api = full, full.api
    sid = api.create(vcpu=1, memoryMiB=256)["id"]
    api.sh(sid, "head -c 30000000 /dev/urandom > /workspace/state.bin")  # memory the capture must write
    before = {s["id"] for s in api.ok("GET", "/v1/snapshots")["data"]}
    d.filler.fill()
    r = api.post(f"/v1/sandboxes/{sid}:snapshot", json={})
    assert_error(r, 507, "insufficient_storage")
    after = {s["id"] for s in api.ok("GET", "/v1/snapshots")["data"]}
    assert after == before, "a failed snapshot is listed"
    assert _no_partial_snapshots(d.state_dir) == []
    snap_dir = Path(d.state_dir) / "snapshots"
    assert [p.name for p in snap_dir.iterdir() if p.is_dir() and p.name not in d.warm] == [] \
        if snap_dir.exists() else True
    # The sandbox lives on, and kilnd serves.
    assert api.exec(sid, argv=["true"])["exitCode"] == 0
    d.filler.remove()
    snap = api.ok("POST", f"/v1/sandboxes/{sid}:snapshot", json={})
    copy = api.create(snapshot=snap["id"])
    assert api.sh(copy["id"], "wc -c < /workspace/state.bin").strip() == "30000000"


def test_file_and_archive_upload_on_a_full_disk(full):
    d, api = full, full.api
    sid = api.create(vcpu=1, memoryMiB=256)["id"]
    d.filler.fill()
    blob = os.urandom(40 * MiB)
    r = api.request("PUT", f"/v1/sandboxes/{sid}/files/content", query={"path": "/workspace/big.bin"}, data=blob)
    assert_error(r, 507, "insufficient_storage", mentions=("/workspace/big.bin",))
    assert api.stat(sid, "/workspace/big.bin").get("exists") is not True, "a partial file is at the target"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as t:
        info = tarfile.TarInfo("a/big.bin")
        info.size = len(blob)
        t.addfile(info, io.BytesIO(blob))
    r = api.request("PUT", f"/v1/sandboxes/{sid}/files/archive", query={"path": "/workspace/x"},
                    data=raw.getvalue())
    assert_error(r, 507, "insufficient_storage", mentions=("/workspace/x",))
    # (The entries tar wrote before the disk filled stay: unpacking is not
    # staged; the re-upload below overwrites them.)
    assert api.exec(sid, argv=["true"])["exitCode"] == 0
    d.filler.remove()
    assert api.ok("PUT", f"/v1/sandboxes/{sid}/files/content", query={"path": "/workspace/big.bin"},
                  data=blob)["size"] == len(blob)
    api.ok("PUT", f"/v1/sandboxes/{sid}/files/archive", query={"path": "/workspace/x"}, data=raw.getvalue())
    assert api.sh(sid, "wc -c < /workspace/x/a/big.bin").strip() == str(len(blob))


@pytest.mark.fs_mib(2048)  # an image FROM base holds its 658 MiB root
def test_image_build_on_a_full_disk(full):
    d, api = full, full.api
    files = {"big.bin": os.urandom(24 * MiB)}
    dockerfile = "FROM base\nCOPY big.bin /big.bin\n"
    d.filler.fill()
    digest, blob = context_tar(files)
    r = api.request("PUT", f"/v1/images/context/{digest}", data=blob,
                    headers={"Content-Type": "application/gzip"})
    assert_error(r, 507, "insufficient_storage")
    images = api.ok("GET", "/v1/images")["data"]
    assert not [i for i in images if i.get("name") == "big"], images
    d.filler.remove()
    digest = upload_context(api, files)
    image = api.ok("POST", "/v1/images", json={"name": "big", "dockerfile": dockerfile, "context": digest})
    image, lines = wait_image(api, image["id"], within=300)
    assert image["state"] == "ready", (image, lines[-20:])
    # A build whose layer does not fit: the build fails with the code, no
    # half-written image is ready or usable.
    d.filler.fill(left=12 * MiB)
    image = api.ok("POST", "/v1/images", json={"name": "big2", "recipe": {"commands": [
        "head -c 60000000 /dev/urandom > /big2.bin"]}})
    image, lines = wait_image(api, image["id"], within=300)
    assert image["state"] == "failed", image
    # The RUN's own sandbox disk lives on the same full disk, so the step
    # usually sees ENOSPC first (step_failed, the error in the log tail);
    # if the layer export is what fills it, the code says so.
    err = image["error"]
    assert err["code"] == "insufficient_storage" or (
        err["code"] == "step_failed" and "No space left on device" in " ".join(err.get("logTail", []))), err
    assert api.post("/v1/sandboxes", json={"image": image["id"]}).status >= 400
    d.filler.remove()
    image = api.ok("POST", "/v1/images", json={"name": "big2", "recipe": {"commands": [
        "head -c 60000000 /dev/urandom > /big2.bin"]}})
    image, lines = wait_image(api, image["id"], within=300)
    assert image["state"] == "ready", (image, lines[-20:])
    s = api.create(image=image["id"])
    assert api.sh(s["id"], "wc -c < /big2.bin").strip() == "60000000"


def test_snapshot_import_on_a_full_disk(full):
    """An import that runs out of room answers 507 and leaves no partial directory."""
    d, api = full, full.api
    sid = api.create(vcpu=1, memoryMiB=256)["id"]
    api.sh(sid, "head -c 30000000 /dev/urandom > /workspace/state.bin")
    snap = api.ok("POST", f"/v1/sandboxes/{sid}:snapshot", json={})
    r = api.get(f"/v1/snapshots/{snap['id']}/archive", timeout=300)
    assert r.status == 200, r
    items = entries(r.body)
    manifest = json.loads(items[0][1])
    manifest["record"]["id"] = str(uuid.uuid4())  # the same snapshot under a new id
    tar = retar(items, manifest)
    assert len(tar) > 2 * LEFT_MIB * MiB, len(tar)
    d.filler.fill()
    r = api.request("POST", "/v1/snapshots:import", data=tar, headers={"Content-Type": "application/x-tar"},
                    timeout=300)
    assert_error(r, 507, "insufficient_storage")
    snaps = Path(d.state_dir) / "snapshots"
    assert sorted(p.name for p in snaps.iterdir() if p.name not in d.warm) == [snap["id"]], \
        "a failed import left something"
    d.filler.remove()
    r = api.request("POST", "/v1/snapshots:import", data=tar, headers={"Content-Type": "application/x-tar"},
                    timeout=300)
    assert r.status == 201, r
    assert r.json()["id"] == manifest["record"]["id"]
