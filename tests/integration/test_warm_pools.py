"""Warm by default (issue 32, item 1): pools sized by demand within a memory
budget, a create naming no image served from the built-in image's pool,
idle pools back to zero, refills at a low CPU weight, pins kept across a
restart, nothing billed for copies never handed out, and a pool that cannot
fill saying why. Each test runs a kilnd of its own (faults_util.daemons)."""
import json
import time

from client import Client, assert_error, metric
from faults_util import daemons  # noqa: F401
from lib.waits import wait_for

POOL_WEIGHT = 64  # engine::kPoolCpuWeight (cpu.shares)


def builtin(api):
    return next(i for i in api.ok("GET", "/v1/images")["data"] if i["source"] == "builtin")


def warm_builtin(api):
    """The built-in image warms on the first create that runs it."""
    api.stop(api.create()["id"])
    wait_for(lambda: builtin(api)["warm"], 180, "the built-in image to warm")
    return builtin(api)


def started_events(d):
    """kilnd's `sandbox started` log lines, by sandbox id."""
    out = {}
    for line in open(d.log_path, encoding="utf-8", errors="replace"):
        if '"sandbox.running"' in line:
            e = json.loads(line)
            out[e["sandboxId"]] = e
    return out


def pool_copies(d):
    """runsc containers that are no running sandbox: the pools' copies."""
    running = {s["id"] for s in d.api.ok("GET", "/v1/sandboxes")["data"]}
    return set(d.host.runsc_ids()) - running


def test_a_create_naming_no_image_runs_the_builtin_image_from_its_pool(daemons):
    d = daemons()
    first = d.api.create()
    base = builtin(d.api)
    assert first["image"] == base["id"], first  # the built-in image, not a bare root
    d.api.stop(first["id"])
    base = warm_builtin(d.api)
    # Its first create after warming earned the pool a copy (demand, not a pin).
    d.api.stop(d.api.create()["id"])
    wait_for(lambda: builtin(d.api)["pool"]["ready"] >= 1, 120, "a ready copy of the built-in image")
    pool = builtin(d.api)["pool"]
    assert pool["mode"] == "auto" and pool["wanted"] >= 1 and pool["unfilledReason"] is None, pool
    s = d.api.create()
    assert d.api.sh(s["id"], "echo ok") == "ok\n"
    wait_for(lambda: s["id"] in started_events(d), 10, "the start event")
    assert started_events(d)[s["id"]]["pooled"] is True
    # It is the same sandbox as a restore: no extra process, the same files.
    ps = d.api.ok("GET", f"/v1/sandboxes/{s['id']}/processes")["data"]
    assert ps == [], ps


def test_health_and_metrics_report_the_budget(daemons):
    d = daemons("--pool-memory-mib", "256")
    pools = d.api.ok("GET", "/v1/health")["pools"]
    assert pools == {"adaptive": True, "memoryBudgetBytes": 256 << 20}, pools
    assert metric(d.api, "kiln_pool_memory_budget_bytes") == 256 << 20
    off = daemons("--pool-memory-mib", "0")
    pools = off.api.ok("GET", "/v1/health")["pools"]
    assert pools["adaptive"] is False and pools["memoryBudgetBytes"] == 0, pools
    # Off: a create still restores the warm copy, and no pool appears.
    warm_builtin(off.api)
    for _ in range(3):
        off.api.stop(off.api.create()["id"])
    time.sleep(1.5)
    assert builtin(off.api)["pool"]["size"] == 0
    assert pool_copies(off) == set()


