#!/usr/bin/python3
"""Pause and wake: one JSON line per figure on stdout (progress on stderr).

  pause_100mib              POST :pause of a sandbox whose python server holds
                            100 MiB of random bytes, until it answers paused
                            (its memory, CPU and capacity are free then)
  wake_first_result_100mib  POST :wake, then the first exec result that asks
                            the server (its 100 MiB intact), beside a create
                            from a snapshot of the same sandbox to the same
                            first result (measured in the same run)

Starts its own kilnd (free port, temporary state dir) and removes everything.

Usage: /usr/bin/python3 bench/pause.py [--kilnd PATH] [--image-dir DIR] [--n N]
Python standard library only.
"""
import argparse
import time

from common import KilndSession, emit, log
from measure import ms, percentile, stats
from snapshot_figures import FETCH_PY, check_server, start_server


def first_result(api, sid, digest):
    r = api.call("POST", f"/v1/sandboxes/{sid}:exec", {"argv": ["python3", "-c", FETCH_PY]})
    if r.get("exitCode") != 0 or r["stdout"].strip() != digest:
        raise RuntimeError(f"server state in {sid}: want {digest}, got {r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kilnd", default="build/bin/kilnd")
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--n", type=int, default=7)
    args = ap.parse_args()
    mib = 100
    with KilndSession(args.kilnd, args.image_dir, "kiln-bench-pause-") as s:
        kilnd = s.kilnd
        api = kilnd.api()
        sid = kilnd.create(api, {"memoryMiB": 1024})
        digest = start_server(api, sid, mib)
        log(f"pause: sandbox {sid}, server state {digest[:12]}")
        pauses, wakes, sizes = [], [], []
        for _ in range(args.n):
            t0 = time.perf_counter()
            info = api.call("POST", f"/v1/sandboxes/{sid}:pause", {})
            pauses.append(ms(time.perf_counter() - t0))
            if info["state"] != "paused":
                raise RuntimeError(f"pause answered {info['state']}")
            time.sleep(0.5)
            t0 = time.perf_counter()
            api.call("POST", f"/v1/sandboxes/{sid}:wake", {})
            first_result(api, sid, digest)
            wakes.append(ms(time.perf_counter() - t0))
        check_server(api, sid, digest)
        # The same state as a snapshot: create from it to the same first result.
        snap = kilnd.snapshot(api, sid)
        sizes.append(snap["sizeBytes"])
        restores = []
        for _ in range(args.n):
            t0 = time.perf_counter()
            copy = kilnd.create(api, {"snapshot": snap["id"]})
            first_result(api, copy, digest)
            restores.append(ms(time.perf_counter() - t0))
            kilnd.stop_sandbox(api, copy)
        kilnd.delete_snapshot(api, snap["id"])
        size_mib = round(sizes[0] / 1048576, 1)
        emit({"bench": "pause_100mib", "unit": "ms", **stats(pauses, 1), "kiln": True,
              "checkpointMiB": size_mib,
              "what": f"POST :pause of a sandbox (memoryMiB 1024) whose python server holds {mib} "
                      "MiB of random bytes, until it answers paused: checkpoint written, sandbox "
                      "torn down, capacity released"})
        wake_p50 = percentile(sorted(wakes), 0.5)
        restore_p50 = percentile(sorted(restores), 0.5)
        emit({"bench": "wake_first_result_100mib", "unit": "ms", **stats(wakes, 1), "kiln": True,
              "snapshotCreateFirstResultP50": round(restore_p50, 1),
              "ratioToSnapshotCreate": round(wake_p50 / restore_p50, 2),
              "what": "POST :wake of that sandbox, then an exec asking its server for the hash of "
                      "its 100 MiB (first result), beside POST /v1/sandboxes {snapshot} of the same "
                      "state to the same first result (same run)"})
        api.close()
    raise SystemExit(s.rc)


if __name__ == "__main__":
    main()
