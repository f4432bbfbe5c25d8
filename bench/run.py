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
import json
import os
import subprocess
import sys
import threading
import time

from common import (REPO, ApiError, KilndSession, Peer, base_rootfs, emit, forget, log, runsc_cmd,
                    spawn, start_subreaper)
from measure import exec_true, ms, percentile, stats, stop_load_threads, timed
from snapshot_figures import bench_snapshot


# --------------------------------------------------------------------------
# Figures


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


if __name__ == "__main__":
    sys.exit(main())
