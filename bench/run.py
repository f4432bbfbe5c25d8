#!/usr/bin/python3
"""kiln benchmarks: one JSON line per figure on stdout, each beside a peer
measured in the same run with the raw runsc CLI (same rootfs, same runsc
flags). Progress goes to stderr.

Starts its own kilnd on a free port with a temporary state directory and
leaves nothing behind: every sandbox it made is stopped, kilnd is stopped,
peer containers are deleted with `runsc delete --force`, temp dirs removed.

Usage: /usr/bin/python3 bench/run.py [--kilnd PATH] [--image-dir DIR] [--quick]
           [--only exec,create,concurrent,stream,snapshot]
Python standard library only.
"""
import argparse
import base64
import glob
import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time

from common import (REPO, ApiError, KilndSession, Peer, base_rootfs, emit, forget, host_busy_ms, log,
                    mem_available_mib, process_cpu_ms, read_until, runsc_cmd, spawn, start_subreaper)

# Set on failure or Ctrl-C: load threads finish their iteration and stop, and
# cleanup waits for them before it deletes what they made.
_abort = threading.Event()


def percentile(sorted_values, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_values:
        return None
    k = (len(sorted_values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def stats(values, digits=3):
    v = sorted(values)
    r = lambda x: None if x is None else round(x, digits)
    return {"p50": r(percentile(v, 0.5)), "p90": r(percentile(v, 0.9)),
            "p99": r(percentile(v, 0.99)), "min": r(v[0]) if v else None,
            "max": r(v[-1]) if v else None, "n": len(v)}


def ms(seconds):
    return seconds * 1000.0

# --------------------------------------------------------------------------
# Figures


def exec_true(api, sid):
    r = api.call("POST", f"/v1/sandboxes/{sid}:exec", {"argv": ["true"]})
    if r.get("exitCode") != 0:
        raise ApiError(f"exec true: {r}")
    return r


def timed(fn, n, warmup=0):
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(ms(time.perf_counter() - t0))
    return out


SPAWN_PROBE_PY = ("import json, os, sys, time\n"
                  "out = []\n"
                  "for _ in range(int(sys.argv[1])):\n"
                  "    t0 = time.perf_counter()\n"
                  "    os.waitpid(os.posix_spawn('/bin/true', ['true'], {}), 0)\n"
                  "    out.append((time.perf_counter() - t0) * 1000)\n"
                  "print(json.dumps(out[10:]))\n")


def bench_exec_rtt(kilnd, peer, cfg):
    api = kilnd.api()
    sid = kilnd.create(api)
    log(f"exec_rtt: sandbox {sid}")
    connects0 = api.connects
    inside = []
    lat = timed(lambda: inside.append(exec_true(api, sid)["durationMs"]), cfg["exec_n"], warmup=10)
    inside = sorted(inside[10:])
    emit({"bench": "exec_rtt", "unit": "ms", **stats(lat), "kiln": True,
          "what": 'POST :exec argv ["true"], sequential, one keep-alive connection',
          "durationMsP50": round(percentile(inside, 0.5), 1),
          "durationMsP90": round(percentile(inside, 0.9), 1),
          "reconnects": api.connects - connects0})

    lat = timed(lambda: api.call("GET", f"/v1/sandboxes/{sid}"), cfg["exec_n"], warmup=10)
    emit({"bench": "api_rtt", "unit": "ms", **stats(lat), "kiln": True,
          "what": "GET /v1/sandboxes/{id}: HTTP + daemon only, no sandbox call"})

    lat = timed(lambda: api.call("GET", f"/v1/sandboxes/{sid}/files/stat?path=/workspace"),
                cfg["exec_n"], warmup=10)
    emit({"bench": "agent_rtt", "unit": "ms", **stats(lat), "kiln": True,
          "what": "GET files/stat?path=/workspace: one agent-channel request, no process"})

    # What bounds an exec: starting a process inside gVisor, timed inside the
    # sandbox by Python (no kiln in the loop).
    r = api.call("POST", f"/v1/sandboxes/{sid}:exec",
                 {"argv": ["python3", "-c", SPAWN_PROBE_PY, str(cfg["exec_n"])], "timeoutMs": 120000})
    spawn = sorted(json.loads(r["stdout"]))
    emit({"bench": "process_start_in_gvisor", "unit": "ms", **stats(spawn), "kiln": False,
          "what": "posix_spawn(/bin/true) + waitpid, timed by python3 inside the sandbox: the floor "
                  "of any exec that starts a process; kiln's own share of exec_rtt is the difference"})

    # An idle sandbox's host CPU (its cgroup, 5 s, after 2 s of rest).
    time.sleep(2)
    acct = f"/sys/fs/cgroup/cpuacct/kiln/{sid}/cpuacct.usage"
    with open(acct) as f:
        c0 = int(f.read())
    time.sleep(5)
    with open(acct) as f:
        idle_ms = (int(f.read()) - c0) / 1e6 / 5
    emit({"bench": "idle_sandbox_cpu", "unit": "ms CPU per s", "value": round(idle_ms, 3), "kiln": True,
          "what": "host CPU of one running sandbox doing nothing (its cgroup's cpuacct over 5 s)"})
    kilnd.stop_sandbox(api, sid)
    api.close()

    # Peer: runsc exec /bin/true in a running container of the same rootfs.
    b = peer.bundle("exec", ["/bin/sleep", "infinity"])
    cid = peer.next_id("exec")
    peer.run(b, cid, detach=True)

    def one():
        r = peer.exec(cid, "/bin/true")
        if r.returncode != 0:
            raise RuntimeError(f"runsc exec: rc={r.returncode} {r.stderr[-300:]!r}")

    lat = timed(one, cfg["peer_exec_n"], warmup=3)
    emit({"bench": "exec_rtt", "peer": "runsc exec", "unit": "ms", **stats(lat),
          "what": "runsc exec CID /bin/true, sequential"})
    peer.delete(cid)


def bench_create(kilnd, peer, cfg):
    api = kilnd.api()
    create, first, stop = [], [], []
    for i in range(cfg["create_n"]):
        t0 = time.perf_counter()
        sid = kilnd.create(api)
        t1 = time.perf_counter()
        exec_true(api, sid)
        t2 = time.perf_counter()
        kilnd.stop_sandbox(api, sid)
        t3 = time.perf_counter()
        create.append(ms(t1 - t0))
        first.append(ms(t2 - t0))
        stop.append(ms(t3 - t2))
    api.close()
    emit({"bench": "create_to_first_result", "unit": "ms", **stats(first, 1), "kiln": True,
          "what": 'POST /v1/sandboxes, then exec argv ["true"] until its result'})
    emit({"bench": "create", "unit": "ms", **stats(create, 1), "kiln": True,
          "what": "POST /v1/sandboxes until it answers (state running, agent connected)"})
    emit({"bench": "stop", "unit": "ms", **stats(stop, 1), "kiln": True,
          "what": "POST :stop (synchronous: nothing of the sandbox remains when it answers)"})

    # Peer: the whole `runsc run /bin/true` (create, start, wait, delete by runsc).
    b = peer.bundle("true", ["/bin/true"])
    lat = []
    for i in range(cfg["create_n"]):
        cid = peer.next_id("run")
        t0 = time.perf_counter()
        peer.run(b, cid)
        lat.append(ms(time.perf_counter() - t0))
        peer.delete(cid)
    emit({"bench": "create_to_first_result", "peer": "runsc run", "unit": "ms", **stats(lat, 1),
          "what": "runsc run of /bin/true, whole command (container exits)"})

    # Peer for stop: runsc delete --force of a running (sleep infinity) container.
    b = peer.bundle("sleep", ["/bin/sleep", "infinity"])
    lat = []
    for i in range(cfg["peer_stop_n"]):
        cid = peer.next_id("stop")
        peer.run(b, cid, detach=True)
        t0 = time.perf_counter()
        peer.delete(cid)
        lat.append(ms(time.perf_counter() - t0))
    emit({"bench": "stop", "peer": "runsc delete --force", "unit": "ms", **stats(lat, 1),
          "what": "runsc delete --force of a running container"})


def burst(targets, fn, n):
    """n threads, one connection/target each, released together. Returns
    (latencies ms, failures, wall ms)."""
    barrier = threading.Barrier(n + 1)
    lat = [None] * n
    errors = []
    ends = [0.0] * n

    def worker(i):
        ctx = None
        try:
            ctx = targets(i)
        except Exception as e:
            errors.append(f"setup: {e}")
        barrier.wait()
        if ctx is None:
            return
        t0 = time.perf_counter()
        try:
            fn(ctx)
            lat[i] = ms(time.perf_counter() - t0)
        except Exception as e:
            errors.append(str(e)[:300])
        ends[i] = time.perf_counter()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    wall = ms(max(ends) - start) if any(ends) else None
    return [x for x in lat if x is not None], errors, wall


def bench_concurrent(kilnd, peer, cfg):
    n, nsb, reps = cfg["conc_n"], cfg["conc_sandboxes"], cfg["conc_bursts"]
    api = kilnd.api()
    sids = [kilnd.create(api) for _ in range(nsb)]
    for sid in sids:
        exec_true(api, sid)  # warm

    def target(i):
        a = kilnd.api()
        a.connect()
        return a, sids[i % nsb]

    def fn(ctx):
        a, sid = ctx
        try:
            exec_true(a, sid)
        finally:
            a.close()

    all_lat, walls, failures, samples = [], [], 0, []
    for r in range(reps):
        lat, errors, wall = burst(target, fn, n)
        all_lat += lat
        walls.append(round(wall, 1))
        failures += len(errors) + (n - len(lat) - len(errors))
        samples += errors[:3]
        log(f"concurrent_exec burst {r + 1}: {len(lat)}/{n} ok, wall {wall:.0f} ms")
    line = {"bench": "concurrent_exec", "unit": "ms", **stats(all_lat, 1), "kiln": True,
            "concurrency": n, "sandboxes": nsb, "bursts": reps, "failures": failures,
            "wallMs": walls, "wallMsP50": round(percentile(sorted(walls), 0.5), 1),
            "what": f'{n} concurrent POST :exec argv ["true"] over {nsb} sandboxes, '
                    "one connection per thread; latency per exec, wall per burst"}
    if samples:
        line["errorSamples"] = samples
    emit(line)
    for sid in sids:
        kilnd.stop_sandbox(api, sid)
    api.close()

    # Peer: the same burst as concurrent runsc exec over as many containers.
    b = peer.bundle("conc", ["/bin/sleep", "infinity"])
    cids = []
    for _ in range(nsb):
        cid = peer.next_id("conc")
        peer.run(b, cid, detach=True)
        cids.append(cid)

    def pfn(cid):
        r = peer.exec(cid, "/bin/true")
        if r.returncode != 0:
            raise RuntimeError(f"runsc exec rc={r.returncode} {r.stderr[-200:]!r}")

    all_lat, walls, failures, samples = [], [], 0, []
    for r in range(cfg["peer_conc_bursts"]):
        lat, errors, wall = burst(lambda i: cids[i % nsb], pfn, n)
        all_lat += lat
        walls.append(round(wall, 1))
        failures += len(errors) + (n - len(lat) - len(errors))
        samples += errors[:3]
        log(f"concurrent_exec peer burst {r + 1}: {len(lat)}/{n} ok, wall {wall:.0f} ms")
    line = {"bench": "concurrent_exec", "peer": "runsc exec", "unit": "ms", **stats(all_lat, 1),
            "concurrency": n, "sandboxes": nsb, "bursts": cfg["peer_conc_bursts"],
            "failures": failures, "wallMs": walls,
            "wallMsP50": round(percentile(sorted(walls), 0.5), 1),
            "what": f"{n} concurrent runsc exec /bin/true over {nsb} containers"}
    if samples:
        line["errorSamples"] = samples
    emit(line)
    for cid in cids:
        peer.delete(cid)


def stream_once(api, sid, nbytes):
    """Returns (seconds, decoded bytes, exit event)."""
    body = {"argv": ["head", "-c", str(nbytes), "/dev/zero"], "stream": True,
            "outputEncoding": "base64", "timeoutMs": 120000}
    t0 = time.perf_counter()
    resp = api.send("POST", f"/v1/sandboxes/{sid}:exec", body)
    if resp.status != 200:
        raise ApiError(f"stream exec -> {resp.status}: {resp.read()[:300]!r}")
    total, exit_event, buf = 0, None, b""
    while True:
        chunk = resp.read1(1 << 20) if hasattr(resp, "read1") else resp.read(1 << 16)
        if not chunk:
            break
        buf += chunk
        lines = buf.split(b"\n")
        buf = lines.pop()
        for line in lines:
            if not line:
                continue
            ev = json.loads(line)
            t = ev.get("type")
            if t in ("stdout", "stderr"):
                total += len(base64.b64decode(ev["data"])) if ev.get("base64") else len(ev["data"])
            elif t == "exit":
                exit_event = ev
            elif t == "error":
                raise ApiError(f"stream error: {ev}")
    if buf.strip():
        ev = json.loads(buf)
        if ev.get("type") == "exit":
            exit_event = ev
    elapsed = time.perf_counter() - t0
    if resp.will_close:
        api.close()
    return elapsed, total, exit_event


def bench_stream(kilnd, peer, cfg):
    nbytes = cfg["stream_bytes"]
    api = kilnd.api(timeout=300)
    sid = kilnd.create(api)
    stream_once(api, sid, 1 << 20)  # warm
    rates, cpu, durs = [], [], []
    for _ in range(cfg["stream_n"]):
        c0 = time.process_time()
        secs, total, ev = stream_once(api, sid, nbytes)
        cpu.append(time.process_time() - c0)
        if total != nbytes or not ev or ev.get("exitCode") != 0:
            raise ApiError(f"stream: got {total} of {nbytes} bytes, exit {ev}")
        rates.append(total / secs / 1e6)
        durs.append(ev.get("durationMs"))
    kilnd.stop_sandbox(api, sid)
    api.close()
    emit({"bench": "exec_throughput_stream", "unit": "MB/s", **stats(rates, 1), "kiln": True,
          "bytes": nbytes, "clientCpuS": [round(c, 2) for c in cpu], "durationMs": durs,
          "what": "head -c 100000000 /dev/zero, stream:true, outputEncoding base64; "
                  "decoded bytes / wall time on the client (MB = 1e6 B; higher is better)",
          "note": "no peer required; peer line is runsc exec with stdout on a pipe"})

    # Peer (for reference): the same command through `runsc exec`, stdout on a pipe.
    b = peer.bundle("stream", ["/bin/sleep", "infinity"])
    cid = peer.next_id("stream")
    peer.run(b, cid, detach=True)
    rates = []
    for _ in range(cfg["stream_n"]):
        t0 = time.perf_counter()
        p = spawn(runsc_cmd(peer.root, "exec", cid, "head", "-c", str(nbytes), "/dev/zero"),
                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        total = 0
        while True:
            chunk = p.stdout.read1(1 << 20)
            if not chunk:
                break
            total += len(chunk)
        p.wait()
        forget(p)
        secs = time.perf_counter() - t0
        if total != nbytes:
            raise RuntimeError(f"peer stream: {total} of {nbytes} bytes")
        rates.append(total / secs / 1e6)
    emit({"bench": "exec_throughput_stream", "peer": "runsc exec (stdout pipe)", "unit": "MB/s",
          **stats(rates, 1), "bytes": nbytes,
          "what": "runsc exec head -c 100000000 /dev/zero, raw bytes read from a pipe"})
    peer.delete(cid)


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
        while time.monotonic() < stop_at and not _abort.is_set():
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
            "what": f"{workers} workers for {duration} s, each looping: create from a snapshot "
                    "(small sandbox, background python server)"
                    f'{f", pool of {pool_size}" if pool_size else ", no pool"}, exec argv ["true"], '
                    "stop; reset latency = the three; MemAvailable 2 s before and 5 s after"}
    if pool_size:
        line["poolReadyAfter5s"] = pool_status(api, snap).get("ready")
        kilnd.set_pool(api, snap, 0)
    emit(line)
    api.close()


def bench_sustained_peer(peer, cfg, bundle, image):
    workers, duration = cfg["sustained_workers"], cfg["peer_sustained_s"]

    def make(i):
        cid = peer.next_id("sus")
        try:
            peer.start_piped(bundle, cid, image=image)
        except Exception:
            peer.delete(cid)
            raise
        return cid

    r = sustain(workers, duration, make, lambda c: peer_exec_true(peer, c), peer.delete)
    emit({"bench": "sustained_resets", "peer": "runsc restore + exec + delete", **r,
          "what": f"{workers} workers for {duration} s, each looping runsc restore --detach "
                  "(python echo loop checkpoint), runsc exec /bin/true, runsc delete --force"})


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
    cid = peer.next_id("echo")
    peer.start_piped(echo_bundle, cid)
    peer_echo_check(peer, cid)
    echo_image = os.path.join(peer.images, "echo")
    peer.checkpoint(cid, echo_image)
    peer.delete(cid)

    bench_restore(kilnd, peer, cfg, api, snap, digest, echo_bundle, echo_image)
    if has_pool:
        bench_pool(kilnd, peer, cfg, api, snap, echo_bundle, echo_image)
    else:
        emit({"bench": "pool_to_first_result", "skipped": "no pool route"})

    log(f"snapshot: sustained resets, no pool, {cfg['sustained_s']} s ...")
    bench_sustained(kilnd, cfg, snap, 0)
    if has_pool:
        log(f"snapshot: sustained resets, pool of {cfg['sustained_workers']}, "
            f"{cfg['sustained_s']} s ...")
        bench_sustained(kilnd, cfg, snap, cfg["sustained_workers"])
    else:
        emit({"bench": "sustained_resets", "pool": cfg["sustained_workers"],
              "skipped": "no pool route"})
    log(f"snapshot: sustained resets, peer, {cfg['peer_sustained_s']} s ...")
    bench_sustained_peer(peer, cfg, echo_bundle, echo_image)
    kilnd.delete_snapshot(api, snap)
    shutil.rmtree(echo_image)

    log("snapshot: 100 MiB snapshot and fork ...")
    bench_100mib(kilnd, peer, cfg, api)
    api.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kilnd", default=os.path.join(REPO, "build", "bin", "kilnd"))
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--quick", action="store_true", help="few runs of each (smoke test)")
    ap.add_argument("--only", default="",
                    help="comma list: exec,create,concurrent,stream,snapshot")
    args = ap.parse_args()

    cfg = {"exec_n": 200, "peer_exec_n": 50, "create_n": 20, "peer_stop_n": 20,
           "conc_n": 64, "conc_sandboxes": 8, "conc_bursts": 3, "peer_conc_bursts": 3,
           "stream_bytes": 100_000_000, "stream_n": 3,
           "restore_n": 20, "peer_restore_n": 10, "pool_size": 4, "pool_n": 20, "peer_pool_n": 10,
           "snap_n": 5, "fork_runs": 3, "sustained_workers": 8, "sustained_s": 30,
           "peer_sustained_s": 15}
    if args.quick:
        cfg.update(exec_n=20, peer_exec_n=5, create_n=3, peer_stop_n=3, conc_bursts=1,
                   peer_conc_bursts=1, stream_n=1, restore_n=3, peer_restore_n=2, pool_n=3,
                   peer_pool_n=2, snap_n=2, fork_runs=1, sustained_s=15,
                   peer_sustained_s=10)
    groups = ("exec", "create", "concurrent", "stream", "snapshot")
    only = set(filter(None, args.only.split(","))) or set(groups)
    if only - set(groups):
        ap.error(f"--only: unknown {sorted(only - set(groups))}; choose from {','.join(groups)}")

    rootfs = base_rootfs(args.image_dir)
    start_subreaper()
    with KilndSession(args.kilnd, args.image_dir, "kiln-bench-") as session:
        session.on_exit("load threads", stop_load_threads)
        peer = Peer(rootfs, session.workdir)
        session.on_exit("peer cleanup", peer.cleanup)
        for name, fn in (("exec", bench_exec_rtt), ("create", bench_create),
                         ("concurrent", bench_concurrent), ("stream", bench_stream),
                         ("snapshot", bench_snapshot)):
            if name in only:
                t0 = time.monotonic()
                log(f"{name} ...")
                fn(session.kilnd, peer, cfg)
                log(f"{name} done in {time.monotonic() - t0:.1f} s")
    return session.rc


def stop_load_threads():
    _abort.set()
    for t in threading.enumerate():
        if t is not threading.current_thread() and not t.daemon:
            t.join(timeout=120)


if __name__ == "__main__":
    sys.exit(main())
