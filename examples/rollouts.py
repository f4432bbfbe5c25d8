#!/usr/bin/python3
"""kiln example: RL rollouts from a snapshot of an environment with a running server.

What it shows:
  1. Build the environment once: a sandbox runs a tiny HTTP "guess the number"
     game server (started with `sbx.spawn`, listening on 127.0.0.1:8000 inside
     the sandbox). Its secret number lives only in the server's memory.
  2. Snapshot it (`sbx.snapshot`): files, memory and the running server.
  3. Run N episodes in parallel, each in a fresh sandbox created from the
     snapshot (`runtime.sandboxes.create(snapshot=...)`). The server is already
     running there, with the same secret and a guess counter at 0. A scripted
     policy (a noisy bisection, seeded per episode) plays through `exec`
     (`curl` to the server inside), one command per step.
  4. Each episode's reward is computed here, outside the sandbox, from the
     observation text the commands returned; then the copy is stopped.
  5. Print every reward, the reset latency (create-from-snapshot -> first
     command result: median and p90) and a final JSON summary line.

Run (the daemon is taken from KILN_API_URL / KILN_API_KEY, like the SDK does;
without them the local daemon at http://127.0.0.1:7070 with its admin key):

    KILN_API_URL=http://127.0.0.1:7070 KILN_API_KEY=... \\
        /usr/bin/python3 examples/rollouts.py --episodes 50 --parallel 8

Exits non-zero if any episode failed or the environment misbehaved.
"""
import argparse
import json
import math
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk" / "python"))
from kiln import Runtime  # noqa: E402

PORT = 8000
LOW, HIGH = 1, 100

# The game: GET /state -> {"guesses": n, "solved": bool}; GET /guess?n=K -> {"result":
# "higher"|"lower"|"correct", "guesses": n}. The secret is drawn once, at build time.
GAME_SERVER = r'''
import json, random, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlsplit

SECRET = random.Random(int(sys.argv[1])).randint(%(low)d, %(high)d)
STATE = {"guesses": 0, "solved": False}

class Game(BaseHTTPRequestHandler):
    def do_GET(self):
        u = urlsplit(self.path)
        if u.path == "/state":
            body = dict(STATE)
        elif u.path == "/guess":
            n = int(parse_qs(u.query)["n"][0])
            STATE["guesses"] += 1
            result = "correct" if n == SECRET else ("higher" if n < SECRET else "lower")
            STATE["solved"] = STATE["solved"] or result == "correct"
            body = {"result": result, "guesses": STATE["guesses"]}
        else:
            self.send_error(404)
            return
        data = (json.dumps(body) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", %(port)d), Game).serve_forever()
''' % {"low": LOW, "high": HIGH, "port": PORT}

SHAPE = {"vcpu": 1, "memory_mib": 256}


def build_environment(rt, seed):
    """A sandbox with the game server running, snapshotted. Returns the snapshot id."""
    with rt.sandboxes.create(**SHAPE, labels={"example": "rollouts", "role": "build"}) as sbx:
        sbx.files.write("/workspace/game.py", GAME_SERVER)
        sbx.spawn(["python3", "/workspace/game.py", str(seed)])
        # Wait until the server answers (it takes a moment to import and bind).
        for _ in range(100):
            r = sbx.exec(f"curl -sf http://127.0.0.1:{PORT}/state")
            if r.exit_code == 0:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"game server did not come up: {r.stdout}{r.stderr}")
        if json.loads(r.stdout) != {"guesses": 0, "solved": False}:
            raise RuntimeError(f"unexpected initial state: {r.stdout!r}")
        t = time.monotonic()
        snap = sbx.snapshot(name="rollouts-game", retention_days=1, labels={"example": "rollouts"})
        print(f"snapshot {snap['id']} of {sbx.id} in {1000 * (time.monotonic() - t):.0f} ms", flush=True)
    return snap["id"]  # the source sandbox is stopped here; the snapshot remains


def policy(rng, lo, hi):
    """Noisy bisection: a random point in the middle half of [lo, hi]."""
    q = (hi - lo) // 4
    return rng.randint(lo + q, hi - q)


def reward_from(observations):
    """The reward, from the observation texts alone: 1.0 for solving at the first
    guess, 0.1 less per further guess, 0 if never solved."""
    for step, text in enumerate(observations, start=1):
        if json.loads(text).get("result") == "correct":
            return round(1.0 - 0.1 * (step - 1), 2)
    return 0.0


