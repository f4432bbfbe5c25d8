"""The policy with root inside its sandbox (sudo is on by default) against
the agent, PID 1, whose channel reaches kilnd: it stops the agent with
ptrace, writes forged frames where the agent's answers go, floods the
agent's stderr, and kills it. Each attack may end its own sandbox (that is
the remedy: the sandbox is stopped, with a stopReason that says why) but
nothing else: kilnd keeps running without growing, a neighbour keeps
answering (its exec median is printed, see attacks.py), and a stopped
sandbox leaves nothing on the host."""
import json
import re
import socket
import threading
import time

import pytest

from attacks import FORGE, PTRACE_AGENT, neighbour, rss_kib, under_attack  # noqa: F401
from lib.waits import wait_stopped
from conftest import start_kilnd, stop_kilnd
from escape_common import quote

# Alone, after the parallel part of make test (conftest.py: serial).
pytestmark = pytest.mark.serial

MiB = 1 << 20


def _box(api):
    return api.create(vcpu=1, memoryMiB=512)["id"]


def _trace_agent(api, sid, hold="600"):
    """Stops the agent with ptrace from a root process in the background.
    Nothing can ask the agent whether it is stopped (it answers nothing
    then): the tracer attaches 1 s after its start, and this waits 3 s."""
    api.spawn(sid, command=f"sudo python3 -c {quote(PTRACE_AGENT)} {hold} 1")
    time.sleep(3)


def test_a_traced_agent_does_not_hold_up_delete(api, kilnd, host, neighbour):
    sid = _box(api)
    pids = host.pids(sid)

    def attack():
        _trace_agent(api, sid)
        # A write the agent never reads fills the channel; it must not hold
        # the stop that follows.
        writer = threading.Thread(
            target=lambda: api.request("PUT", f"/v1/sandboxes/{sid}/files/content",
                                       query={"path": "/tmp/big"}, data=b"x" * (4 * MiB),
                                       timeout=60), daemon=True)
        writer.start()
        time.sleep(1)
        t0 = time.monotonic()
        r = api.request("DELETE", f"/v1/sandboxes/{sid}", timeout=60)
        took = time.monotonic() - t0
        writer.join(60)
        return r, took

    r, took = under_attack(api, kilnd, neighbour, "ptrace the agent, then DELETE", attack)
    assert r.status == 200, r
    assert took < 10, f"DELETE took {took:.1f} s"
    assert host.wait_gone(sid, pids, timeout=10) == []


def test_a_traced_agent_gets_its_sandbox_stopped(api, kilnd, neighbour):
    sid = _box(api)

    def attack():
        _trace_agent(api, sid)
        t0 = time.monotonic()
        r = api.request("PUT", f"/v1/sandboxes/{sid}/files/content", query={"path": "/tmp/big"},
                        data=b"x" * (4 * MiB), timeout=90)
        return r, time.monotonic() - t0

    r, took = under_attack(api, kilnd, neighbour, "ptrace the agent, then a 4 MiB write", attack)
    # The write waited at most the channel's write deadline (20 s), then the
    # sandbox was stopped: an agent that takes no input is given up on.
    assert r.status >= 400, r
    assert took < 40, f"the write took {took:.1f} s"
    info = wait_stopped(api, sid, within=10)
    assert info["stopReason"] == "agent_unresponsive", info
    assert info["chargedMicros"] is not None


def test_kilnd_stopping_leaves_no_process_of_a_traced_sandbox(tmp_path):
    d = start_kilnd(tmp_path / "state")
    from client import Client
    api = Client(d.url, key=d.admin_key)
    from host import Host, runsc_of
    from conftest import BIN_DIR
    host = Host(d.state_dir, runsc_of(BIN_DIR / "kilnd"))
    sid = _box(api)
    pids = host.pids(sid)
    _trace_agent(api, sid)
    t0 = time.monotonic()
    assert stop_kilnd(d, timeout=60) == 0, d.log_tail()
    assert time.monotonic() - t0 < 30
    assert host.wait_gone(sid, pids, timeout=10) == []


@pytest.mark.parametrize("mode", ["garbage", "deep", "type"])
def test_forged_frames_stop_only_their_sandbox(api, kilnd, host, neighbour, mode):
    sid = _box(api)
    pids = host.pids(sid)
    rss_before = rss_kib(kilnd.proc.pid)

    def attack():
        # The exec that forges ends with its sandbox: its answer is an error.
        return api.request("POST", f"/v1/sandboxes/{sid}:exec", timeout=90,
                           json={"command": f"sudo python3 -c {quote(FORGE)} {mode}",
                                 "timeoutMs": 60000})

    under_attack(api, kilnd, neighbour, f"forged frames: {mode}", attack)
    info = wait_stopped(api, sid, within=15)
    assert info["stopReason"] == "agent_protocol_error", info
    assert host.wait_gone(sid, pids, timeout=10) == []
    grown = rss_kib(kilnd.proc.pid) - rss_before
    assert grown < 64 * 1024, f"kilnd grew by {grown} KiB"
    assert "agent.broken" in kilnd.log_tail(400)


def _stream_id(api, sid):
    """The stream id of an exec of this sandbox's: a forged "ID=<n>" reaches
    only the caller's own open exec, as its output."""
    probe = api.exec(sid, command=f"sudo python3 -c {quote(FORGE)} probe 1 200")
    ids = [int(x) for x in re.findall(r"ID=(\d+)", probe["stdout"])]
    assert len(ids) == 1, probe
    return ids[0]


