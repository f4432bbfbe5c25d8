"""bench/run.py's snapshot group: restore, pools, sustained resets, a 100 MiB
server and forks, each beside the raw runsc CLI doing the same job."""
import glob
import json
import os
import shutil
import threading
import time

from common import (ApiError, emit, host_busy_ms, log, mem_available_mib, process_cpu_ms,
                    read_until)
from measure import ABORT, exec_true, ms, percentile, stats

# --------------------------------------------------------------------------
# Snapshots, pools and forks

# A Python HTTP server holding MIB MiB of random bytes (kept referenced);
# GET / answers their SHA-256. Prints "ready <sha256>" once it listens.
SERVER_PY = r'''
import hashlib, http.server, os, sys
state = bytearray(int(sys.argv[1]) << 20)
view = memoryview(state)
for off in range(0, len(state), 1 << 20):
    view[off:off + (1 << 20)] = os.urandom(1 << 20)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = hashlib.sha256(state).hexdigest().encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
srv = http.server.HTTPServer(("127.0.0.1", int(sys.argv[2])), H)
print("ready", hashlib.sha256(state).hexdigest(), flush=True)
srv.serve_forever()
'''
ECHO_PY = "import sys\nfor l in sys.stdin: print(l, end='', flush=True)"
SERVER_PORT = 8000
FETCH_PY = ("import urllib.request, sys; "
            "print(urllib.request.urlopen('http://127.0.0.1:%d/', timeout=30).read().decode())"
            % SERVER_PORT)


def start_server(api, sid, mib):
    """Starts SERVER_PY as a background process; returns its state's sha256
    once it listens."""
    p = api.call("POST", f"/v1/sandboxes/{sid}/processes",
                 {"argv": ["python3", "-c", SERVER_PY, str(mib), str(SERVER_PORT)]})
    cursor, out = 0, ""
    deadline = time.monotonic() + 180
    while "\n" not in out.partition("ready ")[2]:
        if time.monotonic() > deadline:
            raise ApiError(f"server in {sid} not ready after 180 s: {out[-300:]!r}")
        r = api.call("GET", f"/v1/sandboxes/{sid}/processes/{p['id']}/output"
                            f"?cursor={cursor}&waitMs=5000")
        out += "".join(c["data"] for c in r["chunks"])
        cursor = r["nextCursor"]
        if r.get("complete") and "ready " not in out:
            raise ApiError(f"server in {sid} ended: {r.get('state')} {out[-500:]!r}")
    return out.partition("ready ")[2].split()[0]


def check_server(api, sid, digest):
    """The copy's server still answers with the same state (untimed)."""
    r = api.call("POST", f"/v1/sandboxes/{sid}:exec", {"argv": ["python3", "-c", FETCH_PY]})
    if r.get("exitCode") != 0 or r["stdout"].strip() != digest:
        raise ApiError(f"server state in copy {sid}: want {digest}, got {r}")


def peer_echo_check(peer, cid):
    """The peer's python echo loop answers on its (current) pipes."""
    in_w, out_r = peer.pipes[cid]
    os.write(in_w, b"kiln-bench-ping\n")
    read_until(out_r, b"kiln-bench-ping\n", timeout=60)


def peer_echo_checkpoint(peer, bundle, name):
    """Starts the echo loop of `bundle`, checks that it answers, checkpoints
    it into peer.images/name and deletes it. Returns the image's path."""
    cid = peer.next_id(name)
    peer.start_piped(bundle, cid)
    peer_echo_check(peer, cid)
    image = os.path.join(peer.images, name)
    peer.checkpoint(cid, image)
    peer.delete(cid)
    return image


def peer_server_ready(peer, cid):
    buf = read_until(peer.pipes[cid][1], b"\n", timeout=180)
    if not buf.startswith(b"ready "):
        raise RuntimeError(f"peer server {cid}: {buf[-300:]!r}")
    return buf.split()[1].decode()


def peer_exec_true(peer, cid):
    r = peer.exec(cid, "/bin/true")
    if r.returncode != 0:
        raise RuntimeError(f"runsc exec {cid}: rc={r.returncode} {r.stderr[-300:]!r}")


def pool_status(api, snap_id):
    return api.call("GET", f"/v1/snapshots/{snap_id}").get("pool") or {}


