"""Faults of the engine, the database, runsc and the clock (issue 15): each
ends in a clear error or state, loses no data, and leaves kilnd serving.

Every case runs a real kilnd of its own with real gVisor sandboxes."""
import os
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from client import assert_error
from conftest import stop_kilnd
from faults_util import cmdline, runsc, daemons, run_kilnd_expecting_exit, sha256  # noqa: F401
from lib.waits import wait_stopped

# Alone, after the parallel part of make test (conftest.py: serial).
pytestmark = pytest.mark.serial

# Two 512 MiB sandboxes fill this kilnd: a third waits for the room of one.
ROOM = ("--host-memory-mib", "1024", "--memory-overcommit", "1", "--host-vcpus", "4")
SHAPE = {"vcpu": 1, "memoryMiB": 512}


def full_house(d):
    """A neighbour and a victim that fill the host; a third create is refused."""
    neighbour = d.api.create(**SHAPE)["id"]
    victim = d.api.create(**SHAPE)["id"]
    assert_error(d.api.post("/v1/sandboxes", json=SHAPE), 409, "no_capacity")
    d.api.sh(victim, "echo alive > /workspace/x")
    return neighbour, victim


def assert_cleaned_and_room_back(d, neighbour, victim, pids):
    info = wait_stopped(d.api, victim, within=15)
    assert info["stopReason"] == "sandbox_died", info
    assert d.host.wait_gone(victim, pids, timeout=15) == []
    assert d.api.exec(neighbour, argv=["echo", "fine"])["stdout"] == "fine\n"
    # Its room is back: a create that needs it starts at once.
    third = d.api.create(**SHAPE)
    assert third["state"] == "running", third
    assert d.api.exec(third["id"], argv=["true"])["exitCode"] == 0
    assert d.alive() and d.api.health().status == 200


@pytest.mark.parametrize("which", ["runsc-sandbox", "gofer"])
def test_gvisor_process_killed_from_the_host(daemons, which):
    d = daemons(*ROOM)
    neighbour, victim = full_house(d)
    pids = d.host.pids(victim)
    targets = [p for p in pids if which in cmdline(p)]
    assert targets, f"no {which} process among {[(p, cmdline(p)[:100]) for p in pids]}"
    killed = 0
    for p in targets:
        try:
            os.kill(p, signal.SIGKILL)
            killed += 1
        except ProcessLookupError:
            pass  # a short-lived helper of runsc's that matched and is gone
    assert killed, f"every {which} process was gone before it could be killed"
    assert_cleaned_and_room_back(d, neighbour, victim, pids)