def test_output_past_the_window_of_a_stalled_stream_stops_its_sandbox(api, kilnd, host, neighbour):
    """An exec stream whose client reads nothing acknowledges nothing: an
    agent that sends on past its window is cut off."""
    sid = _box(api)
    pids = host.pids(sid)
    first = _stream_id(api, sid) + 1
    host_, port = kilnd.url.split("//")[1].split(":")
    stalled = socket.create_connection((host_, int(port)), timeout=30)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    body = json.dumps({"command": "sleep 60", "stream": True}).encode()
    stalled.sendall(f"POST /v1/sandboxes/{sid}:exec HTTP/1.1\r\nHost: k\r\n"
                    f"Authorization: Bearer {kilnd.admin_key}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    time.sleep(1)
    rss_before = rss_kib(kilnd.proc.pid)

    def attack():
        return api.request("POST", f"/v1/sandboxes/{sid}:exec", timeout=120,
                           json={"command": f"sudo python3 -c {quote(FORGE)} window "
                                            f"{first} {first + 3} 4200", "timeoutMs": 100000})

    try:
        under_attack(api, kilnd, neighbour, "forged frames: output past the window", attack)
        info = wait_stopped(api, sid, within=15)
        assert info["stopReason"] == "agent_protocol_error", info
        assert host.wait_gone(sid, pids, timeout=10) == []
        grown = rss_kib(kilnd.proc.pid) - rss_before
        assert grown < 64 * 1024, f"kilnd grew by {grown} KiB"
    finally:
        stalled.close()


def test_one_message_in_endless_fragments_stops_its_sandbox(api, kilnd, host, neighbour):
    sid = _box(api)
    pids = host.pids(sid)
    ids = [_stream_id(api, sid)]
    rss_before = rss_kib(kilnd.proc.pid)

    def attack():
        # The next exec's stream follows (an op of kilnd's own may come between).
        return api.request("POST", f"/v1/sandboxes/{sid}:exec", timeout=150,
                           json={"command": f"sudo python3 -c {quote(FORGE)} fragments "
                                            f"{ids[0] + 1} {ids[0] + 4}", "timeoutMs": 120000})

    under_attack(api, kilnd, neighbour, "forged frames: 17 MiB of fragments", attack)
    info = wait_stopped(api, sid, within=15)
    assert info["stopReason"] == "agent_protocol_error", info
    assert host.wait_gone(sid, pids, timeout=10) == []
    grown = rss_kib(kilnd.proc.pid) - rss_before
    assert grown < 96 * 1024, f"kilnd grew by {grown} KiB"


def test_a_flood_of_the_agents_stderr_is_capped(api, kilnd, host, neighbour):
    sid = _box(api)
    log = host.sandbox_dir(sid) / "sandbox.log"

    def attack():
        return api.exec(sid, command="sudo timeout 5 sh -c 'yes kiln-stderr-flood > /proc/1/fd/2'",
                        timeoutMs=30000)

    under_attack(api, kilnd, neighbour, "flood PID 1's stderr", attack)
    size = log.stat().st_size
    assert size <= MiB + 4096, f"sandbox.log holds {size} bytes"
    assert "rest is dropped" in log.read_text(errors="replace")[-200:]
    assert api.sh(sid, "echo alive") == "alive\n"  # the agent is not held up by it
    api.delete(sid)


def test_a_killed_agent_ends_only_its_sandbox(api, kilnd, host, neighbour):
    sid = _box(api)
    pids = host.pids(sid)

    def attack():
        api.spawn(sid, command=f"sudo python3 -c {quote(PTRACE_AGENT)} kill 0.5")
        return wait_stopped(api, sid, within=20)

    info = under_attack(api, kilnd, neighbour, "kill the agent (PTRACE_KILL)", attack)
    assert info["stopReason"] in ("sandbox_died", "agent_protocol_error"), info
    assert host.wait_gone(sid, pids, timeout=10) == []


def test_a_read_of_a_device_or_an_endless_file_is_refused_or_capped(api, kilnd, neighbour):
    """Policy code points the file a trainer downloads at a device, a FIFO or a file that
    grows while it is read: kilnd answers at once, with at most what the file held when it
    was opened, and does not grow (a read of /dev/zero once grew it to 3.4 GiB)."""
    sid = _box(api)
    api.sh(sid, "ln -s /dev/zero /workspace/result.bin && mkfifo /workspace/pipe && "
                "(sh -c 'while :; do echo kiln-endless-file; sleep 0.001; done' > /workspace/grows &) && sleep 1")
    rss_before = rss_kib(kilnd.proc.pid)

    def attack():
        answers = {}
        for path in ("/dev/zero", "/dev/urandom", "/workspace/result.bin", "/workspace/pipe"):
            answers[path] = api.get(f"/v1/sandboxes/{sid}/files/content", query={"path": path},
                                    timeout=30)
        size = int(api.sh(sid, "stat -c %s /workspace/grows"))
        answers["grows"] = (size, api.read_file(sid, "/workspace/grows"))
        return answers

    answers = under_attack(api, kilnd, neighbour, "read devices, a FIFO and a growing file", attack)
    for path in ("/dev/zero", "/dev/urandom", "/workspace/result.bin", "/workspace/pipe"):
        err = answers[path]
        assert err.status == 400 and "not a regular file" in err.json()["error"]["message"], (path, err)
    size, got = answers["grows"]
    # What the file held when it was opened (it grew on meanwhile), never what it became.
    assert size <= len(got.body) <= size + MiB, (size, len(got.body))
    assert got.body.startswith(b"kiln-endless-file\n")
    proc_status = api.read_file(sid, "/proc/self/status").body  # procfs reports size 0
    assert b"Name:" in proc_status
    grown = rss_kib(kilnd.proc.pid) - rss_before
    assert grown < 64 * 1024 + len(got.body) // 1024, f"kilnd grew by {grown} KiB"
    api.delete(sid)
