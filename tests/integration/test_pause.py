"""Pause and wake, persistent sandboxes, names, limits (issue 14, items 1-3, 5)."""
import json
import threading
import time
import uuid
from pathlib import Path

import pytest

from client import Client, assert_error
from conftest import start_kilnd, stop_kilnd
from test_control_plane import daemons, metric, new_key, wait_for  # noqa: F401 -- fixture
from counter_server import counter, start_counter

BURN = "python3 -c 'import time; t = time.time()\nwhile time.time() - t < {s}: pass'"


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def pause(api, sid):
    info = api.ok("POST", f"/v1/sandboxes/{sid}:pause", json={})
    assert info["state"] == "paused", info
    return info


def checkpoint_dir(state_dir, sid):
    """The directory of a paused sandbox's checkpoint, from the manifests."""
    for manifest in Path(state_dir, "snapshots").glob("*/manifest.json"):
        record = json.loads(manifest.read_text()).get("record", {})
        if record.get("pausedSandbox") == sid:
            return manifest.parent
    return None


@pytest.fixture(scope="module")
def lease_ends(api):
    """Three 60 s leases started when the module starts, checked at its end:
    onLeaseEnd pause, persistent, delete, and the default (stop)."""
    made = {
        "pause": api.create(vcpu=1, memoryMiB=256, timeoutSeconds=60, onLeaseEnd="pause"),
        "persistent": api.create(vcpu=1, memoryMiB=256, timeoutSeconds=60, persistent=True,
                                 onLeaseEnd="stop"),
        "stop": api.create(vcpu=1, memoryMiB=256, timeoutSeconds=60),
        "delete": api.create(vcpu=1, memoryMiB=256, timeoutSeconds=60, onLeaseEnd="delete"),
    }
    assert made["delete"]["onLeaseEnd"] == "delete"
    made["started"] = time.monotonic()
    api.sh(made["pause"]["id"], "echo lease > /workspace/lease.txt")
    yield made
    for k in ("pause", "persistent", "stop", "delete"):
        api.request("DELETE", f"/v1/sandboxes/{made[k]['id']}")


def test_create_fields_are_shown(api, sandboxes, lease_ends):
    s = sandboxes.create(vcpu=1, memoryMiB=256, idlePauseSeconds=600, autoWake=False,
                         onLeaseEnd="pause", maxTotalCostMicros=10_000_000, funding="paid",
                         region="local", cpuFloorMillis=50)
    assert s["idlePauseSeconds"] == 600 and s["autoWake"] is False and s["onLeaseEnd"] == "pause"
    assert s["pausable"] is True and s["persistent"] is False and s["sudo"] is True
    assert s["maxTotalCostMicros"] == 10_000_000 and s["pausedAt"] is None
    assert s["status"] == "active" and s["reused"] is False
    d = sandboxes.create(vcpu=1, memoryMiB=256)
    assert d["onLeaseEnd"] == "stop" and d["autoWake"] is True and d["idlePauseSeconds"] == 0


def test_pause_and_wake_keep_id_files_processes_and_memory(api, sandboxes, host):
    sid = sandboxes.create(vcpu=1, memoryMiB=512)["id"]
    api.sh(sid, "echo kept > /workspace/f.txt; echo tmp > /tmp/t.txt")
    start_counter(api, sid)
    assert counter(api, sid) == 1
    reserved = metric(api, "kiln_capacity_reserved_memory_mib")
    before = api.sandbox(sid)
    p = pause(api, sid)
    assert p["status"] == "paused" and p["pausedAt"] and p["stopReason"] == "requested"
    # Nothing of it runs and its memory is given back.
    assert not any(sid in x for x in host.runsc_ids())
    assert not host.pids(sid)
    assert metric(api, "kiln_capacity_reserved_memory_mib") == reserved - 512
    assert sid in [x["id"] for x in api.ok("GET", "/v1/sandboxes", query={"state": "paused"})["data"]]
    assert metric(api, "kiln_sandboxes", '{state="paused"}') >= 1
    time.sleep(2)
    w = api.ok("POST", f"/v1/sandboxes/{sid}:wake", json={})
    assert w["id"] == sid and w["state"] == "running" and w["pausedAt"] is None
    assert w["stopReason"] is None
    # Its lease clock stopped while paused.
    assert w["expiresAt"] > before["expiresAt"]
    assert counter(api, sid) == 2
    assert api.sh(sid, "cat /workspace/f.txt /tmp/t.txt") == "kept\ntmp\n"
    assert metric(api, "kiln_capacity_reserved_memory_mib") == reserved
    # And again: a woken sandbox pauses like any other.
    pause(api, sid)
    api.ok("POST", f"/v1/sandboxes/{sid}:wake", json={"timeoutSeconds": 120})
    assert counter(api, sid) == 3