def wait_pool(api, snap_id, ready, timeout=120):
    """Polls GET /v1/snapshots/{id} until pool.ready >= ready; returns ms waited."""
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout
    while True:
        p = pool_status(api, snap_id)
        if p.get("ready", 0) >= ready:
            return ms(time.perf_counter() - t0)
        if time.monotonic() > deadline:
            raise ApiError(f"pool of {snap_id} not at {ready} ready after {timeout} s: {p}")
        time.sleep(0.01)


def parallel(fns):
    """Runs the callables in threads; returns their results, raises the first error."""
    results, errors = [None] * len(fns), []

    def go(i):
        try:
            results[i] = fns[i]()
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def bench_restore(kilnd, peer, cfg, api, snap, digest, echo_bundle, echo_image):
    # Warm-up copy (untimed): its server answers with the source's state.
    sid = kilnd.create(api, {"snapshot": snap})
    check_server(api, sid, digest)
    kilnd.stop_sandbox(api, sid)
    log_from = os.path.getsize(kilnd.log_path)
    first, create, answer, every_create = [], [], [], []
    for i in range(cfg["restore_n"] * 2):
        t0 = time.perf_counter()
        sid = kilnd.create(api, {"snapshot": snap})
        t1 = time.perf_counter()
        every_create.append(ms(t1 - t0))
        if i % 2:  # every other copy: the first answer of its agent, no process started
            api.call("GET", f"/v1/sandboxes/{sid}/files/stat?path=/workspace")
            answer.append(ms(time.perf_counter() - t0))
            kilnd.stop_sandbox(api, sid)
            continue
        exec_true(api, sid)
        t2 = time.perf_counter()
        kilnd.stop_sandbox(api, sid)
        create.append(ms(t1 - t0))
        first.append(ms(t2 - t0))
    # What bounds it: kilnd logs each launch's phases (engine.launch); the
    # runsc restore itself against the create as the client saw it.
    runsc_ms = []
    with open(kilnd.log_path, "rb") as f:
        f.seek(log_from)
        for line in f:
            if b'"engine.launch"' in line and b'"restore"' in line:
                runsc_ms.append(json.loads(line)["runscMs"])
    # Creates are sequential, so the log's launches pair with them in order.
    own = sorted(c - r for c, r in zip(every_create, runsc_ms)) if len(runsc_ms) == len(every_create) else []
    emit({"bench": "restore_phases", "unit": "ms", "kiln": True,
          "runscRestoreMsP50": percentile(sorted(runsc_ms), 0.5) if runsc_ms else None,
          "createMsP50": round(percentile(sorted(every_create), 0.5), 1),
          "kilnOwnMsP50": round(percentile(own, 0.5), 1) if own else None,
          "n": len(runsc_ms),
          "what": "the `runsc restore` of kiln's sandbox (agent, mounts, cgroup limits, 9 MiB of state) "
                  "as kilnd timed it, against the whole create: the rest is kiln's own (checks, agent "
                  "hello, records, HTTP)"})
    emit({"bench": "restore_to_first_answer", "unit": "ms", **stats(answer, 1), "kiln": True,
          "what": 'POST /v1/sandboxes {"snapshot"} (no pool) then GET files/stat (the agent '
                  "answers, no process starts): the same job as the raw peer below"})
    emit({"bench": "restore_to_first_result", "unit": "ms", **stats(first, 1), "kiln": True,
          "createMsP50": round(percentile(sorted(create), 0.5), 1),
          "snapshotMiB": cfg["small_snapshot_mib"],
          "what": 'POST /v1/sandboxes {"snapshot"} (no pool) then exec argv ["true"] until its '
                  "result; snapshot of a default sandbox running a background python server"})

    # Peer: runsc restore --detach of a python echo loop + runsc exec /bin/true.
    cid = peer.next_id("rst")
    peer.start_piped(echo_bundle, cid, image=echo_image)  # warm-up, untimed
    peer_echo_check(peer, cid)
    peer.delete(cid)
    lat, lat_exec = [], []
    for i in range(cfg["peer_restore_n"] * 2):
        cid = peer.next_id("rst")
        t0 = time.perf_counter()
        peer.start_piped(echo_bundle, cid, image=echo_image)
        if i % 2:
            peer_exec_true(peer, cid)
            lat_exec.append(ms(time.perf_counter() - t0))
        else:
            peer_echo_check(peer, cid)
            lat.append(ms(time.perf_counter() - t0))
        peer.delete(cid)
    emit({"bench": "restore_to_first_answer", "peer": "runsc restore + first echo", "unit": "ms",
          **stats(lat, 1),
          "what": "runsc restore --detach --image-path (checkpoint --compression=none of a "
                  "python3 stdin echo loop), then one line echoed over its fresh stdio pipes"})
    emit({"bench": "restore_to_first_result", "peer": "runsc restore + runsc exec", "unit": "ms",
          **stats(lat_exec, 1),
          "what": "the same restore, then runsc exec /bin/true"})


