"""Helpers of the snapshot transfer tests (test_snapshot_transfer*.py): a second kilnd
with its own state directory, and tars read, rewritten and checked for leftovers."""
import io
import json
import shutil
import socket
import tarfile
import tempfile
from pathlib import Path

from client import Client
from conftest import start_kilnd, stop_kilnd

POLICY = {"internet": True, "allow": ["pkgs.test"], "deny": []}
TAR = {"Content-Type": "application/x-tar"}


def export(client, snap_id, query=None):
    r = client.get(f"/v1/snapshots/{snap_id}/archive", headers={"Accept": "application/x-tar"}, query=query,
                   timeout=300)
    assert r.status == 200, r
    assert r.headers["Content-Type"] == "application/x-tar"
    assert int(r.headers["x-content-length"]) == len(r.body)
    return r.body


def entries(tar_bytes):
    """[(name, bytes)] in tar order."""
    with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as t:
        return [(m.name, t.extractfile(m).read()) for m in t.getmembers()]


def retar(items, manifest=None):
    """A tar of `items` (name, bytes), with kiln-snapshot.json replaced by `manifest`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:", format=tarfile.USTAR_FORMAT) as t:
        for name, data in items:
            if name == "kiln-snapshot.json" and manifest is not None:
                data = json.dumps(manifest).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def leftovers(daemon, snap_id):
    """What the state directory holds of snapshot `snap_id` (finished or partial)."""
    snaps = Path(daemon.state_dir) / "snapshots"
    return sorted(p.name for p in snaps.iterdir() if p.name.startswith(snap_id) or "import-partial" in p.name)


class Host:
    def __init__(self, daemon, name):
        self.daemon = daemon
        self.admin = Client(daemon.url, key=daemon.admin_key)
        key = self.admin.ok("POST", "/v1/keys", json={"name": name})
        self.key_id, self.secret = key["id"], key["secret"]
        self.client = Client(daemon.url, key=self.secret)


def two_hosts(kilnd, prefix):
    """For a module fixture: yields (A, B, B's daemon), A the session's kilnd, B a second
    kilnd with its own state directory, each with a key of its own; stops B after."""
    state_b = tempfile.mkdtemp(prefix="kiln-it-b-", dir="/tmp")
    b = start_kilnd(state_b)
    try:
        yield Host(kilnd, prefix + "-a"), Host(b, prefix + "-b"), b
    finally:
        stop_kilnd(b)
        shutil.rmtree(state_b, ignore_errors=True)


def begin_import(daemon, secret, body, send):
    """Starts POST /v1/snapshots:import of `body` on a raw socket, sending only its first
    `send` bytes: the import stays under way until the socket is closed. Returns the socket."""
    u = daemon.url.split("//")[1]
    host, port = u.split(":")
    s = socket.create_connection((host, int(port)), timeout=30)
    s.sendall((f"POST /v1/snapshots:import HTTP/1.1\r\nHost: {u}\r\nAuthorization: Bearer {secret}\r\n"
               f"Content-Type: application/x-tar\r\nContent-Length: {len(body)}\r\n\r\n").encode())
    s.sendall(body[:send])
    return s
