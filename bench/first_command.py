#!/usr/bin/python3
"""The first command in a copy handed out by a warm pool (issue 32, item 2),
with the warm-up of restored copies on (`--warm-copies`) and off (kilnd as
it ships), in the same run. One JSON line per setting:

  pool_first_result   create() from the built-in image's pinned pool ->
                      `exec true` answered (the hand-out and the first process)
  firstExecMs         that first exec alone
  secondExecMs        the next exec in the same copy (what any exec costs)

Each copy is taken from a pool that is full and settled (refills done), so
the figure is the hand-out and the first process, not a refill's contention.
Medians of --runs copies. Loopback, this machine's cores.

Usage: /usr/bin/python3 bench/first_command.py [--kilnd PATH] [--image-dir DIR] [--runs N]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "sdk", "python"))
import kiln  # noqa: E402

from common import KilndSession, emit, log  # noqa: E402

POOL = 2


def builtin(rt):
    return next(i for i in rt.request("GET", "/v1/images")["data"] if i["source"] == "builtin")


def settled(rt, image_id, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (rt.request("GET", f"/v1/images/{image_id}").get("pool") or {}).get("ready", 0) >= POOL:
            time.sleep(0.3)  # the refill's restore has let go of the CPU
            return
        time.sleep(0.1)
    raise TimeoutError("the pool did not fill")


def ms(t0):
    return (time.perf_counter() - t0) * 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kilnd", default="build/bin/kilnd")
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    rc = 0
    for warm in ("true", "false"):
        extra = ("--pool-memory-mib", "0") + (("--warm-copies",) if warm == "true" else ())
        with KilndSession(args.kilnd, args.image_dir, "kiln-bench-first-", extra,
                          machine=warm == "true") as s:
            rt = kiln.Runtime(s.kilnd.key, s.kilnd.url)
            rt.sandboxes.create().stop()
            while not builtin(rt)["warm"]:
                time.sleep(0.2)
            image = builtin(rt)["id"]
            rt.request("POST", f"/v1/images/{image}:pool", json={"size": POOL})
            total, first, second = [], [], []
            for _ in range(args.runs):
                settled(rt, image)
                t0 = time.perf_counter()
                sb = rt.sandboxes.create()
                t1 = time.perf_counter()
                sb.exec(["true"])
                total.append(ms(t0))
                first.append(ms(t1))
                t2 = time.perf_counter()
                sb.exec(["true"])
                second.append(ms(t2))
                sb.stop(wait=False)
            fig = {k: round(statistics.median(v), 1)
                   for k, v in (("p50", total), ("firstExecMs", first), ("secondExecMs", second))}
            log(f"warm copies {warm}: pool -> first result {fig['p50']} ms, first exec "
                f"{fig['firstExecMs']} ms, second {fig['secondExecMs']} ms")
            emit({"bench": "pool_first_result", "warmCopies": warm == "true", "unit": "ms",
                  "runs": args.runs, **fig,
                  "what": "create() from the built-in image's pool of 2 (full, settled) -> "
                          "exec argv [true] answered, via kiln's Python SDK; medians"})
        rc = rc or s.rc
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