def bench_pool(kilnd, peer, cfg, api, snap, echo_bundle, echo_image):
    size = cfg["pool_size"]
    t0 = time.perf_counter()
    kilnd.set_pool(api, snap, size)
    wait_pool(api, snap, size, timeout=180)
    fill = ms(time.perf_counter() - t0)
    first, create, refill = [], [], []
    for _ in range(cfg["pool_n"]):
        refill.append(wait_pool(api, snap, size))
        t0 = time.perf_counter()
        sid = kilnd.create(api, {"snapshot": snap})
        t1 = time.perf_counter()
        exec_true(api, sid)
        first.append(ms(time.perf_counter() - t0))
        create.append(ms(t1 - t0))
        kilnd.stop_sandbox(api, sid)
    mem = pool_status(api, snap).get("memoryBytes")
    kilnd.set_pool(api, snap, 0)
    emit({"bench": "pool_to_first_result", "unit": "ms", **stats(first, 1), "kiln": True,
          "createMsP50": round(percentile(sorted(create), 0.5), 1),
          "poolSize": size, "fillMs": round(fill), "refillWaitMsP50":
          round(percentile(sorted(refill[1:]), 0.5)) if len(refill) > 1 else None,
          "poolMemoryMiB": None if mem is None else round(mem / 1048576, 1),
          "what": f'POST :pool {{"size": {size}}}, wait until ready; then create from the '
                  'snapshot + exec argv ["true"], pool full again before each run'})

    # Peer: what raw runsc can do ahead of time -- restore a container, then
    # (timed) the first runsc exec into it.
    lat = []
    for _ in range(cfg["peer_pool_n"]):
        cid = peer.next_id("pool")
        peer.start_piped(echo_bundle, cid, image=echo_image)
        t0 = time.perf_counter()
        peer_exec_true(peer, cid)
        lat.append(ms(time.perf_counter() - t0))
        peer.delete(cid)
    emit({"bench": "pool_to_first_result", "peer": "runsc exec into a restored container",
          "unit": "ms", **stats(lat, 1),
          "what": "container restored beforehand (untimed); first runsc exec /bin/true in it"})


def sustain(workers, duration, make, use, drop):
    """workers threads loop make() -> handle, use(handle), drop(handle) until
    duration s have passed; a reset is the three. Returns a dict of figures,
    with MemAvailable 2 s before and 5 s after. Errors are counted, not raised."""
    time.sleep(2)  # let the teardown of what ran before settle
    mem_before = mem_available_mib()
    lat, errors, samples = [], [0], []
    phases = {"create": [], "exec": [], "stop": []}
    lock = threading.Lock()

    def fail(what, e):
        with lock:
            errors[0] += 1
            if len(samples) < 3:
                samples.append(f"{what}: {str(e)[:300]}")

    start = time.monotonic()
    busy0 = host_busy_ms() / 1000
    stop_at = start + duration

    def worker(i):
        while time.monotonic() < stop_at and not ABORT.is_set():
            t0 = time.perf_counter()
            h, ok = None, False
            try:
                h = make(i)
                t1 = time.perf_counter()
                use(h)
                t2 = time.perf_counter()
                ok = True
            except Exception as e:
                fail("create/exec", e)
            if h is not None:
                try:
                    drop(h)
                except Exception as e:
                    ok = False
                    fail("stop", e)
            if ok:
                t3 = time.perf_counter()
                with lock:
                    lat.append(ms(t3 - t0))
                    phases["create"].append(ms(t1 - t0))
                    phases["exec"].append(ms(t2 - t1))
                    phases["stop"].append(ms(t3 - t2))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    busy = host_busy_ms() / 1000 - busy0
    time.sleep(5)
    mem_after = mem_available_mib()
    lat.sort()
    out = {"unit": "resets/s", "resetsPerS": round(len(lat) / wall, 1), "resets": len(lat),
           "errors": errors[0], "workers": workers, "seconds": round(wall, 1),
           "resetMsP50": round(percentile(lat, 0.5), 1) if lat else None,
           "resetMsP99": round(percentile(lat, 0.99), 1) if lat else None,
           "hostCpuMsPerReset": round(busy * 1000 / len(lat)) if lat else None,
           "hostCpuUtil": round(busy / wall / os.cpu_count(), 2),
           "phaseMsP50": {k: round(percentile(sorted(v), 0.5), 1) if v else None
                          for k, v in phases.items()},
           "memAvailableMiBBefore": mem_before, "memAvailableMiBAfter5s": mem_after,
           "memDeltaMiB": round(mem_after - mem_before, 1)}
    if samples:
        out["errorSamples"] = samples
    return out


