#!/usr/bin/python3
"""Time to interactive, by ComputeSDK's method: create() -> the first finished
command (`echo ok`) through kiln's Python SDK, one JSON line per pattern and
pool setting:

  tti_sequential   100 runs one after the other
  tti_staggered    100 launches 200 ms apart (each on its own thread)
  tti_burst        --burst launches at once (default 30)

Each pattern runs twice in the same run: the default create (no image, no
pool: "pool": 0) and a create naming the built-in image with a warm pool of
--pool-size copies ("pool": N, full again before each pattern). Figures:
median, p95 and p99 after dropping the top and bottom 5 % (as ComputeSDK
does), and the success rate. Sandboxes are stopped after their timing, not
within it. Loopback and 2 cores here; the published peers' figures cross the
internet.

Usage: /usr/bin/python3 bench/tti.py [--kilnd PATH] [--image-dir DIR]
                                     [--runs N] [--burst N] [--pool-size N]
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


def set_pool(rt, image_id, size, timeout=180):
    deadline = time.monotonic() + timeout
    while True:  # the built-in image warms once after kilnd starts
        try:
            rt.request("POST", f"/v1/images/{image_id}:pool", json={"size": size})
            break
        except kiln.errors.ConflictError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    while size and time.monotonic() < deadline:
        info = rt.request("GET", f"/v1/images/{image_id}")
        if (info.get("pool") or {}).get("ready", 0) >= size:
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
    with KilndSession(args.kilnd, args.image_dir, "kiln-bench-tti-") as s:
        rt = kiln.Runtime(s.kilnd.key, s.kilnd.url)
        images = rt.request("GET", "/v1/images")["data"]
        base = next(i for i in images if i.get("source") == "builtin")
        # A create that names no image boots the base root, and only a create that names an
        # image restores its warm copy, from its pool when one is set: so "pool off" is the
        # default create, "pool on" names the built-in image with a pool.
        for pool in (0, args.pool_size):
            fields = {"image": base["name"]} if pool else {}
            for pattern, n, gap in (("sequential", args.runs, None), ("staggered", args.runs, 0.2),
                                    ("burst", args.burst, 0)):
                set_pool(rt, base["id"], pool)
                rt.sandboxes.create(**fields).stop()  # one untimed: the first run is not a cold start
                t0 = time.monotonic()
                times, errors = run_pattern(rt, pattern, n, gap, fields)
                fig = trimmed(times)
                log(f"tti {pattern} pool {pool}: median {fig['median']} ms, p95 {fig['p95']} ms, "
                    f"{len(times)}/{n} ok")
                emit({"bench": f"tti_{pattern}", "pool": pool, "image": fields.get("image"),
                      "runs": n, **fig,
                      "successRate": round(len(times) / n, 3), "errors": errors[:3],
                      "wallS": round(time.monotonic() - t0, 1),
                      "note": "create -> echo ok via kiln's Python SDK, loopback, 5% trimmed"})
        set_pool(rt, base["id"], 0)
    return s.rc


if __name__ == "__main__":
    raise SystemExit(main())
