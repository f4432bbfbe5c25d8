"""Helpers for the fault-injection tests (test_faults_*.py): kilnds of their
own on their own state directories, polling, and host-side checks."""
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from client import Client
from conftest import BIN_DIR, IMAGE_DIR, start_kilnd, stop_kilnd
from host import Host, runsc_of

_runsc = []


def runsc():
    """The runsc the kilnd build uses (asked once, when first needed)."""
    if not _runsc:
        _runsc.append(runsc_of(BIN_DIR / "kilnd"))
    return _runsc[0]




def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def run_kilnd_expecting_exit(state_dir, *args, within=30):
    """Runs kilnd that should refuse to start; returns (returncode, output)."""
    argv = [str(BIN_DIR / "kilnd"), "--listen", "127.0.0.1:0", "--state-dir", str(state_dir),
            "--image-dir", str(IMAGE_DIR), *args]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=within)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"kilnd did not exit within {within} s: {e.stdout!r} {e.stderr!r}") from None
    return r.returncode, r.stdout + r.stderr


def orphans(state_dir, running_ids, ever_ids=()):
    """What a kilnd on state_dir left on the host beyond its running
    sandboxes: runsc containers and sandbox dirs it does not run, and every
    trace (processes, cgroups, mounts, dir) of the ever_ids not running."""
    host = Host(state_dir, runsc())
    running = set(running_ids)
    left = [f"runsc container {i}" for i in host.runsc_ids() if i not in running]
    sdir = Path(state_dir) / "sandboxes"
    if sdir.exists():
        left += [f"dir {p}" for p in sdir.iterdir() if p.name not in running]
    for sid in set(ever_ids) - running:
        left += host.traces(sid)
    return left


@pytest.fixture
def daemons():
    """start(*kilnd_args, state_dir=None) -> a Daemon with .api (admin) and
    .host; each is stopped and its state dir removed at the end."""
    started = []

    def start(*args, state_dir=None):
        state = state_dir or tempfile.mkdtemp(prefix="kiln-fault-", dir="/tmp")
        d = start_kilnd(state, *args)
        d.api = Client(d.url, key=d.admin_key)
        d.host = Host(state, runsc())
        started.append(d)
        return d

    yield start
    for d in started:
        if d.alive():
            stop_kilnd(d)
        for m in Host.mounts_naming(str(d.state_dir)):
            subprocess.run(["umount", "-l", m.split()[4]], capture_output=True)
        if not str(d.state_dir).startswith("/tmp/kiln-fault-"):
            continue  # someone else's dir (a loop mount): its owner cleans it
        shutil.rmtree(d.state_dir, ignore_errors=True)
        Path(str(d.state_dir) + ".log").unlink(missing_ok=True)


def restart(d, *args):
    """A new kilnd on d's state dir, after d died; d takes its process."""
    d2 = start_kilnd(d.state_dir, *args, log_path=d.log_path)
    d.proc, d.url = d2.proc, d2.url
    d.api = Client(d2.url, key=d2.admin_key)
    return d


def kill9(d):
    d.proc.kill()
    d.proc.wait()


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize
