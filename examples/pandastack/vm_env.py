#!/usr/bin/python3
"""kiln example for PandaStack's own client: a gym-shaped environment whose
every episode starts from a snapshot of a prepared sandbox.

What it shows (with `pip install pandastack`, pointed at kiln):
  1. Prepare one sandbox: a tiny "thermostat" program in /workspace whose
     state (a temperature) lives in a file; snapshot it (`sandbox.snapshot()`).
  2. `VmEnv.reset()` starts a fresh sandbox from that snapshot
     (`Sandbox.create(from_snapshot=...)`), so every episode begins from the
     same prepared state; `step(action)` runs the action as a shell command
     (`sandbox.exec`); the reward is computed here, outside the sandbox, from
     what the command printed (the target never enters the sandbox);
     `close()` kills the episode's sandbox.
  3. A scripted policy plays a few episodes; rewards, steps and reset
     latency are printed, then one JSON summary line.

Run against kilnd's PandaStack front:

    PANDASTACK_API=http://127.0.0.1:7070/pandastack PANDASTACK_API_KEY=<kiln key> \\
        python examples/pandastack/vm_env.py [--episodes 3]

Exits non-zero if an episode did not reach its target.
"""
import argparse
import json
import sys
import time

from pandastack import Sandbox, get_default_client

THERMOSTAT = """#!/bin/sh
# usage: thermostat.sh up|down|read -- moves the temperature one degree.
t=$(cat /workspace/temp)
case "$1" in
  up) t=$((t + 1)) ;;
  down) t=$((t - 1)) ;;
esac
echo "$t" > /workspace/temp
echo "$t"
"""


class VmEnv:
    """reset() -> observation; step(action) -> (observation, reward, done, info);
    close(). Observations are the temperature (an int); actions are "up",
    "down" or "read"."""

    ACTIONS = ("up", "down", "read")

    def __init__(self, snapshot_id, target, max_steps=20):
        self.snapshot_id, self.target, self.max_steps = snapshot_id, target, max_steps
        self.sandbox, self.steps, self.reset_seconds = None, 0, 0.0

    def reset(self):
        self.close()
        t0 = time.monotonic()
        self.sandbox = Sandbox.create(template="base", from_snapshot=self.snapshot_id,
                                      ttl_seconds=300)
        self.reset_seconds = time.monotonic() - t0
        self.steps = 0
        return self._run("read")

    def step(self, action):
        if action not in self.ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        self.steps += 1
        temp = self._run(action)
        # The reward is the environment's business, computed outside.
        reward = 1.0 if temp == self.target else -abs(temp - self.target) / 10
        done = temp == self.target or self.steps >= self.max_steps
        return temp, reward, done, {"steps": self.steps}

    def close(self):
        if self.sandbox is not None:
            self.sandbox.kill()
            self.sandbox = None

    def _run(self, action):
        result = self.sandbox.exec(f"/workspace/thermostat.sh {action}", timeout_seconds=10,
                                   check=True)
        return int(result.stdout.strip())


def prepare(start_temp):
    """A sandbox with the thermostat installed, snapshotted; returns the id."""
    with Sandbox.create(template="base", ttl_seconds=300) as prep:
        prep.filesystem.write("/workspace/thermostat.sh", THERMOSTAT)
        prep.filesystem.write("/workspace/temp", f"{start_temp}\n")
        prep.exec("chmod +x /workspace/thermostat.sh", check=True)
        return prep.snapshot()


def policy(temp, target):
    return "up" if temp < target else "down" if temp > target else "read"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--start", type=int, default=18, help="the prepared temperature")
    ap.add_argument("--target", type=int, default=21)
    args = ap.parse_args()

    snapshot_id = prepare(args.start)
    env = VmEnv(snapshot_id, args.target)
    results = []
    try:
        for episode in range(args.episodes):
            obs, total, done = env.reset(), 0.0, False
            assert obs == args.start, f"episode {episode} began at {obs}, not the snapshot's state"
            while not done:
                obs, reward, done, info = env.step(policy(obs, args.target))
                total += reward
            results.append({"episode": episode, "final": obs, "steps": info["steps"],
                            "return": round(total, 3), "reset_s": round(env.reset_seconds, 3)})
            print(f"episode {episode}: reached {obs} in {info['steps']} steps, "
                  f"return {total:.2f}, reset {env.reset_seconds * 1000:.0f} ms")
    finally:
        env.close()
        get_default_client().snapshots.delete(snapshot_id)
    ok = all(r["final"] == args.target for r in results)
    print(json.dumps({"example": "vm_env", "snapshot": snapshot_id, "episodes": results,
                      "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
