#!/usr/bin/python3
"""Time to interactive, by ComputeSDK's method: create() -> the first finished
command (`echo ok`) through kiln's Python SDK, one JSON line per pattern and
pool setting:

  tti_sequential   100 runs one after the other
  tti_staggered    100 launches 200 ms apart (each on its own thread)
  tti_burst        --burst launches at once (default 30)

Each pattern runs against two kilnds in the same run: one as it ships
(demand-sized warm pools: "pools": "auto") and one started with
`--pool-memory-mib 0` (no pools: every create restores the built-in image's
warm copy; "pools": "off"). Both take the default create (no image). After
the burst, `tti_burst_repeat` runs the same burst again: the first burst
teaches the pool its size, the second meets a pool that holds it. Figures:
median, p95 and p99 after dropping the top and bottom 5 % (as ComputeSDK
does), and the success rate. Sandboxes are stopped after their timing, not
within it. Loopback and 2 cores here; the published peers' figures cross the
internet.

In the same run, `tti_*` lines with "peer" time what the raw runsc CLI can
do with the same base root (a python echo loop's checkpoint): "restored
beforehand" restores the containers untimed first (the CLI's pool) and times
`runsc exec bash -c 'echo ok'` (kiln's command) in each, one after the other or all at once; "restore
+ exec" times both, all at once (the CLI without a pool). They show what the
engine alone costs for the same patterns on this machine.

`tti_first_exec_pair` splits a pooled TTI under equal conditions: alternately
(20 pairs), kiln's create and first `echo ok` in the copy it handed out, and
the raw CLI's first `runsc exec` into a container it restored, each after the
same 0.3 s idle (then a second command in each at once).

Usage: /usr/bin/python3 bench/tti.py [--kilnd PATH] [--image-dir DIR]
                                     [--runs N] [--burst N]
"""
import argparse
import subprocess
import os
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "sdk", "python"))
import kiln  # noqa: E402

from common import KilndSession, Peer, base_rootfs, emit, log, start_subreaper  # noqa: E402
from snapshot_figures import ECHO_PY, peer_echo_checkpoint  # noqa: E402


def trimmed(values):
    """ComputeSDK's summary: drop the top and bottom 5 %, then median, p95, p99."""
    v = sorted(values)
    cut = int(len(v) * 0.05)
    v = v[cut:len(v) - cut] if len(v) > 2 * cut else v
    if not v:
        return {"median": None, "p95": None, "p99": None}

    def pct(p):
        return round(v[min(len(v) - 1, int(round(p * (len(v) - 1))))], 1)
    return {"median": pct(0.5), "p95": pct(0.95), "p99": pct(0.99)}


def one(rt, out, stop_after, fields):
    """Times create -> `echo ok`; appends (ms or None, error, create's ms)."""
    t0 = time.perf_counter()
    try:
        sb = rt.sandboxes.create(**fields)
        created = (time.perf_counter() - t0) * 1000
        r = sb.exec("echo ok")
        ms = (time.perf_counter() - t0) * 1000
        ok = r.exit_code == 0 and r.stdout.strip() == "ok"
        out.append((ms if ok else None, None if ok else f"exec: {r.exit_code} {r.stdout!r}",
                    created))
        stop_after.append(sb)
    except Exception as e:  # noqa: BLE001 -- counted as a failure
        out.append((None, f"{type(e).__name__}: {e}"[:200], None))


def run_pattern(rt, pattern, n, gap_s, fields):
    results, made = [], []
    if pattern == "sequential":
        for _ in range(n):
            one(rt, results, made, fields)
            for sb in made:
                sb.stop(wait=False)
            made.clear()
    else:
        threads = []
        start = threading.Barrier(n) if gap_s == 0 else None

        def go():
            if start:
                start.wait()
            one(rt, results, made, fields)
        for _ in range(n):
            t = threading.Thread(target=go)
            t.start()
            threads.append(t)
            if gap_s:
                time.sleep(gap_s)
        for t in threads:
            t.join()
        for sb in made:
            sb.stop(wait=False)
    times = [ms for ms, _, _ in results if ms is not None]
    errors = [e for _, e, _ in results if e]
    creates = [c for ms, _, c in results if ms is not None]
    return times, errors, creates