def test_pause_and_wake_refusals(api, sandboxes):
    fixed = sandboxes.create(vcpu=1, memoryMiB=256, pausable=False)
    assert_error(api.post(f"/v1/sandboxes/{fixed['id']}:pause", json={}), 409, "not_pausable")
    assert api.sandbox(fixed["id"])["state"] == "running"
    s = sandboxes.create(vcpu=1, memoryMiB=256)["id"]
    assert_error(api.post(f"/v1/sandboxes/{s}:wake", json={}), 409, "not_paused")
    pause(api, s)
    pause(api, s)  # pausing a paused sandbox is done already
    api.stop(s)
    assert_error(api.post(f"/v1/sandboxes/{s}:pause", json={}), 409, "not_running")
    assert_error(api.post(f"/v1/sandboxes/{s}:wake", json={}), 409, "not_running")
    bad = [
        ({"onLeaseEnd": "hibernate"}, "onLeaseEnd"),
        ({"idlePauseSeconds": 5}, "idlePauseSeconds"),
        ({"idlePauseSeconds": 86401}, "idlePauseSeconds"),
        ({"pausable": False, "persistent": True}, "persistent"),
        ({"pausable": False, "idlePauseSeconds": 60}, "idlePauseSeconds"),
        ({"autoWake": "yes"}, "autoWake"),
        ({"getOrCreate": True}, "getOrCreate"),
        ({"cpuFloorMillis": 10}, "cpuFloorMillis"),
    ]
    for body, field in bad:
        assert_error(api.post("/v1/sandboxes", json=body), 400, "invalid_request", mentions=(field,))
    assert_error(api.post("/v1/sandboxes", json={"volumes": [{"volumeId": "v", "path": "/data"}]}),
                 400, "not_supported", mentions=("volumes",))
    assert_error(api.post(f"/v1/sandboxes/{s}:wake", json={"timeoutSeconds": 5}), 400, "invalid_request",
                 mentions=("timeoutSeconds",))


def test_a_call_on_a_paused_sandbox_wakes_it_unless_auto_wake_is_off(api, sandboxes):
    a = sandboxes.create(vcpu=1, memoryMiB=256)["id"]
    api.sh(a, "echo a > /workspace/a.txt")
    pause(api, a)
    assert api.sandbox(a)["state"] == "paused"  # reading it does not wake it
    assert api.read_file(a, "/workspace/a.txt").body == b"a\n"
    assert api.sandbox(a)["state"] == "running"
    b = sandboxes.create(vcpu=1, memoryMiB=256, autoWake=False)["id"]
    pause(api, b)
    assert_error(api.post(f"/v1/sandboxes/{b}:exec", json={"command": "true"}), 409, "sandbox_paused",
                 mentions=(":wake",))
    assert_error(api.get(f"/v1/sandboxes/{b}/files/list", query={"path": "/workspace"}), 409, "sandbox_paused")
    assert api.sandbox(b)["state"] == "paused"


