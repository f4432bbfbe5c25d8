"""Sandbox engine: create with defaults and limits, isolation, list, stop, delete."""
import re
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from client import assert_error
from host import tree_signature

TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
MiB = 1 << 20
SANDBOX_KEYS = {"id", "kind", "name", "labels", "state", "vcpu", "memoryMiB", "diskMiB", "timeoutSeconds",
                "createdAt", "readyAt", "endedAt", "stopReason", "envNames"}


def _time(s):
    assert isinstance(s, str) and TIME_RE.match(s), f"not an ISO-8601 UTC ms time: {s!r}"
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ")


def test_create_defaults(api, sandbox):
    s = sandbox
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", s["id"]) and s["kind"] == "sandbox"
    assert (s["vcpu"], s["memoryMiB"], s["diskMiB"], s["timeoutSeconds"]) == (2, 2048, 4096, 1800)
    assert s["state"] == "running" and s["name"] is None and s["labels"] == {}
    assert s["endedAt"] is None and s["stopReason"] is None and s["envNames"] == []
    created, ready, expires = _time(s["createdAt"]), _time(s["readyAt"]), _time(s["expiresAt"])
    assert created <= ready
    assert abs((expires - created).total_seconds() - 1800) < 10, s
    assert SANDBOX_KEYS <= set(s), f"missing: {SANDBOX_KEYS - set(s)}"
    got = api.sandbox(s["id"])
    assert {k: got.get(k) for k in SANDBOX_KEYS} == {k: s[k] for k in SANDBOX_KEYS}


def test_create_with_fields(api, sandboxes):
    s = sandboxes.create(vcpu=1, memoryMiB=512, diskMiB=128, timeoutSeconds=600, name="lc-named.1",
                         labels={"suite": "lifecycle", "k": "v"}, env={"GREETING": "hi there"})
    assert (s["vcpu"], s["memoryMiB"], s["diskMiB"], s["timeoutSeconds"]) == (1, 512, 128, 600)
    assert s["name"] == "lc-named.1" and s["labels"] == {"suite": "lifecycle", "k": "v"}
    assert s["envNames"] == ["GREETING"]
    assert "hi there" not in str(api.sandbox(s["id"])), "env values must never be returned"
    assert api.sh(s["id"], 'echo "$GREETING"') == "hi there\n"
    # exec env overlays the sandbox env
    assert api.sh(s["id"], 'echo "$GREETING"', env={"GREETING": "over"}) == "over\n"


def test_memory_bomb_dies_inside_its_sandbox(api, sandboxes):
    s = sandboxes.create(memoryMiB=256, vcpu=1)
    other = sandboxes.create(vcpu=1)
    bomb = ("keep = []\n"
            "for i in range(32):\n"
            "    keep.append(bytearray(b'\\x01') * (64 << 20))\n"
            "    print(i, flush=True)\n"
            "print('survived', flush=True)\n")
    r = api.exec(s["id"], argv=["python3", "-c", bomb], timeoutMs=60000)
    assert "survived" not in r["stdout"], f"2 GiB allocated in a 256 MiB sandbox: {r!r}"
    assert r["exitCode"] != 0 and not r["timedOut"], r
    # the sandbox itself, its neighbour and the daemon carry on; the guard
    # acts once, not again while the Sentry hands the bomb's pages back
    for _ in range(5):
        assert api.sh(s["id"], "echo alive") == "alive\n"
        time.sleep(0.05)
    assert api.sh(other["id"], "echo alive") == "alive\n"
    assert api.health().status == 200