def test_agent_killed_from_the_host(daemons):
    """PID 1 of the sandbox (kiln-agent) gets SIGKILL from the host: the
    container's init is gone, so the sandbox is."""
    d = daemons(*ROOM)
    neighbour, victim = full_house(d)
    pids = d.host.pids(victim)
    r = subprocess.run([runsc(), "--root", f"{d.state_dir}/runsc", "kill", victim, "KILL"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert_cleaned_and_room_back(d, neighbour, victim, pids)


def test_agent_kill_9_from_inside(daemons):
    """`sudo kill -9 1` inside: root in the sandbox may end its PID 1 (gVisor
    lets it), so the command's answer is 409 not_running and the sandbox is
    gone as if it had died."""
    d = daemons(*ROOM)
    neighbour, victim = full_house(d)
    pids = d.host.pids(victim)
    r = d.api.post(f"/v1/sandboxes/{victim}:exec", json={"command": "sudo kill -9 1; sleep 5",
                                                          "timeoutMs": 20000})
    assert_error(r, 409, "not_running", mentions=("stopped",))
    assert_cleaned_and_room_back(d, neighbour, victim, pids)


# --- runsc missing or broken at start -------------------------------------


def _script(tmp, name, body):
    p = Path(tmp) / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return str(p)


@pytest.mark.parametrize("kind,expect", [
    ("missing", "not found"),
    ("exits-1", "exited with status 1"),
    ("garbage", "no `runsc version` line"),
    ("not-executable", "not executable"),
])
def test_kilnd_refuses_to_start_with_a_broken_runsc(tmp_path, kind, expect):
    path = {
        "missing": str(tmp_path / "nonexistent"),
        "exits-1": _script(tmp_path, "r1", "echo broken >&2\nexit 1\n"),
        "garbage": _script(tmp_path, "r2", "echo 'hello, I am not runsc'\n"),
        "not-executable": str(tmp_path / "plain"),
    }[kind]
    if kind == "not-executable":
        Path(path).write_text("not a program")
    state = tmp_path / "state"
    t0 = time.monotonic()
    rc, out = run_kilnd_expecting_exit(state, "--runsc", path)
    assert rc != 0, out
    assert time.monotonic() - t0 < 30
    assert path in out and expect in out, out
    if kind == "exits-1":
        assert "broken" in out, out  # its own words are passed on
    assert not (state / "kiln.db").exists(), "kilnd touched state before refusing"


# --- SQLite -----------------------------------------------------------------


def _state_with_db(daemons_fixture):
    """A state dir with a real kiln.db from a kilnd that stopped cleanly."""
    d = daemons_fixture()
    d.api.ok("POST", "/v1/keys", json={"name": "kept"})
    assert stop_kilnd(d) == 0
    return d


def test_a_locked_database_at_start_is_refused_and_left_alone(daemons):
    d = _state_with_db(daemons)
    db = Path(d.state_dir) / "kiln.db"
    before = sha256(db)
    holder = sqlite3.connect(str(db), isolation_level=None, timeout=1)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.monotonic()
        rc, out = run_kilnd_expecting_exit(d.state_dir, within=60)
        took = time.monotonic() - t0
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert rc != 0, out
    assert str(db) in out and "locked" in out, out
    assert took < 30, took
    assert sha256(db) == before
    # Once the lock goes, the same state dir starts and has its data.
    d2 = daemons(state_dir=d.state_dir)
    names = [k.get("name") for k in d2.api.ok("GET", "/v1/keys")["data"]]
    assert "kept" in names, names


@pytest.mark.parametrize("how", ["header", "pages"])
def test_a_corrupted_database_at_start_is_refused_and_left_alone(daemons, how):
    d = _state_with_db(daemons)
    db = Path(d.state_dir) / "kiln.db"
    for extra in ("-wal", "-shm"):
        Path(str(db) + extra).unlink(missing_ok=True)
    data = bytearray(db.read_bytes())
    assert len(data) >= 4 * 4096, len(data)
    if how == "header":
        data[0:16] = b"this is no db!!\0"
    else:  # a valid header over garbage pages: only a check finds it
        for i in range(4096, len(data), 7):
            data[i] = (data[i] * 31 + 17) & 0xFF
    db.write_bytes(bytes(data))
    before = sha256(db)
    t0 = time.monotonic()
    rc, out = run_kilnd_expecting_exit(d.state_dir, within=60)
    assert rc != 0, out
    assert time.monotonic() - t0 < 30
    assert str(db) in out, out
    assert any(w in out for w in ("not a database", "malformed", "corrupt")), out
    assert sha256(db) == before, "kilnd altered the corrupted database"


def test_a_lock_held_while_running_delays_writes_then_they_land(daemons):
    d = daemons()
    db = Path(d.state_dir) / "kiln.db"
    holder = sqlite3.connect(str(db), isolation_level=None, timeout=10)
    answers = {}

    def write():
        t0 = time.monotonic()
        answers["key"] = d.api.post("/v1/keys", json={"name": "during-lock"})
        answers["key_s"] = time.monotonic() - t0

    holder.execute("BEGIN EXCLUSIVE")
    try:
        th = threading.Thread(target=write)
        th.start()
        time.sleep(3)
        assert d.api.health().status == 200  # reads and health still answer
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    th.join(30)
    assert not th.is_alive(), "a write hung after the lock went"
    r = answers["key"]
    # busy_timeout is 5 s: a 3 s lock delays the write, which then lands.
    assert r.status in (200, 201), r
    assert answers["key_s"] >= 2.0, answers
    names = [k.get("name") for k in d.api.ok("GET", "/v1/keys")["data"]]
    assert "during-lock" in names
    s = d.api.create(vcpu=1, memoryMiB=256)
    assert d.api.exec(s["id"], argv=["true"])["exitCode"] == 0
    check = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        check.close()


# --- the host clock steps -----------------------------------------------------


class stepped_clock:
    """Steps CLOCK_REALTIME by `delta` seconds and, on exit, puts it back to
    the true time computed from CLOCK_MONOTONIC taken before the step."""

    def __init__(self, delta):
        self.delta = delta

    def __enter__(self):
        self.wall0 = time.clock_gettime(time.CLOCK_REALTIME)
        self.mono0 = time.clock_gettime(time.CLOCK_MONOTONIC)
        time.clock_settime(time.CLOCK_REALTIME, self.wall0 + self.delta)
        return self

    def __exit__(self, *exc):
        true_now = self.wall0 + (time.clock_gettime(time.CLOCK_MONOTONIC) - self.mono0)
        time.clock_settime(time.CLOCK_REALTIME, true_now)


@pytest.mark.hostile  # waits out a 60 s lease
def test_leases_ignore_host_clock_steps(daemons):
    d = daemons("--meter-interval-ms", "500")
    t0 = time.monotonic()
    s = d.api.create(vcpu=1, memoryMiB=256, timeoutSeconds=60)
    sid = s["id"]
    with stepped_clock(+2 * 3600):
        time.sleep(3)  # kilnd's lifetime pass runs while the clock is 2 h ahead
        during = d.api.sandbox(sid)
    assert during["state"] == "running", f"a forward step ended the lease: {during!r}"
    assert d.api.sandbox(sid)["state"] == "running"
    assert d.api.exec(sid, argv=["true"])["exitCode"] == 0
    with stepped_clock(-2 * 3600):
        time.sleep(3)
        during = d.api.sandbox(sid)
    assert during["state"] == "running", during
    info = wait_stopped(d.api, sid, within=120)
    ended = time.monotonic() - t0
    assert info["stopReason"] == "lease_expired", info
    # It ends at its lease: not 2 h later, not before 60 s.
    assert 55 <= ended <= 100, ended
    assert d.alive() and d.api.health().status == 200
