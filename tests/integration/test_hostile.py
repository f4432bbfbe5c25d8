"""Hostile workloads, each in its own sandbox, while a neighbour sandbox is
measured: its exec latency (median of 10 `true` execs) under attack must stay
within 2x its idle median + 20 ms, and the daemon must keep answering.

Attackers get vcpu=1 so that on a 2-core host one core is left to share; the
attack itself is the point, not a fight for the last core."""
import os
import statistics
import threading
import time

import pytest

pytestmark = [pytest.mark.hostile, pytest.mark.serial]

ALLOWANCE_S = 0.020
MiB = 1 << 20


def exec_latency(api, sid, n=10):
    samples = []
    for _ in range(n):
        t0 = time.monotonic()
        r = api.exec(sid, argv=["true"], timeoutMs=30000)
        samples.append(time.monotonic() - t0)
        assert r["exitCode"] == 0, r
    return statistics.median(samples), samples


def _ms(xs):
    return "[" + ", ".join(f"{x * 1000:.1f}" for x in xs) + "] ms"


@pytest.fixture(scope="module")
def neighbour(api):
    info = api.create(vcpu=1, memoryMiB=512)
    exec_latency(api, info["id"], 5)  # warm up
    yield info["id"]
    api.request("DELETE", f"/v1/sandboxes/{info['id']}")


def under_attack(api, kilnd, neighbour, attack, settle=0.5):
    """Runs attack() in a thread and measures the neighbour meanwhile.
    Returns attack()'s return value."""
    idle, idle_samples = exec_latency(api, neighbour)
    box = {}

    def run():
        try:
            box["result"] = attack()
        except BaseException as e:  # noqa: BLE001 -- re-raised below
            box["error"] = e

    th = threading.Thread(target=run, daemon=True)
    th.start()
    time.sleep(settle)
    t0 = time.monotonic()
    health = api.health()
    health_s = time.monotonic() - t0
    during, samples = exec_latency(api, neighbour)
    still_running = th.is_alive()
    th.join(180)
    assert not th.is_alive(), "the attacking call did not return within 180 s"
    if "error" in box:
        raise box["error"]
    figures = (f"neighbour median idle {idle * 1000:.1f} ms {_ms(idle_samples)}, under attack "
               f"{during * 1000:.1f} ms {_ms(samples)}; attack still running at the end: {still_running}")
    print(figures)
    assert health.status == 200 and health_s < 1.0, f"health {health!r} took {health_s:.2f} s"
    assert during <= 2 * idle + ALLOWANCE_S, figures
    assert kilnd.alive(), f"kilnd died:\n{kilnd.log_tail()}"
    assert api.health().status == 200
    return box["result"]


def test_output_flood(api, kilnd, neighbour, sandboxes):
    sid = sandboxes.create(vcpu=1)["id"]
    r = under_attack(api, kilnd, neighbour,
                     lambda: api.exec(sid, command="head -c 1000000000 /dev/zero", timeoutMs=120000), settle=0.3)
    # The answer's cap is 1 MiB past a 60 s timeoutMs (the reference's rule).
    assert r["stdoutTruncated"] is True and len(r["stdout"]) == 1 << 20, {k: r[k] for k in r if k != "stdout"}
    assert r["exitCode"] == 0 or r["timedOut"], {k: r[k] for k in r if k != "stdout"}
    assert api.sh(sid, "echo fine") == "fine\n"


def test_fork_bomb(api, kilnd, neighbour, sandboxes):
    sid = sandboxes.create(vcpu=1, memoryMiB=1024)["id"]
    r = under_attack(api, kilnd, neighbour,
                     lambda: api.exec(sid, command=":(){ :|:& };:; sleep 60", timeoutMs=5000), settle=1.0)
    # The shell stays (sleep) while the bomb grows, so the exec times out.
    assert r["timedOut"] and r["exitCode"] is None, r
    # everything the bomb started is gone once its exec has answered
    deadline, n = time.monotonic() + 15, None
    while time.monotonic() < deadline:
        n = len(api.sh(sid, "ps -e --no-headers").splitlines())
        if n < 10:
            break
        time.sleep(0.5)
    assert n < 10, f"{n} processes left in the sandbox after the fork bomb's exec returned"