def echo_snapshot(kilnd, api):
    """A snapshot of a default sandbox running the peer's echo loop as a
    background process on a stdin pipe, checked to answer as the peer's is
    before its checkpoint: the sustained resets' workload, the same on both
    sides. Returns its id and size in MiB."""
    sid = kilnd.create(api)
    p = api.call("POST", f"/v1/sandboxes/{sid}/processes",
                 {"argv": ["python3", "-c", ECHO_PY], "stdinMode": "pipe"})
    api.call("POST", f"/v1/sandboxes/{sid}/processes/{p['id']}:write",
             {"data": "kiln-bench-ping\n"})
    r = api.call("GET", f"/v1/sandboxes/{sid}/processes/{p['id']}/output?cursor=0&waitMs=30000")
    if "kiln-bench-ping" not in "".join(c["data"] for c in r["chunks"]):
        raise ApiError(f"the echo loop in {sid} did not answer: {r}")
    rec = kilnd.snapshot(api, sid)
    kilnd.stop_sandbox(api, sid)
    kilnd.set_pool(api, rec["id"], 0)
    return rec["id"], round(rec["sizeBytes"] / 1048576, 2)


def bench_sustained(kilnd, cfg, snap, pool_size):
    workers, duration = cfg["sustained_workers"], cfg["sustained_s"]
    api = kilnd.api(timeout=120)
    if pool_size:
        kilnd.set_pool(api, snap, pool_size)
        wait_pool(api, snap, pool_size, timeout=180)
    conns = [kilnd.api(timeout=120) for _ in range(workers)]

    def make(i):
        return conns[i], kilnd.create(conns[i], {"snapshot": snap})

    kilnd_cpu0 = process_cpu_ms(kilnd.proc.pid)
    r = sustain(workers, duration, make, lambda h: exec_true(*h),
                lambda h: kilnd.stop_sandbox(*h))
    if r["resets"]:
        r["kilndCpuMsPerReset"] = round((process_cpu_ms(kilnd.proc.pid) - kilnd_cpu0) / r["resets"], 1)
    for a in conns:
        a.close()
    line = {"bench": "sustained_resets", "kiln": True, "pool": pool_size, **r,
            "snapshotMiB": cfg["echo_snapshot_mib"],
            "what": f"{workers} workers for {duration} s, each looping: create from a snapshot "
                    "(default sandbox, the peer's python echo loop as a background process)"
                    f'{f", pool of {pool_size}" if pool_size else ", no pool"}, exec argv ["true"], '
                    "stop; reset latency = the three; MemAvailable 2 s before and 5 s after"}
    if pool_size:
        line["poolReadyAfter5s"] = pool_status(api, snap).get("ready")
        kilnd.set_pool(api, snap, 0)
    emit(line)
    api.close()


def bench_sustained_peer(peer, cfg, bundle, image, bundle_for=None, label=""):
    """The raw CLI's resets. With bundle_for(cid), each container gets its
    own bundle (kiln's spec needs one cgroup path per container)."""
    workers, duration = cfg["sustained_workers"], cfg["peer_sustained_s"]

    def make(i):
        cid = peer.next_id("sus")
        try:
            peer.start_piped(bundle_for(cid) if bundle_for else bundle, cid, image=image)
        except Exception:
            peer.delete(cid)
            raise
        return cid

    r = sustain(workers, duration, make, lambda c: peer_exec_true(peer, c), peer.delete)
    size = sum(os.path.getsize(f) for f in glob.glob(image + "/**", recursive=True)
               if os.path.isfile(f))
    emit({"bench": "sustained_resets", "peer": "runsc restore + exec + delete" + label, **r,
          "snapshotMiB": round(size / 1048576, 2),
          "what": f"{workers} workers for {duration} s, each looping runsc restore --detach "
                  "(python echo loop checkpoint), runsc exec /bin/true, runsc delete --force"
                  + label})


