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

Usage: /usr/bin/python3 bench/tti.py [--kilnd PATH] [--image-dir DIR]
                                     [--runs N] [--burst N]
"""
import argparse
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "sdk", "python"))
import kiln  # noqa: E402

from common import KilndSession, emit, log  # noqa: E402


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
    """Times create -> `echo ok`; appends (ms or None, error)."""
    t0 = time.perf_counter()
    try:
        sb = rt.sandboxes.create(**fields)
        r = sb.exec("echo ok")
        ms = (time.perf_counter() - t0) * 1000
        ok = r.exit_code == 0 and r.stdout.strip() == "ok"
        out.append((ms if ok else None, None if ok else f"exec: {r.exit_code} {r.stdout!r}"))
        stop_after.append(sb)
    except Exception as e:  # noqa: BLE001 -- counted as a failure
        out.append((None, f"{type(e).__name__}: {e}"[:200]))


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
    times = [ms for ms, _ in results if ms is not None]
    errors = [e for _, e in results if e]
    return times, errors


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kilnd", default="build/bin/kilnd")
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--burst", type=int, default=30)
    ap.add_argument("--pool-size", type=int, default=8)
    args = ap.parse_args()
    rc = 0
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
                times, errors = run_pattern(rt, "sequential" if pattern == "sequential" else "at_once",
                                            n, gap, {})
                fig = trimmed(times)
                pool = rt.request("GET", f"/v1/images/{base['id']}").get("pool") or {}
                log(f"tti {pattern} pools {pools}: median {fig['median']} ms, p95 {fig['p95']} ms, "
                    f"{len(times)}/{n} ok, pool size {pool.get('size')}")
                emit({"bench": f"tti_{pattern}", "pools": pools, "runs": n, **fig,
                      "successRate": round(len(times) / n, 3), "errors": errors[:3],
                      "poolSizeAfter": pool.get("size"), "wallS": round(time.monotonic() - t0, 1),
                      "note": "create() -> echo ok via kiln's Python SDK, no image named, "
                              "loopback, 5% trimmed"})
        rc = rc or s.rc
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
