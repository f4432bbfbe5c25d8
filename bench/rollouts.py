#!/usr/bin/python3
"""RL rollouts: examples/rollouts.py (50 episodes, 8 in parallel, a game server
restored with every episode) against a kilnd of its own; one JSON line with the
reset latency (create from the snapshot -> first command result) and the wall
time. No raw-runsc peer: the figure is kiln's reset under a full load of steps.

Usage: /usr/bin/python3 bench/rollouts.py [--kilnd PATH] [--episodes 50] [--parallel 8]
"""
import argparse
import json
import os
import subprocess
import sys

from common import REPO, KilndSession, emit, log, start_subreaper


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kilnd", default=os.path.join(REPO, "build", "bin", "kilnd"))
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--parallel", type=int, default=8)
    args = ap.parse_args()
    start_subreaper()
    with KilndSession(args.kilnd, args.image_dir, "kiln-bench-rollouts-", machine=False) as session:
        env = {**os.environ, "KILN_API_URL": session.kilnd.url, "KILN_API_KEY": session.kilnd.key}
        for pool in (args.parallel, 0):
            log(f"rollouts: {args.episodes} episodes, {args.parallel} in parallel, pool {pool}")
            r = subprocess.run([sys.executable, os.path.join(REPO, "examples", "rollouts.py"),
                                "--episodes", str(args.episodes), "--parallel", str(args.parallel),
                                "--pool", str(pool)], env=env, capture_output=True, text=True, timeout=900)
            if r.returncode != 0:
                log(f"rollouts failed ({r.returncode}): {r.stderr[-1000:]}")
                session.rc = 1
                continue
            summary = json.loads(r.stdout.strip().splitlines()[-1])
            emit({"bench": "rollouts_reset", "kiln": True, "unit": "ms", "pool": pool,
                  "parallel": args.parallel, "episodes": args.episodes,
                  "p50": summary["reset_ms_median"], "p90": summary["reset_ms_p90"],
                  "wallS": summary["wall_s"], "failed": summary["failed"],
                  "what": "examples/rollouts.py: reset = create from the game server's snapshot -> "
                          "first command result, while the other episodes play"})
    return session.rc


if __name__ == "__main__":
    sys.exit(main())