def test_cgroup_limits_follow_the_request(api, host, sandboxes):
    s = sandboxes.create(vcpu=1, memoryMiB=384)
    sid = s["id"]
    quota = int(host.cgroup_value("cpu", sid, "cpu.cfs_quota_us"))
    period = int(host.cgroup_value("cpu", sid, "cpu.cfs_period_us"))
    assert 0.95 <= quota / period <= 1.05, f"cpu quota {quota}/{period} for vcpu=1"
    limit = int(host.cgroup_value("memory", sid, "memory.limit_in_bytes"))
    # memoryMiB plus some headroom for gVisor itself, not unlimited
    assert 384 * MiB <= limit <= (384 + 384 // 4 + 512) * MiB, f"memory.limit_in_bytes {limit} for memoryMiB=384"
    assert host.cgroup_value("pids", sid, "pids.max") != "max", "no pids limit"


def test_free_shows_memory_mib_also_in_a_restored_copy(api, host, sandboxes):
    s = sandboxes.create(vcpu=1, memoryMiB=768)
    total = lambda sid: int(api.sh(sid, "free -m | awk '/^Mem:/ {print $2}'"))
    assert total(s["id"]) == 768
    snap = api.ok("POST", f"/v1/sandboxes/{s['id']}:snapshot", json={})
    copy = sandboxes.create(snapshot=snap["id"])
    assert total(copy["id"]) == 768
    # The host cgroup still leaves gVisor its headroom above memoryMiB.
    for sid in (s["id"], copy["id"]):
        assert int(host.cgroup_value("memory", sid, "memory.limit_in_bytes")) > 768 * MiB
    api.ok("POST", f"/v1/snapshots/{snap['id']}:delete", json={})


def test_vcpu_limits_cpu_time(api, host, sandboxes):
    sid = sandboxes.create(vcpu=1)["id"]
    loops = "for i in 1 2; do timeout 4 sh -c 'while :; do :; done' & done; wait"
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(api.exec, sid, command=loops, timeoutMs=30000)
        time.sleep(1.0)
        rate, nprocs = host.cpu_rate(sid, 2.0)
        r = fut.result()
    assert r["exitCode"] in (0, 124), r
    assert rate >= 0.25, f"only {rate:.2f} CPU s/s seen in {nprocs} host processes: are the loops measured?"
    assert rate <= 1.3, f"vcpu=1 sandbox used {rate:.2f} CPU s per wall second with two busy loops"


def test_no_network_interface(api, sid):
    dev = api.sh(sid, "cat /proc/net/dev")
    names = {line.split(":")[0].strip() for line in dev.splitlines()[2:] if ":" in line}
    assert names == {"lo"}, f"interfaces: {names} ({dev!r})"
    # The host's own address: were there a route out, nothing would leave this machine.
    own = next((a for a in _own_addresses() if not a.startswith("127.")), "127.0.0.1")
    probe = ("import socket\n"
             "print(sorted(n for _, n in socket.if_nameindex()))\n"
             "s = socket.socket(); s.settimeout(5)\n"
             f"try:\n    s.connect(('{own}', 22)); print('connected')\n"
             "except OSError as e:\n    print('refused', e)\n")
    r = api.exec(sid, argv=["python3", "-c", probe], timeoutMs=20000)
    assert r["exitCode"] == 0, r
    lines = r["stdout"].splitlines()
    assert lines[0] == "['lo']", r
    assert lines[1].startswith("refused") and "unreachable" in lines[1], f"{own}:22 reachable: {r!r}"


def _own_addresses():
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3].split("/")[0] for line in out.splitlines()]


def test_base_image(api, sid):
    out = api.sh(sid, '. /etc/os-release && echo "$VERSION_CODENAME" && python3 -c "print(6 * 7)" && sudo -n id -u')
    assert out == "bookworm\n42\n0\n", out


def test_host_processes_are_invisible(api, sid):
    out = api.sh(sid, "ps -eo args")
    for word in ("kilnd", "pytest", "runsc"):
        assert word not in out, f"{word} visible inside the sandbox:\n{out}"