def episode(rt, snapshot_id, index, max_steps):
    rng = random.Random(index)  # the policy's randomness is per episode, chosen here
    t0 = time.monotonic()
    with rt.sandboxes.create(snapshot=snapshot_id, **SHAPE,
                             labels={"example": "rollouts", "episode": str(index)}) as sbx:
        first = sbx.exec(["curl", "-sf", f"http://127.0.0.1:{PORT}/state"])  # argv: no shell to start
        reset_ms = 1000 * (time.monotonic() - t0)
        if first.exit_code != 0 or json.loads(first.stdout) != {"guesses": 0, "solved": False}:
            raise RuntimeError(f"episode {index}: server not in its initial state: "
                               f"exit {first.exit_code} {first.stdout!r} {first.stderr!r}")
        lo, hi = LOW, HIGH
        observations = []
        for _ in range(max_steps):
            guess = policy(rng, lo, hi)
            r = sbx.exec(["curl", "-sf", f"http://127.0.0.1:{PORT}/guess?n={guess}"])
            if r.exit_code != 0:
                raise RuntimeError(f"episode {index}: step failed: exit {r.exit_code} {r.stderr!r}")
            observations.append(r.stdout)
            result = json.loads(r.stdout)["result"]
            if result == "correct":
                break
            lo, hi = (guess + 1, hi) if result == "higher" else (lo, guess - 1)
    return {"episode": index, "sandbox": sbx.id, "steps": len(observations),
            "reward": reward_from(observations), "reset_ms": round(reset_ms, 1)}


def percentile(values, p):
    """Nearest-rank percentile."""
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=50, help="episodes to run (default 50)")
    ap.add_argument("--parallel", type=int, default=8, help="episodes at once (default 8)")
    ap.add_argument("--max-steps", type=int, default=7, help="guesses per episode (default 7)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the game's secret (default 1)")
    ap.add_argument("--pool", type=int, default=None,
                    help="ready copies kiln keeps restored (default: --parallel; 0 = none)")
    args = ap.parse_args()
    if args.episodes < 1 or args.parallel < 1 or args.max_steps < 1:
        ap.error("--episodes, --parallel and --max-steps must be at least 1")
    if args.pool is None:
        args.pool = args.parallel

    rt = Runtime()
    snapshot_id = None
    failures = []
    results = []
    t_start = time.monotonic()
    try:
        snapshot_id = build_environment(rt, args.seed)
        if args.pool:
            # Copies restored ahead: a reset is a hand-out while the pool keeps up.
            rt.snapshots.pool(snapshot_id, args.pool)
        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            futures = [pool.submit(episode, rt, snapshot_id, i, args.max_steps) for i in range(args.episodes)]
            for f in futures:
                try:
                    res = f.result()
                    results.append(res)
                    print(f"episode {res['episode']:3d}: reward {res['reward']:.2f} in {res['steps']} steps "
                          f"(reset {res['reset_ms']:.0f} ms, {res['sandbox']})", flush=True)
                except Exception as e:  # noqa: BLE001 -- reported, and the exit status says so
                    failures.append(str(e))
                    print(f"episode failed: {e}", file=sys.stderr, flush=True)
    finally:
        if snapshot_id:
            try:
                rt.snapshots.delete(snapshot_id)
            except Exception as e:  # noqa: BLE001
                print(f"could not delete snapshot {snapshot_id}: {e}", file=sys.stderr)
        rt.close()

    rewards = [r["reward"] for r in results]
    resets = [r["reset_ms"] for r in results]
    summary = {
        "example": "rollouts",
        "episodes": args.episodes,
        "completed": len(results),
        "failed": len(failures),
        "parallel": args.parallel,
        "snapshot": snapshot_id,
        "rewards": rewards,
        "mean_reward": round(statistics.mean(rewards), 3) if rewards else None,
        "solved": sum(1 for x in rewards if x > 0),
        "reset_ms_median": round(statistics.median(resets), 1) if resets else None,
        "reset_ms_p90": round(percentile(resets, 90), 1) if resets else None,
        "wall_s": round(time.monotonic() - t_start, 1),
    }
    if resets:
        print(f"rewards: {rewards}")
        print(f"mean reward {summary['mean_reward']}, solved {summary['solved']}/{len(rewards)}; "
              f"reset (create from snapshot -> first result): median {summary['reset_ms_median']} ms, "
              f"p90 {summary['reset_ms_p90']} ms")
    print(json.dumps(summary), flush=True)
    return 0 if not failures and len(results) == args.episodes else 1


if __name__ == "__main__":
    sys.exit(main())