def _host_free_mib(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / MiB


def test_disk_fill(api, kilnd, host, neighbour, sandboxes):
    # More disk than memory: a fill ends in ENOSPC at diskMiB, on host disk,
    # while the sandbox's memory stays within memoryMiB.
    sid = sandboxes.create(vcpu=1, memoryMiB=512, diskMiB=1024)["id"]
    free_before = _host_free_mib(kilnd.state_dir)
    r = under_attack(api, kilnd, neighbour,
                     lambda: api.exec(sid, command="dd if=/dev/zero of=/workspace/fill bs=1M", timeoutMs=120000))
    assert r["exitCode"] != 0 and not r["timedOut"], r
    assert "No space left on device" in r["stderr"], r
    size = int(api.sh(sid, "stat -c %s /workspace/fill"))
    assert 1000 * MiB <= size <= 1024 * MiB, size
    # /tmp and the rest of the root are the same disk: full too.
    r = api.exec(sid, command="echo x > /tmp/more")
    assert r["exitCode"] != 0 and "No space left on device" in r["stderr"], r
    used = host.anon_bytes(sid)
    assert used < 512 * MiB, f"a 1 GiB disk fill took {used / MiB:.0f} MiB of sandbox memory"
    assert _host_free_mib(kilnd.state_dir) < free_before - 512, "the fill did not reach host disk"
    assert api.sh(sid, "rm /workspace/fill && echo again > /workspace/x && cat /workspace/x") == "again\n"
    assert api.sh(neighbour, "echo n > /workspace/n && cat /workspace/n") == "n\n"
    api.sh(sid, "head -c 700000000 /dev/zero > /workspace/fill2")
    api.delete(sid)
    freed = _host_free_mib(kilnd.state_dir) - (free_before - 700)
    assert freed > 500, f"stopping the sandbox gave back only {freed + 700:.0f} of ~700 MiB of host disk"


def test_memory_bomb(api, kilnd, neighbour, sandboxes):
    sid = sandboxes.create(vcpu=1, memoryMiB=256)["id"]
    bomb = ("keep = []\n"
            "for i in range(64):\n"
            "    keep.append(bytearray(b'\\x01') * (32 << 20))\n"
            "print('survived', flush=True)\n")
    r = under_attack(api, kilnd, neighbour,
                     lambda: api.exec(sid, argv=["python3", "-c", bomb], timeoutMs=60000), settle=0.2)
    assert "survived" not in r["stdout"] and r["exitCode"] != 0, r


def test_sleep_forever(api, kilnd, neighbour, sandboxes):
    sid = sandboxes.create(vcpu=1)["id"]
    t0 = time.monotonic()
    r = under_attack(api, kilnd, neighbour,
                     lambda: api.exec(sid, command="echo zz; sleep infinity", timeoutMs=3000), settle=0.2)
    assert r["timedOut"] is True and r["stdout"] == "zz\n", r
    assert 2900 <= r["durationMs"] < 10000 and time.monotonic() - t0 < 30, r


def test_kill_everything(api, kilnd, neighbour, sandboxes):
    sid = sandboxes.create(vcpu=1)["id"]
    bg = api.spawn(sid, argv=["sleep", "1000"])

    def attack():
        user = api.exec(sid, command="kill -9 -1; echo user-done", timeoutMs=20000)
        # root may kill the command's own helpers: an error answer is fine, a hang is not
        root = api.post(f"/v1/sandboxes/{sid}:exec", json={"command": "sudo kill -9 -1", "timeoutMs": 20000})
        return user, root

    user, root = under_attack(api, kilnd, neighbour, attack, settle=0.1)
    assert user["stdout"] == "user-done\n", user
    assert root.status == 200 or "error" in root.json(), root
    assert api.wait_process(sid, bg["id"])["state"] != "running", "kill -9 -1 missed a process"
    # the sandbox's agent survives it (it is PID 1 inside) and keeps serving
    assert api.sh(sid, "echo still-here") == "still-here\n"
