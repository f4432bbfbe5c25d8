"""After stop or DELETE nothing of a sandbox is left on the host: no process,
mount, cgroup, runsc state or working directory."""
import os
import signal
import threading
import time

from client import assert_error


def busy_sandbox(api, host, sandboxes):
    """A sandbox with a background process, files and a streamed exec running;
    returns (id, {pid: starttime} of its host processes)."""
    sid = sandboxes.create(vcpu=1, memoryMiB=512)["id"]
    api.spawn(sid, command="sleep 1000 & python3 -m http.server 8000 --bind 127.0.0.1")
    api.write_file(sid, "/workspace/data/big", os.urandom(4 << 20))
    api.sh(sid, "echo x > /tmp/t && sudo sh -c 'echo y > /etc/y'")
    seen = host.traces(sid)
    # the probe must see a live sandbox, or its "nothing left" proves nothing
    assert any(t.startswith("directory") for t in seen), f"no {host.sandbox_dir(sid)}: {seen}"
    assert any(t.startswith("process") for t in seen), f"no host process names {sid}: {seen}"
    assert "runsc list still shows it" in seen, f"runsc --root {host.state_dir}/runsc list: {seen}"
    for c in ("memory", "cpu", "pids"):
        assert f"cgroup {host.cgroup(c, sid)}" in seen, seen
    return sid, host.pids(sid)


def test_stop_leaves_nothing(api, host, sandboxes):
    sid, pids = busy_sandbox(api, host, sandboxes)
    info = api.stop(sid)
    assert (info["state"], info["stopReason"]) == ("stopped", "requested"), info
    assert host.traces(sid, pids) == []
    api.delete(sid)
    assert host.traces(sid, pids) == []
    assert_error(api.get(f"/v1/sandboxes/{sid}"), 404, "not_found")


def test_delete_running_leaves_nothing(api, host, sandboxes):
    sid, pids = busy_sandbox(api, host, sandboxes)
    d = api.delete(sid)
    assert (d["status"], d["state"]) == ("deleted", "stopped"), d
    assert host.traces(sid, pids) == []
    assert_error(api.get(f"/v1/sandboxes/{sid}"), 404, "not_found")
    assert sid not in [s["id"] for s in api.ok("GET", "/v1/sandboxes", query={"includeStopped": True})["data"]]


def test_stop_during_exec(api, host, sandboxes):
    sid, pids = busy_sandbox(api, host, sandboxes)
    box = {}

    def slow():
        box["answer"] = api.post(f"/v1/sandboxes/{sid}:exec", json={"command": "sleep 60"})

    th = threading.Thread(target=slow, daemon=True)
    th.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    api.stop(sid)
    th.join(15)
    assert not th.is_alive(), "an exec in flight hung after its sandbox stopped"
    assert time.monotonic() - t0 < 15
    a = box["answer"]
    assert a.status == 200 or "error" in a.json(), a
    assert host.traces(sid, pids) == []


def test_dead_sandbox_is_reaped(api, host, sandboxes):
    sid, pids = busy_sandbox(api, host, sandboxes)
    boot = [p for p in pids if "runsc-sandbox" in _cmdline(p) or " boot " in _cmdline(p)]
    assert boot, f"no runsc-sandbox process among {[(p, _cmdline(p)[:80]) for p in pids]}"
    for p in boot:
        os.kill(p, signal.SIGKILL)  # the sandbox dies under the daemon's feet
    deadline, info = time.monotonic() + 30, None
    while time.monotonic() < deadline:
        info = api.sandbox(sid)
        if info["state"] == "stopped":
            break
        time.sleep(0.2)
    assert (info["state"], info["stopReason"]) == ("stopped", "sandbox_died"), info
    assert host.wait_gone(sid, pids, timeout=10) == []
    assert api.health().status == 200


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""