def test_a_user_snapshot_earns_a_pool_with_its_second_create_and_loses_it_when_idle(daemons):
    d = daemons("--pool-idle-seconds", "4")
    src = d.api.create()["id"]
    d.api.sh(src, "echo mine > /workspace/mark")
    snap = d.api.ok("POST", f"/v1/sandboxes/{src}:snapshot", json={})
    d.api.stop(src)
    get = lambda: d.api.ok("GET", f"/v1/snapshots/{snap['id']}")["pool"]  # noqa: E731
    d.api.stop(d.api.create(snapshot=snap["id"])["id"])
    time.sleep(1.2)
    assert get()["size"] == 0 and get()["wanted"] == 0, get()
    d.api.stop(d.api.create(snapshot=snap["id"])["id"])
    wait_for(lambda: get()["ready"] >= 1, 120, "the snapshot's pool to fill")
    assert get()["mode"] == "auto", get()
    # Copies wait at the pool's low CPU weight; a handed-out one is raised.
    copies = pool_copies(d)
    assert copies
    for cid in copies:
        assert int(d.host.cgroup_value("cpu", cid, "cpu.shares")) == POOL_WEIGHT
    c = d.api.create(snapshot=snap["id"])["id"]
    assert d.api.sh(c, "cat /workspace/mark") == "mine\n"
    assert int(d.host.cgroup_value("cpu", c, "cpu.shares")) > POOL_WEIGHT
    d.api.stop(c)
    # Nobody asks for it for 4 s: back to zero, its copies gone.
    wait_for(lambda: get()["size"] == 0 and get()["ready"] == 0, 30, "the idle pool to empty")
    wait_for(lambda: pool_copies(d) == set(), 30, "the idle pool's copies to go")


def test_a_budget_too_small_says_memory_budget_and_creates_still_restore(daemons):
    d = daemons("--pool-memory-mib", "1")
    src = d.api.create()["id"]
    snap = d.api.ok("POST", f"/v1/sandboxes/{src}:snapshot", json={})
    d.api.stop(src)
    for _ in range(2):
        c = d.api.create(snapshot=snap["id"])["id"]
        assert d.api.sh(c, "echo ok") == "ok\n"
        d.api.stop(c)
    pool = d.api.ok("GET", f"/v1/snapshots/{snap['id']}")["pool"]
    assert pool["size"] == 0 and pool["wanted"] >= 1, pool
    assert pool["unfilledReason"] == "memory_budget", pool
    assert metric(d.api, "kiln_pool_unfilled", snapshot=snap["id"], reason="memory_budget") == 1
    assert metric(d.api, "kiln_pool_wanted", snapshot=snap["id"]) >= 1
    # both creates were restores, and /metrics says so
    served = {f: metric(d.api, "kiln_pool_creates_total", snapshot=snap["id"], **{"from": f})
              for f in ("pool", "restore")}
    assert served == {"pool": None, "restore": 2}, served


def test_pins_survive_a_restart_and_auto_gives_the_pool_back_to_demand(daemons):
    from faults_util import restart
    d = daemons()
    src = d.api.create()["id"]
    snap = d.api.ok("POST", f"/v1/sandboxes/{src}:snapshot", json={})
    d.api.stop(src)
    path = f"/v1/snapshots/{snap['id']}:pool"
    for body, field in (({}, "size"), ({"size": 1, "auto": True}, "auto"), ({"auto": False}, "auto"),
                        ({"size": -1}, "size"), ({"size": 1, "extra": 1}, "extra")):
        assert_error(d.api.post(path, json=body), 400, "invalid_request", issue_path=f"body.{field}")
    pool = d.api.ok("POST", path, json={"size": 2})["pool"]
    assert pool["mode"] == "pinned" and pool["size"] == 2 and pool["wanted"] == 2, pool
    wait_for(lambda: d.api.ok("GET", f"/v1/snapshots/{snap['id']}")["pool"]["ready"] == 2, 120,
             "2 ready copies")
    d.proc.terminate()
    d.proc.wait(60)
    restart(d)
    wait_for(lambda: d.api.ok("GET", f"/v1/snapshots/{snap['id']}")["pool"]["ready"] == 2, 120,
             "2 ready copies after the restart")
    pool = d.api.ok("POST", path, json={"auto": True})["pool"]
    assert pool["mode"] == "auto", pool
    # No demand since the restart: the copies go.
    wait_for(lambda: pool_copies(d) == set(), 30, "the unpinned pool's copies to go")
    # The image's pool answers in the same shape.
    warm_builtin(d.api)
    img = d.api.ok("POST", f"/v1/images/{builtin(d.api)['id']}:pool", json={"size": 1})
    assert img["mode"] == "pinned" and img["size"] == 1, img
    img = d.api.ok("POST", f"/v1/images/{builtin(d.api)['id']}:pool", json={"auto": True})
    assert img["mode"] == "auto", img