def kiln_spec_bundles(kilnd, api, peer):
    """The raw CLI with kiln's own OCI spec (its mounts and agent binds,
    cgroup limits, capabilities, rlimits), the echo loop as its process:
    what kiln's spec costs a reset, apart from kilnd. Returns bundle_for(cid),
    which writes each container's bundle with a cgroup path of its own."""
    sid = kilnd.create(api)
    with open(os.path.join(kilnd.state_dir, "sandboxes", sid, "config.json")) as f:
        spec = json.load(f)
    kilnd.stop_sandbox(api, sid)
    spec["process"]["args"] = ["python3", "-c", ECHO_PY]
    spec["process"]["terminal"] = False

    def bundle_for(cid):
        d = os.path.join(peer.bundles, cid)
        os.makedirs(d)
        spec["linux"]["cgroupsPath"] = f"/kiln-bench/{cid}"
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(spec, f)
        return d
    return bundle_for


def bench_100mib(kilnd, peer, cfg, api):
    mib = 100
    big = kilnd.create(api, {"memoryMiB": 1024})
    digest = start_server(api, big, mib)
    log(f"snapshot_100mib: sandbox {big}, server state {digest[:12]}")
    walls, captures, sizes = [], [], []
    for _ in range(cfg["snap_n"]):
        t0 = time.perf_counter()
        rec = kilnd.snapshot(api, big)
        walls.append(ms(time.perf_counter() - t0))
        if rec.get("state") != "ready":
            raise ApiError(f"snapshot answered in state {rec.get('state')}")
        captures.append(rec["captureMs"])
        sizes.append(rec["sizeBytes"])
        kilnd.delete_snapshot(api, rec["id"])
    emit({"bench": "snapshot_100mib", "unit": "ms", **stats(walls, 1), "kiln": True,
          "captureMsP50": percentile(sorted(captures), 0.5), "captureMs": captures,
          "sizeMiB": round(percentile(sorted(sizes), 0.5) / 1048576, 1),
          "what": f"POST :snapshot of a sandbox (memoryMiB 1024) whose python server holds "
                  f"{mib} MiB of random bytes, until it answers state ready (wall); captureMs = "
                  "kilnd's runsc checkpoint time, an upper bound of the source's pause"})

    # Peer: runsc checkpoint --leave-running of a container holding the same.
    sb = peer.bundle("srv100", ["python3", "-c", SERVER_PY, str(mib), str(SERVER_PORT)])
    src = peer.next_id("srv100")
    peer.start_piped(sb, src)
    peer_server_ready(peer, src)
    lat, sizes = [], []
    for i in range(cfg["snap_n"]):
        path = os.path.join(peer.images, f"srv100-{i}")
        t0 = time.perf_counter()
        peer.checkpoint(src, path)
        lat.append(ms(time.perf_counter() - t0))
        sizes.append(sum(os.path.getsize(f) for f in glob.glob(path + "/**", recursive=True)
                         if os.path.isfile(f)))
        shutil.rmtree(path)
    emit({"bench": "snapshot_100mib", "peer": "runsc checkpoint", "unit": "ms", **stats(lat, 1),
          "sizeMiB": round(percentile(sorted(sizes), 0.5) / 1048576, 1),
          "what": f"runsc checkpoint --leave-running --compression=none of a container whose "
                  f"python server holds {mib} MiB of random bytes"})

    # fork4_100mib
    count = 4
    walls, forks = [], []
    for run_i in range(cfg["fork_runs"]):
        t0 = time.perf_counter()
        resp = api.send("POST", f"/v1/sandboxes/{big}:fork", {"count": count})
        raw = resp.read()
        if resp.will_close:
            api.close()
        body = json.loads(raw) if raw else {}
        if resp.status != 200:
            for s in (body.get("error", {}).get("details") or {}).get("started", []):
                kilnd.sandboxes.add(s["id"])
            raise ApiError(f"fork -> {resp.status}: {raw[:500]!r}")
        ids = [s["id"] for s in body["sandboxes"]]
        kilnd.sandboxes.update(ids)
        t1 = time.perf_counter()
        conns = [kilnd.api() for _ in ids]
        parallel([lambda a=a, s=s: exec_true(a, s) for a, s in zip(conns, ids)])
        walls.append(ms(time.perf_counter() - t0))
        forks.append(ms(t1 - t0))
        for a in conns:
            a.close()
        if run_i == 0:
            check_server(api, ids[-1], digest)
        for s in ids:
            kilnd.stop_sandbox(api, s)
    emit({"bench": "fork4_100mib", "unit": "ms", **stats(walls, 1), "kiln": True,
          "forkMsP50": round(percentile(sorted(forks), 0.5), 1),
          "what": f'POST :fork {{"count": {count}}} of the {mib} MiB sandbox until it answers, '
                  'then exec argv ["true"] in each copy (in parallel) until all results'})
    kilnd.stop_sandbox(api, big)

    walls = []
    for run_i in range(cfg["fork_runs"]):
        path = os.path.join(peer.images, f"fork-{run_i}")
        cids = [peer.next_id("fork") for _ in range(count)]
        t0 = time.perf_counter()
        peer.checkpoint(src, path)
        parallel([lambda c=c: (peer.start_piped(sb, c, image=path), peer_exec_true(peer, c))
                  for c in cids])
        walls.append(ms(time.perf_counter() - t0))
        for c in cids:
            peer.delete(c)
        shutil.rmtree(path)
    emit({"bench": "fork4_100mib", "peer": "runsc checkpoint + 4 x (restore + exec)",
          "unit": "ms", **stats(walls, 1),
          "what": f"runsc checkpoint --leave-running of the {mib} MiB container, then {count} "
                  "parallel runsc restore --detach + runsc exec /bin/true"})
    peer.delete(src)