def test_writes_are_private(api, sandboxes, image_dir):
    before = tree_signature(image_dir)
    assert before, f"image dir {image_dir} is empty or missing"
    a, b = sandboxes.create()["id"], sandboxes.create()["id"]
    api.sh(a, "echo secret > /workspace/private.txt && echo t > /tmp/private-tmp && "
              "sudo sh -c 'echo e > /etc/kiln-private && echo u > /usr/bin/kiln-private && "
              "rm -f /etc/debian_version'")
    assert api.sh(a, "cat /workspace/private.txt /etc/kiln-private") == "secret\ne\n"
    paths = ["/workspace/private.txt", "/tmp/private-tmp", "/etc/kiln-private", "/usr/bin/kiln-private"]
    r = api.exec(b, command=" ; ".join(f"test -e {p} && echo {p}" for p in paths) + "; true")
    assert r["stdout"] == "", f"writes of sandbox a visible in sandbox b: {r['stdout']!r}"
    assert api.sh(b, "test -s /etc/debian_version && echo kept") == "kept\n"
    for p in paths:
        assert api.stat(b, p)["exists"] is False
    after = tree_signature(image_dir)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f"host image dir changed: {changed[:20]}"


def test_list_filters_and_pages(api, sandboxes):
    label = f"lst{int(time.time() * 1000)}"
    ids = [sandboxes.create(labels={"run": label})["id"] for _ in range(3)]
    q = {"label": f"run:{label}"}
    data = api.ok("GET", "/v1/sandboxes", query=q)["data"]
    assert [s["id"] for s in data] == ids, "label filter, oldest first"
    seen, cursor = [], None
    for _ in range(10):
        page = api.ok("GET", "/v1/sandboxes", query={**q, "limit": 1, **({"cursor": cursor} if cursor else {})})
        assert len(page["data"]) <= 1
        seen += [s["id"] for s in page["data"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == ids, f"paging with limit=1 gave {seen}"
    api.stop(ids[0])
    assert [s["id"] for s in api.ok("GET", "/v1/sandboxes", query=q)["data"]] == ids[1:]
    with_stopped = api.ok("GET", "/v1/sandboxes", query={**q, "includeStopped": True})["data"]
    assert [s["id"] for s in with_stopped] == ids
    stopped = api.ok("GET", "/v1/sandboxes", query={**q, "state": "stopped"})["data"]
    assert [s["id"] for s in stopped] == ids[:1]


def test_stop_then_delete(api, host, sandboxes):
    sid = sandboxes.create()["id"]
    api.sh(sid, "echo x > /workspace/f")
    pids = host.pids(sid)
    assert pids, "no host process found for a running sandbox (host layout?)"
    info = api.stop(sid)
    assert info["state"] == "stopped" and info["stopReason"] == "requested", info
    _time(info["endedAt"])
    assert host.traces(sid, pids) == [], "stop answered but the sandbox is still on the host"
    again = api.ok("POST", f"/v1/sandboxes/{sid}:stop")  # empty body is fine too
    assert again["state"] == "stopped" and again["endedAt"] == info["endedAt"]
    assert api.sandbox(sid)["state"] == "stopped"
    assert_error(api.post(f"/v1/sandboxes/{sid}:exec", json={"argv": ["true"]}), 409, "not_running")
    d = api.delete(sid)
    assert (d["id"], d["kind"], d["status"], d["state"]) == (sid, "sandbox", "deleted", "stopped"), d
    _time(d["deletedAt"])
    assert api.delete(sid)["status"] == "deleted", "delete is idempotent"
    assert_error(api.get(f"/v1/sandboxes/{sid}"), 404, "not_found")


def test_many_sandboxes_concurrently(api, sandboxes):
    lock = threading.Lock()

    def make(i):
        info = api.create(vcpu=1, memoryMiB=256, labels={"n": str(i)})
        with lock:
            sandboxes.ids.append(info["id"])
        return info

    with ThreadPoolExecutor(6) as ex:
        infos = list(ex.map(make, range(6)))
    assert len({s["id"] for s in infos}) == 6 and all(s["state"] == "running" for s in infos)

    def run(job):
        s, k = job
        return api.exec(s["id"], argv=["echo", f"{s['labels']['n']}-{k}"])["stdout"]

    jobs = [(s, k) for s in infos for k in range(4)]
    with ThreadPoolExecutor(24) as ex:
        outs = list(ex.map(run, jobs))
    assert outs == [f"{s['labels']['n']}-{k}\n" for s, k in jobs]