def test_copies_never_handed_out_are_not_billed(daemons):
    d = daemons()
    key = d.api.ok("POST", "/v1/keys", json={"name": "pool-billing"})
    tenant = Client(d.url, key=key["secret"])
    src = tenant.create()["id"]
    snap = tenant.ok("POST", f"/v1/sandboxes/{src}:snapshot", json={})
    tenant.stop(src)
    tenant.ok("POST", f"/v1/snapshots/{snap['id']}:pool", json={"size": 3})
    wait_for(lambda: tenant.ok("GET", f"/v1/snapshots/{snap['id']}")["pool"]["ready"] == 3, 120,
             "3 ready copies")
    c = tenant.create(snapshot=snap["id"])["id"]
    tenant.stop(c)
    time.sleep(1)
    mine = tenant.ok("GET", "/v1/sandboxes", query={"includeStopped": "true"})["data"]
    assert sorted(s["id"] for s in mine) == sorted([src, c])
    # The ledger knows the two sandboxes it handed this key, not the copies.
    billed = lambda: sum(g["sandboxes"] for g in tenant.ok("GET", "/v1/usage")["data"])  # noqa: E731
    wait_for(lambda: billed() >= 2, 30, "the ledger to hold the key's sandboxes")
    assert billed() == 2, tenant.ok("GET", "/v1/usage")
    # Refilled: the new copy is still no one's.
    wait_for(lambda: tenant.ok("GET", f"/v1/snapshots/{snap['id']}")["pool"]["ready"] == 3, 120,
             "the pool to refill")
    assert billed() == 2


def test_pooled_and_direct_copies_are_alike(daemons):
    """With --warm-copies every copy is warmed the same way (agent.warm), so a
    pooled copy and a direct restore show the same processes and next PID."""
    d = daemons("--pool-memory-mib", "0", "--warm-copies")
    src = d.api.create()["id"]
    d.api.ok("POST", f"/v1/sandboxes/{src}/processes", json={"command": "sleep 600"})
    snap = d.api.ok("POST", f"/v1/sandboxes/{src}:snapshot", json={})
    probe = "echo $$; ps -eo pid=,comm="  # by PID; no pipe, whose halves race
    source_pid = int(d.api.sh(src, probe).split()[0])  # the source's next PID after the capture
    d.api.ok("POST", f"/v1/snapshots/{snap['id']}:pool", json={"size": 1})
    wait_for(lambda: d.api.ok("GET", f"/v1/snapshots/{snap['id']}")["pool"]["ready"] == 1, 120,
             "a ready copy")
    pooled = d.api.create(snapshot=snap["id"])["id"]
    d.api.ok("POST", f"/v1/snapshots/{snap['id']}:pool", json={"size": 0})
    direct = d.api.create(snapshot=snap["id"])["id"]
    events = started_events(d)
    assert events[pooled]["pooled"] is True and events[direct]["pooled"] is False
    a, b = d.api.sh(pooled, probe), d.api.sh(direct, probe)
    assert a == b, (a, b)
    # Nothing but the agent, the captured sleep and the probe itself (bash,
    # and ps, which bash may run in its own place).
    rows = [line.split() for line in a.splitlines()[1:]]
    assert rows[:2] == [["1", "kiln-agent"], ["2", "sleep"]], a
    assert {comm for _, comm in rows[2:]} <= {"bash", "ps"} and "ps" in a, a
    # The warm-up's child took one PID, the same in every copy.
    assert int(a.split()[0]) == source_pid + 1, (a, source_pid)


def test_by_default_a_copy_continues_the_sources_pids(daemons):
    d = daemons("--pool-memory-mib", "0")
    src = d.api.create()["id"]
    snap = d.api.ok("POST", f"/v1/sandboxes/{src}:snapshot", json={})
    source_pid = int(d.api.sh(src, "echo $$"))
    copy = d.api.create(snapshot=snap["id"])["id"]
    assert int(d.api.sh(copy, "echo $$")) == source_pid