def bench_snapshot(kilnd, peer, cfg):
    api = kilnd.api(timeout=300)
    # The small snapshot: a default sandbox with a background python server.
    src = kilnd.create(api)
    digest = start_server(api, src, 0)
    rec = kilnd.snapshot(api, src)
    snap = rec["id"]
    cfg["small_snapshot_mib"] = round(rec["sizeBytes"] / 1048576, 1)
    kilnd.stop_sandbox(api, src)
    # No pool for the figures without one, whatever kilnd's default is.
    has_pool = kilnd.set_pool(api, snap, 0)
    log(f"snapshot: small snapshot {snap}, pool route: {has_pool}")

    echo_bundle = peer.bundle("echo", ["python3", "-c", ECHO_PY])
    echo_image = peer_echo_checkpoint(peer, echo_bundle, "echo")

    bench_restore(kilnd, peer, cfg, api, snap, digest, echo_bundle, echo_image)
    if has_pool:
        bench_pool(kilnd, peer, cfg, api, snap, echo_bundle, echo_image)
    else:
        emit({"bench": "pool_to_first_result", "skipped": "no pool route"})

    echo, cfg["echo_snapshot_mib"] = echo_snapshot(kilnd, api)
    log(f"snapshot: sustained resets, no pool, {cfg['sustained_s']} s ...")
    bench_sustained(kilnd, cfg, echo, 0)
    if has_pool:
        log(f"snapshot: sustained resets, pool of {cfg['sustained_workers']}, "
            f"{cfg['sustained_s']} s ...")
        bench_sustained(kilnd, cfg, echo, cfg["sustained_workers"])
    else:
        emit({"bench": "sustained_resets", "pool": cfg["sustained_workers"],
              "skipped": "no pool route"})
    log(f"snapshot: sustained resets, peer, {cfg['peer_sustained_s']} s ...")
    bench_sustained_peer(peer, cfg, echo_bundle, echo_image)
    # The same with kiln's spec: a checkpoint of the echo loop under it.
    bundle_for = kiln_spec_bundles(kilnd, api, peer)
    kspec_image = peer_echo_checkpoint(peer, bundle_for(peer.next_id("kspec")), "echo-kiln-spec")
    log(f"snapshot: sustained resets, peer with kiln's spec, {cfg['peer_sustained_s']} s ...")
    bench_sustained_peer(peer, cfg, None, kspec_image, bundle_for, ", kiln's OCI spec")
    shutil.rmtree(kspec_image)
    for d in glob.glob("/sys/fs/cgroup/*/kiln-bench"):  # runsc removes only the leaves
        try:
            os.rmdir(d)
        except OSError:
            pass
    kilnd.delete_snapshot(api, snap)
    kilnd.delete_snapshot(api, echo)
    shutil.rmtree(echo_image)

    log("snapshot: 100 MiB snapshot and fork ...")
    bench_100mib(kilnd, peer, cfg, api)
    api.close()
