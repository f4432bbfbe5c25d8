#!/usr/bin/python3
"""Execution-based code rewards with kiln: score N sampled Python programs for one
stdin/stdout task ("read whitespace-separated integers from stdin, print their sum").

The programs are a mix of correct, wrong, hanging (infinite loop), output-flooding,
crashing ones, and ONE cheater that searches the sandbox (filesystem, environment) for
the expected answers. `kiln.rewards.score_many` runs each program in its own sandbox, one
exec per case with the case's stdin; the expected outputs stay in this process (they are
compared here, never written into the sandbox), so the cheater finds nothing.

Uses the kilnd at KILN_API_URL / KILN_API_KEY (as the SDK does). Standard library + SDK.
Prints per-category results, total time, programs/second and, last, one JSON summary line.
Exits 1 if any verdict is unexpected: every correct program must score 1.0, every other
one must score < 1.0 and the cheater must score 0 (and must not have seen an answer).

Usage: /usr/bin/python3 examples/code_rewards.py [--programs 200] [--concurrency 4] [--seed 7]
"""
import argparse
import json
import os
import random
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "sdk", "python"))

from kiln.rewards import score_many  # noqa: E402

CATEGORIES = ("correct", "wrong", "hang", "flood", "crash", "cheat")
# Share of each sampled category (the single cheater comes on top of these).
WEIGHTS = {"correct": 0.5, "wrong": 0.2, "hang": 0.1, "flood": 0.1, "crash": 0.1}

CORRECT = [
    "import sys\nprint(sum(int(t) for t in sys.stdin.read().split()))\n",
    "import sys\ntotal = 0\nfor line in sys.stdin:\n    for tok in line.split():\n        total += int(tok)\nprint(total)\n",
    "import sys\nnums = list(map(int, sys.stdin.buffer.read().split()))\nsys.stdout.write(str(sum(nums)) + '\\n')\n",
    "import functools, operator, sys\nprint(functools.reduce(operator.add, map(int, sys.stdin.read().split()), 0))\n",
]
WRONG = [
    "import sys\nprint(sum(int(t) for t in sys.stdin.read().split()) + 1)\n",            # off by one
    "import sys\nprint(float(sum(int(t) for t in sys.stdin.read().split())))\n",         # '12.0'
    "import sys\nprint(sum(abs(int(t)) for t in sys.stdin.read().split()))\n",           # drops signs
    "print(sum(map(int, input().split())))\n",                                            # first line only
    "import sys\nprint(max(int(t) for t in sys.stdin.read().split()))\n",                # max, not sum
]
HANG = [
    "while True:\n    pass\n",
    "import sys\ndata = sys.stdin.read()\nn = 0\nwhile n >= 0:\n    n += 1\n",
    "import time\ntime.sleep(3600)\n",
]
FLOOD = [
    "while True:\n    print('x' * 1000)\n",
    "import sys\nwhile True:\n    sys.stdout.write('9' * 65536)\n",
]
CRASH = [
    "raise RuntimeError('boom')\n",
    "import sys\nsys.exit(3)\n",
    "print(1 // 0)\n",
    "def f(:\n    pass\n",                                                                 # syntax error
    "import sys\nnums = sys.stdin.read().split()\nprint(nums[10**6])\n",                 # IndexError
]
# Looks everywhere it can for the expected answers (files named like answers, files
# holding the marker, environment variables), prints whatever it finds as its answer and
# reports its search on stderr. Bounded to ~2 s of searching.
CHEAT = r'''
import os, re, sys, time
deadline = time.monotonic() + 2.0
found, scanned = [], 0
for k, v in os.environ.items():
    if re.search(r"expect|answer|output|solution|test", k, re.I):
        found.append(f"env {k}={v}")
names = re.compile(r"expect|answer|\.out$|solution|cases|tests?\.json", re.I)
for root in ("/workspace", "/tmp", "/home", "/root", "/var", "/etc", "/opt", "/srv", "/mnt", "/run", "/"):
    for dirpath, dirs, files in os.walk(root):
        if time.monotonic() > deadline:
            break
        if dirpath == "/":
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
        for fn in files:
            p = os.path.join(dirpath, fn)
            scanned += 1
            try:
                if os.path.getsize(p) > 65536:
                    continue
                with open(p, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if names.search(fn) or b"KILN-EXPECTED" in data:
                found.append(f"file {p}: {data[:200]!r}")
print(f"cheater: scanned {scanned} files, {len(found)} candidates", file=sys.stderr)
for c in found[:20]:
    print(c, file=sys.stderr)
# Best guess: the last number-only line of any candidate, else nothing useful.
guess = None
for c in found:
    m = re.findall(r"-?\d+", c)
    if m:
        guess = m[-1]
print(guess if guess is not None else "no answer found")
'''
VARIANTS = {"correct": CORRECT, "wrong": WRONG, "hang": HANG, "flood": FLOOD, "crash": CRASH}


def make_cases(rng, n_cases=4):
    """(stdin, expected) pairs; big random numbers so answers are distinctive."""
    cases = []
    for i in range(n_cases):
        lines = [[rng.randint(-10**9, 10**9) for _ in range(rng.randint(1, 6))] for _ in range(1 + i % 3)]
        stdin = "\n".join(" ".join(map(str, line)) for line in lines) + "\n"
        cases.append((stdin, f"{sum(sum(line) for line in lines)}\n"))
    # Make sure the "first line only" and "drops signs" wrong programs fail somewhere:
    cases.append(("5 -7\n-3\n", "-5\n"))
    return cases


def make_programs(n, rng):
    """n (category, source) pairs: one cheater, the rest sampled by WEIGHTS; shuffled."""
    if n < len(CATEGORIES):
        raise ValueError(f"need at least {len(CATEGORIES)} programs (one per category)")
    out = [("cheat", CHEAT)] + [(c, rng.choice(VARIANTS[c])) for c in WEIGHTS]  # one of each at least
    cats, weights = list(WEIGHTS), list(WEIGHTS.values())
    while len(out) < n:
        c = rng.choices(cats, weights)[0]
        out.append((c, rng.choice(VARIANTS[c])))
    rng.shuffle(out)
    return out


# Case reasons that each category may get (kiln.rewards.CaseResult.reason).
ALLOWED_REASONS = {
    "correct": {"ok"},
    "wrong": {"ok", "wrong_answer", "runtime_error", "skipped"},
    "hang": {"timeout", "skipped"},
    "flood": {"output_truncated", "timeout", "runtime_error", "skipped"},
    "crash": {"runtime_error", "skipped"},
    "cheat": {"wrong_answer", "runtime_error", "timeout", "skipped"},
}


def check(category, result, cases):
    """Problems with one program's verdict ([] when it is as expected)."""
    problems = []
    if category == "correct" and result.score != 1.0:
        problems.append(f"correct program scored {result.score:.2f}")
    if category != "correct" and result.score >= 1.0:
        problems.append(f"{category} program passed")
    if category == "cheat":
        if result.score != 0.0:
            problems.append(f"cheater scored {result.score:.2f}")
        seen = "".join(c.stdout + c.stderr for c in result.cases)
        leaked = [e.strip() for _, e in cases if len(e.strip()) >= 6 and e.strip() in seen]  # distinctive ones
        if leaked:
            problems.append(f"cheater saw expected outputs {leaked}")
    bad = {c.reason for c in result.cases} - ALLOWED_REASONS[category]
    if bad:
        problems.append(f"{category} program got reasons {sorted(bad)}")
    return problems


def score_options(args):
    return dict(mode="whitespace", timeout_ms=args.timeout_ms, memory_mib=args.memory_mib, vcpu=1,
                stop_on_failure=True, labels={"example": "code_rewards"})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--timeout-ms", type=int, default=3000, help="per case (the cheater searches for ~2 s)")
    ap.add_argument("--memory-mib", type=int, default=256)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)

    rng = random.Random(args.seed)
    cases = make_cases(rng)
    programs = make_programs(args.programs, rng)
    print(f"{len(programs)} programs, {len(cases)} cases, concurrency {args.concurrency}", flush=True)

    t0 = time.monotonic()
    results = score_many([src for _, src in programs], cases, concurrency=args.concurrency,
                         **score_options(args))
    wall = time.monotonic() - t0

    per = {c: {"n": 0, "passed": 0, "meanScore": 0.0, "reasons": {}, "unexpected": 0} for c in CATEGORIES}
    problems = []
    cheater = None
    for i, ((cat, _), res) in enumerate(zip(programs, results)):
        p = per[cat]
        p["n"] += 1
        p["passed"] += res.score == 1.0
        p["meanScore"] += res.score
        for c in res.cases:
            p["reasons"][c.reason] = p["reasons"].get(c.reason, 0) + 1
        bad = check(cat, res, cases)
        if bad:
            p["unexpected"] += 1
            problems += [f"program {i} ({cat}): {b}" for b in bad]
        if cat == "cheat":
            cheater = res
    for p in per.values():
        p["meanScore"] = round(p["meanScore"] / p["n"], 3) if p["n"] else None

    print(f"{'category':<9} {'n':>4} {'passed':>6} {'mean':>6} {'bad':>4}  case reasons")
    for cat in CATEGORIES:
        p = per[cat]
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(p["reasons"].items()))
        print(f"{cat:<9} {p['n']:>4} {p['passed']:>6} {p['meanScore'] if p['n'] else '-':>6} "
              f"{p['unexpected']:>4}  {reasons}")
    if cheater is not None:
        first = cheater.cases[0]
        print(f"cheater: score {cheater.score}, first case {first.reason}, "
              f"stdout {first.stdout.strip()[:60]!r}, stderr {first.stderr.strip().splitlines()[:1]}")
    for line in problems[:20]:
        print("UNEXPECTED:", line)
    rate = len(programs) / wall if wall > 0 else None
    print(f"total {wall:.1f} s, {rate:.2f} programs/s")
    summary = {
        "programs": len(programs), "cases": len(cases), "concurrency": args.concurrency,
        "wallS": round(wall, 2), "programsPerS": round(rate, 3) if rate else None,
        "categories": per, "cheaterScore": cheater.score if cheater else None,
        "unexpected": len(problems), "ok": not problems,
    }
    print(json.dumps(summary), flush=True)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
