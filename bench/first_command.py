#!/usr/bin/python3
"""The first command in a copy handed out by a warm pool (issue 32, item 2),
with the warm-up of restored copies on (`--warm-copies`) and off (kilnd as
it ships), in the same run. One JSON line per setting:

  pool_first_result   create() from the built-in image's pinned pool ->
                      `exec true` answered (the hand-out and the first process)
  firstExecMs         that first exec alone
  secondExecMs        the next exec in the same copy, at once
  idleExecMs          an exec in the same copy after it idled IDLE_S, as the
                      pooled copy had before its hand-out: what any exec
                      costs after the same wait

and one `process_start_in_gvisor` line: the engine's own cost of starting
`/bin/true` inside a sandbox (posix_spawn + wait in a Python loop, no kiln
in the loop), at once and after IDLE_S idle, beside the same on the host.
On these VMs every wake after an idle costs (the host's own posix_spawn
too), so a copy that waited in a pool pays what any sandbox pays after the
same wait.

The pool holds one copy; each create waits until it is ready and then
IDLE_S more, so the copy handed out has idled at least that long. Medians of
--runs copies. Loopback, this machine's cores.

Usage: /usr/bin/python3 bench/first_command.py [--kilnd PATH] [--image-dir DIR] [--runs N]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "sdk", "python"))
import kiln  # noqa: E402

from common import KilndSession, emit, log  # noqa: E402

POOL = 1
IDLE_S = 1.0

# Run inside a sandbox (and on the host): the engine's process start, at
# once and after IDLE_S idle; prints two medians in ms.
SPAWN_PY = r'''
import os, statistics, sys, time
idle = float(sys.argv[1])
def spawn():
    t = time.perf_counter()
    os.waitpid(os.posix_spawn("/bin/true", ["true"], {}), 0)
    return (time.perf_counter() - t) * 1000
hot, cold = [], []
for _ in range(int(sys.argv[2])):
    spawn()
    hot.append(spawn())
    time.sleep(idle)
    cold.append(spawn())
print(round(statistics.median(hot), 1), round(statistics.median(cold), 1))
'''


def builtin(rt):
    return next(i for i in rt.request("GET", "/v1/images")["data"] if i["source"] == "builtin")


def settled(rt, image_id, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (rt.request("GET", f"/v1/images/{image_id}").get("pool") or {}).get("ready", 0) >= POOL:
            time.sleep(IDLE_S)  # the copy idles, as one waiting in a pool does
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
            total, first, second, idle = [], [], [], []
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
                time.sleep(IDLE_S)
                t3 = time.perf_counter()
                sb.exec(["true"])
                idle.append(ms(t3))
                sb.stop(wait=False)
            fig = {k: round(statistics.median(v), 1)
                   for k, v in (("p50", total), ("firstExecMs", first), ("secondExecMs", second),
                                ("idleExecMs", idle))}
            log(f"warm copies {warm}: pool -> first result {fig['p50']} ms, first exec "
                f"{fig['firstExecMs']} ms, second {fig['secondExecMs']} ms, after "
                f"{IDLE_S} s idle {fig['idleExecMs']} ms")
            emit({"bench": "pool_first_result", "warmCopies": warm == "true", "unit": "ms",
                  "runs": args.runs, "idleS": IDLE_S, **fig,
                  "what": f"create() from the built-in image's pool of {POOL} (ready, then "
                          f"{IDLE_S} s idle) -> exec argv [true] answered, via kiln's Python "
                          "SDK; then two more execs in that copy: at once, and after "
                          f"{IDLE_S} s idle; medians"})
            if warm == "false":
                sb = rt.sandboxes.create()
                sb.files.write("/tmp/spawn.py", SPAWN_PY)
                n = str(max(5, args.runs // 2))
                inside = sb.exec(["python3", "/tmp/spawn.py", str(IDLE_S), n],
                                 timeout_ms=600000, check=True).stdout.split()
                sb.stop(wait=False)
                host = subprocess.run([sys.executable, "-c", SPAWN_PY, str(IDLE_S), n],
                                      check=True, capture_output=True, text=True).stdout.split()
                log(f"process start in gVisor {inside[0]} ms, after {IDLE_S} s idle {inside[1]} ms;"
                    f" on the host {host[0]} / {host[1]} ms")
                emit({"bench": "process_start_in_gvisor", "unit": "ms", "runs": int(n),
                      "idleS": IDLE_S, "p50": float(inside[0]), "afterIdleMs": float(inside[1]),
                      "hostMs": float(host[0]), "hostAfterIdleMs": float(host[1]),
                      "what": "posix_spawn(/bin/true) + waitpid in a Python loop inside a kiln "
                              f"sandbox (no kiln in the loop): at once, and after {IDLE_S} s "
                              "idle; the same on the host; medians"})
        rc = rc or s.rc
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