def test_idle_pause_after_no_activity_but_not_during_a_command(api, sandboxes):
    busy = sandboxes.create(vcpu=1, memoryMiB=256, idlePauseSeconds=10)["id"]
    idle = sandboxes.create(vcpu=1, memoryMiB=256, idlePauseSeconds=10)["id"]
    t0 = time.monotonic()
    r = api.exec(busy, command="sleep 13", timeoutMs=30000)
    assert r["exitCode"] == 0, r
    assert api.sandbox(busy)["state"] == "running"  # a running command is activity
    wait_for(lambda: api.sandbox(idle)["state"] == "paused", 30, "the idle sandbox to pause")
    assert time.monotonic() - t0 >= 9.5
    assert api.sandbox(idle)["stopReason"] == "idle"


def test_a_paused_sandbox_is_billed_only_for_its_checkpoint(api, sandboxes):
    sid = sandboxes.create(vcpu=2, memoryMiB=1024)["id"]
    run = sandboxes.create(vcpu=2, memoryMiB=1024)["id"]
    pause(api, sid)
    a, b = api.sandbox(sid)["chargedMicros"], api.sandbox(run)["chargedMicros"]
    time.sleep(12)  # two meter readings (every 5 s)
    paused_cost = api.sandbox(sid)["chargedMicros"] - a
    running_cost = api.sandbox(run)["chargedMicros"] - b
    # 12 s of 1 GiB and the floor cost ~30 micro-dollars; a checkpoint of a
    # few hundred MB, ~0.1.
    assert running_cost >= 15, running_cost
    assert paused_cost <= 1, paused_cost


