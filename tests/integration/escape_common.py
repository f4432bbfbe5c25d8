"""Shared parts of the escape-attempt suite (test_escape_*.py).

Every attempt runs against the session's real kilnd and real gVisor
sandboxes. The host keeps a marker file and a marker folder in /tmp with a
random secret; after every test (`escape_guard`, autouse in each module) the
marker must be byte-for-byte the same file (content, inode, mtime), the
folder must hold exactly what it held, and kilnd must be alive and healthy.
A secret that shows up in any answer of an attempt is a leak (`no_secret`).
"""
import json
import os
import secrets
import shutil
import time
from pathlib import Path

import pytest


class HostMarker:
    """A file and a folder on the host that no sandbox may reach."""

    def __init__(self):
        tag = secrets.token_hex(6)
        self.secret = "kiln-escape-secret-" + secrets.token_hex(16)
        self.path = Path(f"/tmp/kiln-escape-marker-{tag}")
        self.dir = Path(f"/tmp/kiln-escape-dir-{tag}")
        self.path.write_text(self.secret + "\n")
        os.chmod(self.path, 0o644)
        self.dir.mkdir(mode=0o755)
        (self.dir / "inside").write_text(self.secret + " inside\n")
        self._expect = self._snapshot()

    def _snapshot(self):
        st = os.stat(self.path)
        listing = sorted(os.listdir(self.dir))
        inside = (self.dir / "inside").read_bytes() if (self.dir / "inside").exists() else None
        return (self.path.read_bytes(), st.st_ino, st.st_mtime_ns, st.st_mode, st.st_uid, listing, inside)

    def check(self):
        assert self.path.exists(), f"host marker {self.path} was deleted"
        now = self._snapshot()
        assert now == self._expect, f"host marker changed: {self._expect!r} -> {now!r}"

    def close(self):
        self.path.unlink(missing_ok=True)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def marker():
    m = HostMarker()
    yield m
    m.close()


@pytest.fixture(autouse=True)
def escape_guard(marker, kilnd, api):
    """After every attempt: the host marker is unchanged and kilnd is healthy."""
    yield
    marker.check()
    assert kilnd.alive(), f"kilnd died:\n{kilnd.log_tail()}"
    deadline = time.monotonic() + 30
    while True:
        status = api.health().status
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert status == 200, f"kilnd's health answers {status}"


def no_secret(marker, *texts, extra=()):
    """None of `texts` (strings, bytes, dicts) holds the marker's secret or
    any of `extra` (e.g. the admin key)."""
    for t in texts:
        if isinstance(t, bytes):
            t = t.decode("utf-8", "replace")
        elif not isinstance(t, str):
            t = json.dumps(t)
        for s in (marker.secret, *extra):
            assert s not in t, f"a host secret leaked into a sandbox answer: {t[:500]!r}"


def sh(api, sid, command, user=None, timeout_ms=30000):
    """Runs `command` (bash) and returns the CommandResult, whatever its exit."""
    fields = {"command": command, "timeoutMs": timeout_ms}
    if user:
        fields["user"] = user
    return api.exec(sid, **fields)


def quote(s):
    return "'" + s.replace("'", "'\"'\"'") + "'"
