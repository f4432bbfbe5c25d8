#!/usr/bin/python3
"""Memory and disk snapshots side by side: one JSON line per figure on stdout.

The source: a sandbox (memoryMiB 1024) with 50 MiB of new files on its disk
and a python server holding 100 MiB of random bytes in memory.

  snapshot_capture        POST :snapshot until it answers, for mode memory and
                          mode disk (stored MiB beside each)
  snapshot_copy_first_result
                          POST /v1/sandboxes {snapshot} -> the first exec result
                          (`cat` of one of the files), for each mode: a memory
                          copy is a restore, a disk copy a fresh boot of its files

Starts its own kilnd (free port, temporary state dir) and removes everything.

Usage: /usr/bin/python3 bench/snapshot_modes.py [--kilnd PATH] [--image-dir DIR] [--n N]
Python standard library only.
"""
import argparse
import time

from common import KilndSession, emit, log
from measure import ms, percentile, stats
from snapshot_figures import start_server


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kilnd", default="build/bin/kilnd")
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--n", type=int, default=7)
    args = ap.parse_args()
    with KilndSession(args.kilnd, args.image_dir, "kiln-bench-snapmodes-") as s:
        kilnd = s.kilnd
        api = kilnd.api()
        sid = kilnd.create(api, {"memoryMiB": 1024})
        r = api.call("POST", f"/v1/sandboxes/{sid}:exec", {"command": (
            "mkdir -p /workspace/data && for i in $(seq 1 50); do "
            "head -c 1048576 /dev/urandom > /workspace/data/f$i; done && echo ready > /workspace/marker")})
        if r.get("exitCode") != 0:
            raise RuntimeError(f"writing the files: {r}")
        start_server(api, sid, 100)
        first = {"argv": ["cat", "/workspace/marker"]}
        for mode in ("memory", "disk"):
            captures, sizes, copies = [], [], []
            for _ in range(args.n):
                t0 = time.perf_counter()
                snap = kilnd.snapshot(api, sid, {"mode": mode})
                captures.append(ms(time.perf_counter() - t0))
                sizes.append(snap["sizeBytes"])
                if snap["mode"] != mode:
                    raise RuntimeError(f"asked for {mode}, got {snap['mode']}")
                t0 = time.perf_counter()
                copy = kilnd.create(api, {"snapshot": snap["id"]})
                out = api.call("POST", f"/v1/sandboxes/{copy}:exec", first)
                copies.append(ms(time.perf_counter() - t0))
                if out.get("stdout") != "ready\n":
                    raise RuntimeError(f"{mode} copy: {out}")
                kilnd.stop_sandbox(api, copy)
                kilnd.delete_snapshot(api, snap["id"])
            stored = round(percentile(sorted(sizes), 0.5) / 1048576, 1)
            log(f"{mode}: capture p50 {percentile(sorted(captures), 0.5):.0f} ms, {stored} MiB, "
                f"copy p50 {percentile(sorted(copies), 0.5):.0f} ms")
            emit({"bench": "snapshot_capture", "mode": mode, "unit": "ms", **stats(captures, 1),
                  "kiln": True, "storedMiB": stored,
                  "what": "POST :snapshot of a sandbox with 50 MiB of new files and a server "
                          "holding 100 MiB in memory, until it answers (ready)"})
            emit({"bench": "snapshot_copy_first_result", "mode": mode, "unit": "ms",
                  **stats(copies, 1), "kiln": True,
                  "what": "POST /v1/sandboxes {snapshot} of it, then the first exec result "
                          "(memory: a restore; disk: a fresh boot of its files)"})
        api.close()
    raise SystemExit(s.rc)


if __name__ == "__main__":
    main()