def test_a_corrupted_checkpoint_is_refused_and_kept(api, sandboxes, kilnd):
    sid = sandboxes.create(vcpu=1, memoryMiB=256)["id"]
    pause(api, sid)
    d = checkpoint_dir(kilnd.state_dir, sid)
    assert d is not None, "no checkpoint on disk for the paused sandbox"
    biggest = max((p for p in d.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    with open(biggest, "r+b") as f:
        f.seek(4096)
        f.write(b"\x5a" * 64)
    assert_error(api.post(f"/v1/sandboxes/{sid}:wake", json={}), 409, "snapshot_corrupted")
    assert api.sandbox(sid)["state"] == "paused"
    assert biggest.exists()  # kept for inspection
    api.delete(sid)
    assert not d.exists()


def test_names_are_unique_among_live_sandboxes_and_get_or_create(api, sandboxes):
    name = unique("dev")
    a = sandboxes.create(vcpu=1, memoryMiB=256, name=name)
    r = api.post("/v1/sandboxes", json={"name": name})
    err = assert_error(r, 409, "name_taken", mentions=(name,))
    assert err["details"]["sandboxId"] == a["id"]
    found = api.ok("GET", "/v1/sandboxes", query={"name": name})["data"]
    assert [x["id"] for x in found] == [a["id"]]
    again = api.ok("POST", "/v1/sandboxes", json={"name": name, "getOrCreate": True, "vcpu": 2})
    assert again["id"] == a["id"] and again["reused"] is True and again["vcpu"] == 1
    pause(api, a["id"])
    woken = api.ok("POST", "/v1/sandboxes", json={"name": name, "getOrCreate": True})
    assert woken["id"] == a["id"] and woken["state"] == "running" and woken["reused"] is True
    # Another key has its own names.
    _, other = new_key(api, name=unique("k"))
    theirs = other.create(vcpu=1, memoryMiB=256, name=name)
    assert theirs["id"] != a["id"]
    other.delete(theirs["id"])
    api.stop(a["id"])
    fresh = api.ok("POST", "/v1/sandboxes", json={"name": name, "getOrCreate": True, "vcpu": 1,
                                                  "memoryMiB": 256})
    sandboxes.ids.append(fresh["id"])
    assert fresh["id"] != a["id"] and fresh["reused"] is False


def test_max_total_cost_stops_the_sandbox(api, sandboxes):
    sid = sandboxes.create(vcpu=1, memoryMiB=256, maxTotalCostMicros=5)["id"]
    # The cap may stop it while the command still runs: its answer is then 409.
    api.post(f"/v1/sandboxes/{sid}:exec", json={"command": BURN.format(s=2), "timeoutMs": 30000})
    wait_for(lambda: api.sandbox(sid)["state"] == "stopped", 30, "the cost cap to stop it")
    info = api.sandbox(sid)
    assert info["stopReason"] == "lifetime_cap" and info["chargedMicros"] >= 5


def test_lease_end_pauses_when_asked_or_persistent_and_stops_otherwise(api, lease_ends):
    left = 75 - (time.monotonic() - lease_ends["started"])
    if left > 0:
        time.sleep(left)
    p = api.sandbox(lease_ends["pause"]["id"])
    assert p["state"] == "paused" and p["stopReason"] == "lease_expired", p
    assert api.sandbox(lease_ends["persistent"]["id"])["state"] == "paused"
    s = api.sandbox(lease_ends["stop"]["id"])
    assert s["state"] == "stopped" and s["stopReason"] == "lease_expired"
    # onLeaseEnd "delete" (E2B's kill at its timeout): gone, as after DELETE.
    gone = lease_ends["delete"]["id"]
    assert_error(api.get(f"/v1/sandboxes/{gone}"), 404, "not_found")
    assert gone not in [x["id"] for x in api.ok("GET", "/v1/sandboxes", query={"state": "stopped"})["data"]]
    # Woken, it has a whole lease again and its files.
    w = api.ok("POST", f"/v1/sandboxes/{p['id']}:wake", json={})
    assert w["state"] == "running"
    assert api.sh(p["id"], "cat /workspace/lease.txt") == "lease\n"


def test_a_wake_the_moment_an_idle_pause_shows(api, sandboxes):
    """A background pause shows "paused" only once nothing of the sandbox
    runs: a wake at once (E2B's connect after its timeout) starts the one
    copy (it failed "mkfifo: File exists" while the old one was torn down)."""
    sid = sandboxes.create(vcpu=1, memoryMiB=256, idlePauseSeconds=10, autoWake=False)["id"]
    api.sh(sid, "echo kept > /workspace/k.txt")
    deadline = time.monotonic() + 60
    # The list, not GET of the sandbox: that would count as its use.
    while sid not in [x["id"] for x in api.ok("GET", "/v1/sandboxes", query={"state": "paused"})["data"]]:
        assert time.monotonic() < deadline, api.sandbox(sid)
        time.sleep(0.02)
    w = api.ok("POST", f"/v1/sandboxes/{sid}:wake", json={"timeoutSeconds": 60})
    assert w["state"] == "running", w
    assert api.sh(sid, "cat /workspace/k.txt") == "kept\n"


def test_a_files_only_pause_keeps_files_and_boots_afresh(api, sandboxes):
    """pause {"memory": false}, or a create's pauseMemory false: a disk capture of its files,
    smaller than a checkpoint; the wake boots afresh on them (no process survives)."""
    sid = sandboxes.create(vcpu=1, memoryMiB=256)["id"]
    assert api.sandbox(sid)["pauseMemory"] is True
    boot = api.sh(sid, "cat /proc/sys/kernel/random/boot_id")
    api.sh(sid, "echo kept > /workspace/k.txt; (sleep 1000 &)")
    p = api.ok("POST", f"/v1/sandboxes/{sid}:pause", json={"memory": False})
    assert p["state"] == "paused", p
    api.ok("POST", f"/v1/sandboxes/{sid}:wake", json={})
    assert api.sh(sid, "cat /workspace/k.txt") == "kept\n"
    assert api.sh(sid, "cat /proc/sys/kernel/random/boot_id") != boot
    assert api.sh(sid, "pgrep -x sleep || echo none") == "none\n"
    # The create's choice is what a pause without a body keeps.
    other = sandboxes.create(vcpu=1, memoryMiB=256, pauseMemory=False)
    assert other["pauseMemory"] is False
    api.sh(other["id"], "echo two > /workspace/k.txt")
    api.ok("POST", f"/v1/sandboxes/{other['id']}:pause", json={})
    api.ok("POST", f"/v1/sandboxes/{other['id']}:wake", json={})
    assert api.sh(other["id"], "cat /workspace/k.txt") == "two\n"
    assert_error(api.post(f"/v1/sandboxes/{sid}:pause", json={"memory": "no"}), 400,
                 "invalid_request", issue_path="body.memory")


# --- limits and the daily spending limit -----------------------------------


def test_limits_and_the_daily_limit_on_fork_extend_and_wake(daemons):  # noqa: F811
    d = daemons()
    api = d.api
    admin = api.ok("GET", "/v1/limits")
    assert admin["access"] == "full" and admin["trial"] is None
    assert admin["daily"]["limitMicros"] is None and admin["daily"]["window"] == "24h"
    _, k = new_key(api, name="frugal", dailyLimitMicros=1)
    s = k.create(vcpu=1, memoryMiB=256)["id"]
    paused = k.create(vcpu=1, memoryMiB=256)["id"]
    k.ok("POST", f"/v1/sandboxes/{paused}:pause", json={})
    k.sh(s, BURN.format(s=1))
    lim = k.ok("GET", "/v1/limits")["daily"]
    assert lim["limitMicros"] == 1 and lim["usedMicros"] >= 1 and lim["remainingMicros"] == 0
    assert_error(k.post(f"/v1/sandboxes/{s}:extend", json={"seconds": 60}), 402, "spending_limit_reached")
    assert_error(k.post(f"/v1/sandboxes/{s}:fork", json={"count": 1}), 402, "spending_limit_reached")
    assert_error(k.post(f"/v1/sandboxes/{paused}:wake", json={}), 402, "spending_limit_reached")
    assert k.sandbox(paused)["state"] == "paused"
    for sid in (s, paused):
        k.delete(sid)


# --- restarts ----------------------------------------------------------------


def test_paused_and_persistent_sandboxes_outlive_a_kilnd_restart(daemons):  # noqa: F811
    d = daemons()
    api = d.api
    keep = api.create(vcpu=1, memoryMiB=256, persistent=True, name="keeper")["id"]
    start_counter(api, keep)
    assert counter(api, keep) == 1
    held = api.create(vcpu=1, memoryMiB=256)["id"]
    api.sh(held, "echo held > /workspace/h.txt")
    pause(api, held)
    gone = api.create(vcpu=1, memoryMiB=256)["id"]
    assert stop_kilnd(d) == 0, d.log_tail()
    d2 = start_kilnd(d.state_dir, log_path=d.log_path)
    d.proc = d2.proc
    api = Client(d2.url, key=d2.admin_key)
    k = api.sandbox(keep)
    assert k["state"] == "paused" and k["stopReason"] == "host_stopped" and k["persistent"] is True
    assert api.sandbox(held)["state"] == "paused"
    g = api.sandbox(gone)
    assert g["state"] == "stopped" and g["stopReason"] == "host_stopped"
    # The name is still held by the paused one.
    assert_error(api.post("/v1/sandboxes", json={"name": "keeper"}), 409, "name_taken")
    api.ok("POST", f"/v1/sandboxes/{keep}:wake", json={})
    assert counter(api, keep) == 2
    assert api.sh(held, "cat /workspace/h.txt") == "held\n"  # autoWake
    for sid in (keep, held, gone):
        api.delete(sid)


@pytest.mark.parametrize("op", ["pause", "wake"])
def test_kill_9_during_a_pause_or_wake_loses_nothing(daemons, op):  # noqa: F811
    d = daemons()
    api = d.api
    sid = api.create(vcpu=1, memoryMiB=512)["id"]
    start_counter(api, sid)
    assert counter(api, sid) == 1
    if op == "wake":
        pause(api, sid)
    caller = Client(d.url, key=d.admin_key, timeout=30)

    def call():  # kilnd is killed under it: no answer is the expected end
        try:
            caller.request("POST", f"/v1/sandboxes/{sid}:{op}", json={})
        except (ConnectionError, OSError):
            pass

    t = threading.Thread(target=call, daemon=True)
    t.start()
    time.sleep(0.15)
    d.proc.kill()
    d.proc.wait()
    t.join(30)
    d2 = start_kilnd(d.state_dir, log_path=d.log_path)
    d.proc = d2.proc
    api = Client(d2.url, key=d2.admin_key)
    state = api.sandbox(sid)["state"]
    assert state in ("running", "paused"), state
    # Either way it serves again, with its memory.
    assert counter(api, sid) == 2, d.log_tail()
    api.delete(sid)


def test_fork_names_its_copies_and_refuses_an_unpausable_source(api, sandboxes):
    src = sandboxes.create(vcpu=1, memoryMiB=256)["id"]
    name = unique("copy")
    copies = api.ok("POST", f"/v1/sandboxes/{src}:fork", json={"count": 2, "name": name,
                                                                "funding": "paid"})["sandboxes"]
    sandboxes.ids += [c["id"] for c in copies]
    assert sorted(c["name"] for c in copies) == [name, f"{name}-1"]
    fixed = sandboxes.create(vcpu=1, memoryMiB=256, pausable=False)["id"]
    assert_error(api.post(f"/v1/sandboxes/{fixed}:fork", json={"count": 1}), 409, "not_pausable")
    assert_error(api.post(f"/v1/sandboxes/{fixed}:snapshot", json={}), 409, "not_pausable")


def test_update_changes_settings_and_refuses_what_it_must(api, sandboxes):
    taken = unique("taken")
    sandboxes.create(vcpu=1, memoryMiB=256, name=taken)
    sid = sandboxes.create(vcpu=1, memoryMiB=256, name=unique("mine"), env={"A": "1", "B": "2"},
                           persistent=True)["id"]
    u = api.ok("POST", f"/v1/sandboxes/{sid}:update",
               json={"env": {"A": "9", "B": None}, "labels": {"team": "rl"}, "idlePauseSeconds": 600,
                     "autoWake": False, "maxTotalCostMicros": 10_000_000})
    assert u["envNames"] == ["A"] and u["labels"] == {"team": "rl"} and u["idlePauseSeconds"] == 600
    assert u["autoWake"] is False and u["maxTotalCostMicros"] == 10_000_000
    assert api.sh(sid, "echo $A-${B:-unset}") == "9-unset\n"
    assert api.ok("POST", f"/v1/sandboxes/{sid}:update", json={"maxTotalCostMicros": None})[
        "maxTotalCostMicros"] is None
    err = assert_error(api.post(f"/v1/sandboxes/{sid}:update", json={"name": taken}), 409, "name_taken")
    assert err["details"]["sandboxId"] != sid
    new_name = unique("renamed")
    assert api.ok("POST", f"/v1/sandboxes/{sid}:update", json={"name": new_name})["name"] == new_name
    assert [x["id"] for x in api.ok("GET", "/v1/sandboxes", query={"name": new_name})["data"]] == [sid]
    pause(api, sid)
    assert_error(api.post(f"/v1/sandboxes/{sid}:update", json={"persistent": False}), 400, "invalid_request",
                 mentions=("persistent",))
    assert api.sandbox(sid)["persistent"] is True
    for body, field in [({"idlePauseSeconds": 3}, "idlePauseSeconds"), ({"env": {"1X": "y"}}, "env.1X"),
                        ({"vcpu": 4}, "vcpu"), ({"name": "a b"}, "name")]:
        assert_error(api.post(f"/v1/sandboxes/{sid}:update", json=body), 400, "invalid_request",
                     mentions=(field,))
    api.stop(sid)
    assert_error(api.post(f"/v1/sandboxes/{sid}:update", json={"autoWake": True}), 409, "not_running")
