"""Shared parts of the attacker suites (test_attack_*.py): the policy with
root inside its sandbox against the agent's channel, and the tenant key
against images and imports.

A neighbour sandbox is measured during each attack: the median of 10 `true`
execs before and during. The figures are printed as one `NEIGHBOUR {json}`
line per attack (docs/guide.md, "Bad input and hostile code", records a run of them);
they are not timed assertions -- the suite asserts that the neighbour kept
answering and that kilnd stayed alive and healthy.
"""
import json
import os
import statistics
import threading
import time

import pytest


def exec_p50(api, sid, n=10):
    samples = []
    for _ in range(n):
        t0 = time.monotonic()
        r = api.exec(sid, argv=["true"], timeoutMs=30000)
        samples.append(time.monotonic() - t0)
        assert r["exitCode"] == 0, r
    return statistics.median(samples)


@pytest.fixture(scope="module")
def neighbour(api):
    info = api.create(vcpu=1, memoryMiB=512)
    exec_p50(api, info["id"], 5)  # warm up
    yield info["id"]
    api.request("DELETE", f"/v1/sandboxes/{info['id']}")


def under_attack(api, kilnd, neighbour, name, attack, settle=0.3):
    """Runs attack() in a thread while the neighbour is measured; prints the
    figures, checks the neighbour answered and kilnd is alive, and returns
    attack()'s value (re-raising what it raised)."""
    idle = exec_p50(api, neighbour)
    box = {}

    def run():
        try:
            box["result"] = attack()
        except BaseException as e:  # noqa: BLE001 -- re-raised below
            box["error"] = e

    th = threading.Thread(target=run, daemon=True)
    th.start()
    time.sleep(settle)
    during = exec_p50(api, neighbour)
    th.join(240)
    assert not th.is_alive(), f"the attack {name} did not end within 240 s"
    figures = {"attack": name, "idleP50Ms": round(idle * 1000, 1),
               "duringP50Ms": round(during * 1000, 1), "ratio": round(during / idle, 2)}
    print("NEIGHBOUR " + json.dumps(figures))
    if os.environ.get("KILN_ATTACK_FIGURES"):  # the session's summary shows them (conftest.py)
        with open(os.environ["KILN_ATTACK_FIGURES"], "a") as f:
            f.write(json.dumps(figures) + "\n")
    assert kilnd.alive(), f"kilnd died:\n{kilnd.log_tail()}"
    assert api.health().status == 200
    if "error" in box:
        raise box["error"]
    return box.get("result")




def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# Runs as root inside a sandbox: writes frames of the agent protocol
# (src/proto/frame.h) onto PID 1's stdout, the channel kilnd reads as the
# agent's. Each frame is at most 4096 bytes, so each write(2) is atomic
# against the agent's own writes on the same FIFO.
#   forge.py MODE [FIRST LAST [FRAMES]]   streams FIRST..LAST (default 1..64)
# MODEs: garbage, window (FRAMES frames of 4000 bytes of output on each
# stream, default 220: past the flow-control window), deep (an
# answer nested 100,000 deep), type (a frame type no agent sends), probe
# (data "ID=<n>" on stdout of every stream: the caller's exec shows its own
# id), fragments (17 MiB of one unfinished message on each stream).
FORGE = r'''
import os, struct, sys
def check(h):
    c = 0xA5
    for b in h:
        c = (((c << 1) | (c >> 7)) & 0xff) ^ b
    return c
def frame(typ, stream, payload, flags=0, channel=0):
    h = struct.pack("<II", len(payload), stream) + bytes([typ, flags, channel])
    return h + bytes([check(h)]) + payload
mode = sys.argv[1]
first, last = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (1, 64)
frames = int(sys.argv[4]) if len(sys.argv) > 4 else 220
fd = os.open("/proc/1/fd/1", os.O_WRONLY)
def put(f):
    os.write(fd, f)
if mode == "garbage":
    for _ in range(64):
        put(os.urandom(4096))
elif mode == "window":
    chunk = b"x" * 4000
    for s in range(first, last + 1):
        for _ in range(frames):
            put(frame(2, s, chunk, channel=1))
elif mode == "deep":
    body = b"[" * 4000
    for s in range(first, last + 1):
        for _ in range(30):
            put(frame(4, s, body, flags=1))
        put(frame(4, s, b"[" * 10))
elif mode == "type":
    put(frame(1, first, b"{}"))
elif mode == "probe":
    for s in range(first, last + 1):
        put(frame(2, s, ("ID=%d\n" % s).encode(), channel=1))
elif mode == "fragments":
    chunk = b"a" * 4000
    for s in range(first, last + 1):
        for _ in range(17 * 1024 * 1024 // 4000 + 1):
            put(frame(3, s, chunk, flags=1))
print("sent", flush=True)
'''


# Runs as root inside a sandbox: after DELAY seconds (so that the call that
# started it is answered first) attaches to PID 1 (the agent) with
# PTRACE_ATTACH and keeps it stopped for HOLD seconds; HOLD "kill" ends it
# with PTRACE_KILL instead.   ptrace.py HOLD DELAY
PTRACE_AGENT = r'''
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
time.sleep(float(sys.argv[2]))
if libc.ptrace(16, 1, None, None) != 0:
    print("attach failed:", os.strerror(ctypes.get_errno()), flush=True); sys.exit(1)
os.waitpid(1, 0)
print("attached", flush=True)
if sys.argv[1] == "kill":
    libc.ptrace(8, 1, None, None)
else:
    time.sleep(float(sys.argv[1]))
'''
