#!/usr/bin/python3
"""Density: how many idle sandboxes this host holds. One JSON line per figure.

Starts a kilnd of its own with the default capacity settings, makes a neighbour
sandbox and measures its exec latency (p50 of 20 `true` execs) at rest, then
starts idle sandboxes (vcpu 1, memoryMiB 512, nothing running) one after
another. Every --step sandboxes it measures the neighbour again; it stops when
the host refuses a create, when the neighbour's p50 passes 1.5x its value at
rest, or at --max. Then, with all of them idle: host memory per sandbox
(MemAvailable before and after, divided by the count), the host CPU they use
at rest, kilnd's own CPU at rest, and the neighbour's exec latency.

Run by `make density` (a few minutes; not part of `make bench`).
Usage: /usr/bin/python3 bench/density.py [--kilnd PATH] [--max 600] [--step 50]
"""
import argparse
import json
import os
import statistics
import sys
import time

from common import (REPO, ApiError, KilndSession, emit, host_busy_ms, log, mem_available_mib,
                    process_cpu_ms, start_subreaper)

SHAPE = {"vcpu": 1, "memoryMiB": 512}


def exec_p50(api, sid, n=20):
    lat = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = api.call("POST", f"/v1/sandboxes/{sid}:exec", {"argv": ["true"]})
        lat.append((time.perf_counter() - t0) * 1000)
        if r.get("exitCode") != 0:
            raise ApiError(f"neighbour exec: {r}")
    return statistics.median(lat)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kilnd", default=os.path.join(REPO, "build", "bin", "kilnd"))
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--max", type=int, default=600)
    ap.add_argument("--step", type=int, default=50)
    args = ap.parse_args()
    start_subreaper()
    with KilndSession(args.kilnd, args.image_dir, "kiln-bench-density-") as session:
        kilnd = session.kilnd
        api = kilnd.api(timeout=300)
        time.sleep(2)
        k0, b0 = process_cpu_ms(kilnd.proc.pid), host_busy_ms()
        time.sleep(10)
        kilnd_idle = (process_cpu_ms(kilnd.proc.pid) - k0) / 10
        host_idle = (host_busy_ms() - b0) / 10
        neighbour = kilnd.create(api, SHAPE)
        exec_p50(api, neighbour, 5)  # warm
        time.sleep(1)
        at_rest = exec_p50(api, neighbour)
        log(f"neighbour exec p50 at rest {at_rest:.1f} ms; kilnd alone {kilnd_idle:.1f} ms CPU/s")
        mem0 = mem_available_mib()
        count, stop_reason, samples = 0, f"reached --max {args.max}", []
        t_start = time.monotonic()
        while count < args.max:
            resp = api.send("POST", "/v1/sandboxes", SHAPE)
            raw = resp.read()
            if resp.status != 200:
                stop_reason = f"create refused: {resp.status} {raw[:200]!r}"
                break
            kilnd.sandboxes.add(json.loads(raw)["id"])
            count += 1
            if count % args.step == 0:
                time.sleep(1)
                p50 = exec_p50(api, neighbour)
                samples.append({"sandboxes": count, "neighbourExecP50Ms": round(p50, 1),
                                "memAvailableMiB": round(mem_available_mib())})
                log(f"{count} idle sandboxes: neighbour exec p50 {p50:.1f} ms")
                if p50 > 1.5 * at_rest:
                    stop_reason = f"neighbour exec p50 {p50:.1f} ms > 1.5 x {at_rest:.1f} ms"
                    break
        started_s = time.monotonic() - t_start
        time.sleep(5)  # let the last starts settle
        mem_per = (mem0 - mem_available_mib()) / max(1, count)
        k0, b0 = process_cpu_ms(kilnd.proc.pid), host_busy_ms()
        time.sleep(10)
        kilnd_rest = (process_cpu_ms(kilnd.proc.pid) - k0) / 10
        all_rest = (host_busy_ms() - b0) / 10
        final = exec_p50(api, neighbour)
        emit({"bench": "density_idle_sandboxes", "kiln": True, "unit": "sandboxes", "value": count,
              "shape": SHAPE, "stopReason": stop_reason, "startSeconds": round(started_s, 1),
              "hostMemMiBPerSandbox": round(mem_per, 1),
              "hostCpuMsPerSecondAllIdle": round(all_rest - host_idle, 1),
              "hostCpuMsPerSecondPerSandbox": round((all_rest - host_idle) / max(1, count), 3),
              "kilndCpuMsPerSecondAtRest": round(kilnd_rest, 1),
              "kilndCpuMsPerSecondAlone": round(kilnd_idle, 1),
              "neighbourExecP50MsAtRest": round(at_rest, 1),
              "neighbourExecP50MsAtEnd": round(final, 1), "samples": samples,
              "what": "idle sandboxes (vcpu 1, memoryMiB 512, nothing running) started one after "
                      "another with kilnd's default capacity settings, until a create is refused, "
                      "a neighbour's exec p50 passes 1.5x its value at rest, or --max; memory from "
                      "MemAvailable, CPU over 10 s at rest (host CPU less the host's own before)"})
        log(f"stopping {len(kilnd.sandboxes)} sandboxes ...")
        api.close()
    return session.rc


if __name__ == "__main__":
    sys.exit(main())