def pool_creates(kilnd):
    """kiln_pool_creates_total summed by `from` (pool, restore) over every snapshot."""
    req = urllib.request.Request(kilnd.url + "/metrics",
                                 headers={"Authorization": f"Bearer {kilnd.key}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
    out = {"pool": 0, "restore": 0}
    for line in text.splitlines():
        labels, _, value = line.partition("} ")
        if labels.startswith("kiln_pool_creates_total{"):
            for k in out:
                if f'from="{k}"' in labels:
                    out[k] += int(float(value))
    return out


def wait_warm(rt, timeout=180):
    """The built-in image warms once, on the first create that runs it."""
    rt.sandboxes.create().stop()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        base = next(i for i in rt.request("GET", "/v1/images")["data"] if i.get("source") == "builtin")
        if base.get("warm"):
            return base
        time.sleep(0.2)
    raise TimeoutError("the built-in image did not warm")


def settle(rt, base, timeout=60):
    """Waits until the built-in image's pool holds what its demand asks (or
    has no pool), so that each pattern starts from the same state."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pool = rt.request("GET", f"/v1/images/{base['id']}").get("pool") or {}
        if pool.get("ready", 0) >= pool.get("size", 0):
            return
        time.sleep(0.2)


def peer_echo_ok(peer, cid):
    """kiln's TTI command, through `runsc exec`: bash -c 'echo ok'."""
    r = peer.exec(cid, "bash", "-c", "echo ok", stdout=subprocess.PIPE)
    if r.returncode != 0 or r.stdout.strip() != b"ok":
        raise RuntimeError(f"runsc exec {cid}: rc={r.returncode} {r.stderr[-300:]!r}")


def timed_exec(peer, cid, out):
    t0 = time.perf_counter()
    try:
        peer_echo_ok(peer, cid)
        out.append(((time.perf_counter() - t0) * 1000, None))
    except Exception as e:  # noqa: BLE001 -- counted as a failure
        out.append((None, f"{type(e).__name__}: {e}"[:200]))


def timed_restore_exec(peer, bundle, image, out):
    cid = peer.next_id("tti")
    t0 = time.perf_counter()
    try:
        peer.start_piped(bundle, cid, image=image)
        peer_echo_ok(peer, cid)
        out.append(((time.perf_counter() - t0) * 1000, None))
    except Exception as e:  # noqa: BLE001 -- counted as a failure
        out.append((None, f"{type(e).__name__}: {e}"[:200]))
    return cid


def at_once(n, fn):
    start = threading.Barrier(n)
    threads = [threading.Thread(target=lambda i=i: (start.wait(), fn(i))) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def bench_peer(session, image_dir, runs, burst):
    """The raw runsc CLI on the same patterns (see the module's doc)."""
    peer = Peer(base_rootfs(image_dir), session.workdir)
    session.on_exit("peer cleanup", peer.cleanup)
    bundle = peer.bundle("echo", ["python3", "-c", ECHO_PY])
    image = peer_echo_checkpoint(peer, bundle, "echo")

    def restored(n):
        cids = [peer.next_id("pool") for _ in range(n)]
        for c in cids:
            peer.start_piped(bundle, c, image=image)
        time.sleep(1)  # let the restores' teardown of CPU settle, as a pool's copies wait
        return cids

    def report(pattern, how, results, n):
        times = [t for t, _ in results if t is not None]
        fig = trimmed(times)
        log(f"tti {pattern} peer ({how}): median {fig['median']} ms, {len(times)}/{n} ok")
        emit({"bench": f"tti_{pattern}", "peer": f"runsc: {how}", "runs": n, **fig,
              "successRate": round(len(times) / n, 3),
              "errors": [e for _, e in results if e][:3],
              "note": "raw runsc CLI, python echo loop checkpoint of the same base root; "
                      "5% trimmed"})

    seq = []
    for c in restored(runs):
        timed_exec(peer, c, seq)
        peer.delete(c)
    report("sequential", "restored beforehand, runsc exec bash -c 'echo ok'", seq, runs)
    cids, res = restored(burst), []
    at_once(burst, lambda i: timed_exec(peer, cids[i], res))
    for c in cids:
        peer.delete(c)
    report("burst", "restored beforehand, runsc exec bash -c 'echo ok'", res, burst)
    res, made = [], [None] * burst
    time.sleep(1)
    at_once(burst, lambda i: made.__setitem__(i, timed_restore_exec(peer, bundle, image, res)))
    for c in made:
        if c:
            peer.delete(c)
    report("burst", "restore + runsc exec bash -c 'echo ok'", res, burst)


def bench_first_exec_pair(session, rt, base, image_dir, n):
    """kiln's share of a pooled TTI, under the same conditions: alternately,
    kiln's first `echo ok` in a copy just handed out from the pool and the raw
    CLI's first `runsc exec` into a container it restored, each after the
    same 0.3 s idle, then a second command in each at once."""
    peer = Peer(base_rootfs(image_dir), session.workdir)
    session.on_exit("peer cleanup (pair)", peer.cleanup)
    bundle = peer.bundle("pair", ["python3", "-c", ECHO_PY])
    image = peer_echo_checkpoint(peer, bundle, "pair")
    kiln_first, kiln_again, raw_first, raw_again, creates = [], [], [], [], []

    def timed(fn, out):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)

    def kiln_echo(sb):
        r = sb.exec("echo ok")
        if r.exit_code != 0 or r.stdout.strip() != "ok":
            raise RuntimeError(f"exec: {r.exit_code} {r.stdout!r}")
    for _ in range(n):
        settle(rt, base)
        cid = peer.next_id("pair")
        peer.start_piped(bundle, cid, image=image)
        time.sleep(0.3)
        box = []
        timed(lambda: box.append(rt.sandboxes.create()), creates)
        time.sleep(0.3)
        timed(lambda: kiln_echo(box[0]), kiln_first)
        timed(lambda: kiln_echo(box[0]), kiln_again)
        box[0].stop()
        time.sleep(0.3)
        timed(lambda: peer_echo_ok(peer, cid), raw_first)
        timed(lambda: peer_echo_ok(peer, cid), raw_again)
        peer.delete(cid)
    fig = {k: trimmed(v)["median"] for k, v in (
        ("kilnCreate", creates), ("kilnFirstExec", kiln_first), ("kilnExecAgain", kiln_again),
        ("runscFirstExec", raw_first), ("runscExecAgain", raw_again))}
    log(f"tti first exec pair: {fig}")
    emit({"bench": "tti_first_exec_pair", "runs": n, **fig,
          "note": "alternating, each after the same 0.3 s idle: kiln's first echo ok in a pooled "
                  "copy vs runsc exec bash -c 'echo ok' into a container the CLI restored; ms"})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kilnd", default="build/bin/kilnd")
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--burst", type=int, default=30)
    ap.add_argument("--pool-size", type=int, default=8)
    ap.add_argument("--peer-runs", type=int, default=30)
    ap.add_argument("--pair-runs", type=int, default=20)
    args = ap.parse_args()
    rc = 0
    start_subreaper()
    for pools, extra in (("auto", ()), ("off", ("--pool-memory-mib", "0"))):
        with KilndSession(args.kilnd, args.image_dir, f"kiln-bench-tti-{pools}-", extra,
                          machine=pools == "auto") as s:
            rt = kiln.Runtime(s.kilnd.key, s.kilnd.url)
            base = wait_warm(rt)
            for pattern, n, gap in (("sequential", args.runs, None), ("staggered", args.runs, 0.2),
                                    ("burst", args.burst, 0), ("burst_repeat", args.burst, 0)):
                settle(rt, base)
                if pattern != "burst_repeat":  # one untimed: the first is no cold start
                    rt.sandboxes.create().stop()
                    settle(rt, base)
                t0 = time.monotonic()
                served0 = pool_creates(s.kilnd)
                times, errors, creates = run_pattern(
                    rt, "sequential" if pattern == "sequential" else "at_once", n, gap, {})
                served1 = pool_creates(s.kilnd)
                fig = trimmed(times)
                # The create's share (kilnd's hand-out or restore, and the HTTP round trip)
                # and how many creates a pooled copy served, in the same runs.
                split = {"createMedian": trimmed(creates)["median"],
                         "fromPool": served1["pool"] - served0["pool"],
                         "fromRestore": served1["restore"] - served0["restore"]}
                pool = rt.request("GET", f"/v1/images/{base['id']}").get("pool") or {}
                log(f"tti {pattern} pools {pools}: median {fig['median']} ms, p95 {fig['p95']} ms, "
                    f"{len(times)}/{n} ok, pool size {pool.get('size')}, create median "
                    f"{split['createMedian']} ms, {split['fromPool']} from the pool")
                emit({"bench": f"tti_{pattern}", "pools": pools, "runs": n, **fig, **split,
                      "successRate": round(len(times) / n, 3), "errors": errors[:3],
                      "poolSizeAfter": pool.get("size"), "wallS": round(time.monotonic() - t0, 1),
                      "note": "create() -> echo ok via kiln's Python SDK, no image named, "
                              "loopback, 5% trimmed"})
            if pools == "auto":
                bench_first_exec_pair(s, rt, base, args.image_dir, args.pair_runs)
            if pools == "off":
                bench_peer(s, args.image_dir, args.peer_runs, args.burst)
        rc = rc or s.rc
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
