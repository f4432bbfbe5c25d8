#!/usr/bin/python3
"""What the SDK adds to an exec: median of N execs of `true` through `Sandbox.exec` beside the
same request sent by a bare keep-alive http.client loop, interleaved pair by pair in one
sandbox. Prints one JSON line per figure on stdout; progress on stderr.

Usage: /usr/bin/python3 sdk/python/bench_overhead.py [--runs 200] [--url URL --key KEY]
           [--kilnd PATH [--image-dir DIR]]
Without --kilnd it uses a running daemon (arguments, else KILN_API_URL/KILN_API_KEY, else the
local default); with --kilnd it starts one on a free port and a temporary state dir, and
stops it (and removes the dir) at the end. Standard library only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import time
import urllib.parse
from typing import Callable, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench"))
import kiln  # noqa: E402
from kiln import config  # noqa: E402
from common import KilndSession, emit, log  # noqa: E402  bench/common.py


def stats(ms: List[float]) -> Dict[str, float]:
    s = sorted(ms)
    return {"median": round(statistics.median(s), 4), "p10": round(s[len(s) // 10], 4),
            "p90": round(s[(len(s) * 9) // 10], 4), "runs": len(s)}


def paired(n: int, a: Callable[[], object], b: Callable[[], object]) -> Tuple[List[float], List[float]]:
    """Runs a and b n times each, alternating which goes first; milliseconds."""
    ta: List[float] = []
    tb: List[float] = []
    for i in range(n):
        for fn, out in ((a, ta), (b, tb)) if i % 2 == 0 else ((b, tb), (a, ta)):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1000.0)
    return ta, tb


def measure(url: str, key: str, args: argparse.Namespace) -> None:
    rt = kiln.Runtime(url, key)
    try:
        with rt.sandboxes.create(vcpu=1, memory_mib=256, labels={"bench": "sdk-overhead"}) as sbx:
            u = urllib.parse.urlsplit(url)
            raw = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80, timeout=120)
            headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
                       "Accept": "application/json"}
            exec_body = json.dumps({"argv": ["true"]}).encode()
            exec_path = f"/v1/sandboxes/{sbx.id}:exec"
            get_path = f"/v1/sandboxes/{sbx.id}"

            def raw_exec() -> None:
                raw.request("POST", exec_path, body=exec_body, headers=headers)
                r = raw.getresponse()
                r.read()
                assert r.status == 200, r.status

            def raw_get() -> None:
                raw.request("GET", get_path, headers=headers)
                r = raw.getresponse()
                r.read()
                assert r.status == 200, r.status

            def sdk_exec() -> None:
                assert sbx.exec(["true"]).exit_code == 0

            log(f"warming up ({args.warmup} of each)")
            paired(args.warmup, sdk_exec, raw_exec)
            log(f"{args.runs} execs of `true` each way, interleaved")
            sdk_ms, raw_ms = paired(args.runs, sdk_exec, raw_exec)
            diffs = [s - r for s, r in zip(sdk_ms, raw_ms)]
            emit({"bench": "exec_true_rtt", "client": "sdk", "unit": "ms", **stats(sdk_ms)})
            emit({"bench": "exec_true_rtt", "client": "raw http.client keep-alive", "unit": "ms", **stats(raw_ms)})
            emit({"bench": "sdk_exec_overhead", "unit": "ms",
                  "median_difference": round(statistics.median(sdk_ms) - statistics.median(raw_ms), 4),
                  "paired_median": round(statistics.median(diffs), 4), "runs": args.runs, "target_max": 1.0})
            log(f"{args.runs} GET /v1/sandboxes/ID each way (no process: client cost alone)")
            sdk_ms, raw_ms = paired(args.runs, sbx.refresh, raw_get)
            diffs = [s - r for s, r in zip(sdk_ms, raw_ms)]
            emit({"bench": "get_sandbox_rtt", "client": "sdk", "unit": "ms", **stats(sdk_ms)})
            emit({"bench": "get_sandbox_rtt", "client": "raw http.client keep-alive", "unit": "ms", **stats(raw_ms)})
            emit({"bench": "sdk_get_overhead", "unit": "ms",
                  "median_difference": round(statistics.median(sdk_ms) - statistics.median(raw_ms), 4),
                  "paired_median": round(statistics.median(diffs), 4), "runs": args.runs})
            raw.close()
    finally:
        rt.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--url")
    ap.add_argument("--key")
    ap.add_argument("--kilnd", help="start this kilnd for the run")
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    args = ap.parse_args()

    if args.kilnd:
        # Not a machine line: the output stays the same with or without --kilnd.
        with KilndSession(args.kilnd, args.image_dir, "kiln-bench-sdk-", machine=False) as session:
            measure(session.kilnd.url, session.kilnd.key, args)
        return session.rc
    url, key = config.resolve(args.url, args.key)
    if key is None:
        raise SystemExit("no API key: pass --key, set KILN_API_KEY, or use --kilnd")
    measure(url, key, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
