#!/usr/bin/python3
"""kiln example for PandaStack's own client: best-of-N over forks.

What it shows (with `pip install pandastack`, pointed at kiln):
  1. Prepare one sandbox mid-task: a stub `/workspace/solution.py` and a
     runner that prints the solution's answers for some inputs. The expected
     answers stay here, outside the sandbox.
  2. Fork it N ways in one call (`sandbox.fork_tree(count=N)`): each copy
     has the prepared files (and memory) of the source.
  3. Try a different candidate solution in each copy (`filesystem.write`,
     then `exec`), score each copy's output here, keep the best copy and
     kill the others. One candidate is wrong, one is slow past its timeout
     (PandaStack's SandboxTimeout), so the scoring copes with both.

Run against kilnd's PandaStack front:

    PANDASTACK_API=http://127.0.0.1:7070/pandastack PANDASTACK_API_KEY=<kiln key> \\
        python examples/pandastack/best_of_n.py [--keep]

Prints one line per copy and a final JSON summary. Exits non-zero unless
the correct candidate won.
"""
import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor

from pandastack import Sandbox, SandboxTimeout

RUNNER = """import json, sys
from solution import median
cases = json.loads(sys.argv[1])
print(json.dumps([median(c) for c in cases]))
"""
CASES = [[3, 1, 2], [4, 1, 3, 2], [7], [5, 5, 1, 9, 2, 8]]
EXPECTED = [2, 2.5, 7, 5.0]  # never written into a sandbox

CANDIDATES = {
    "correct": "def median(xs):\n    s = sorted(xs)\n    n = len(s)\n"
               "    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2\n",
    "unsorted": "def median(xs):\n    return xs[len(xs) // 2]\n",
    "lower": "def median(xs):\n    return sorted(xs)[(len(xs) - 1) // 2]\n",
    "slow": "import time\n\ndef median(xs):\n    time.sleep(30)\n    return 0\n",
}


def prepare():
    sbx = Sandbox.create(template="base", ttl_seconds=600, metadata={"example": "best_of_n"})
    sbx.filesystem.write("/workspace/solution.py", "def median(xs):\n    raise NotImplementedError\n")
    sbx.filesystem.write("/workspace/run.py", RUNNER)
    return sbx


def attempt(copy, name):
    """Writes the candidate into its copy, runs it; returns (score, note)."""
    copy.filesystem.write("/workspace/solution.py", CANDIDATES[name])
    cmd = f"cd /workspace && python3 run.py '{json.dumps(CASES)}'"
    try:
        result = copy.exec(cmd, timeout_seconds=5)
    except SandboxTimeout:
        return 0.0, "timed out"
    if result.exit_code != 0:
        return 0.0, f"exit {result.exit_code}: {result.stderr.strip()[-80:]}"
    answers = json.loads(result.stdout)
    passed = sum(1 for a, e in zip(answers, EXPECTED) if a == e)
    return passed / len(EXPECTED), f"{passed}/{len(EXPECTED)} cases"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", action="store_true", help="leave the winning copy running")
    args = ap.parse_args()

    source = prepare()
    copies = []
    try:
        copies = source.fork_tree(count=len(CANDIDATES))
        names = list(CANDIDATES)
        with ThreadPoolExecutor(len(copies)) as pool:
            outcomes = list(pool.map(attempt, copies, names))
        for copy, name, (score, note) in zip(copies, names, outcomes):
            print(f"{copy.id} {name:9s} score {score:.2f} ({note})")
        best = max(range(len(copies)), key=lambda i: outcomes[i][0])
        winner, winner_name = copies[best], names[best]
        for i, copy in enumerate(copies):
            if i != best or not args.keep:
                copy.kill()
        summary = {"example": "best_of_n", "copies": len(copies), "winner": winner_name,
                   "winner_id": winner.id, "kept": args.keep,
                   "scores": {n: o[0] for n, o in zip(names, outcomes)}}
        print(json.dumps(summary))
        return 0 if winner_name == "correct" else 1
    except BaseException:
        for copy in copies:
            copy.kill()
        raise
    finally:
        source.kill()


if __name__ == "__main__":
    sys.exit(main())
