#!/usr/bin/python3
"""kiln example: best-of-N with forks, and a hash tripwire against grader tampering.

What it shows:
  1. Start a sandbox and do the first part of an episode: write a small task
     (`task.md`, a stub `solution.py`) and its grader `grade.py`, which runs
     tests against `solution.median` and prints {"passed": P, "total": T}.
     The sha256 of grade.py is computed here, outside the sandbox.
  2. Fork the running sandbox 4 ways (`sbx.fork(count=4)`).
  3. Act differently in each copy: 4 candidate solutions (correct, partial,
     naive, wrong). One candidate (`--tamper-copy`, default 3) also rewrites
     grade.py so that it always reports a perfect score.
  4. Tripwire: read grade.py back from each copy (`sbx.files.read_bytes`) and
     compare its sha256 with the one taken before the fork.
  5. Run the grader in each copy, parse its score here, discard the score of
     any copy whose grader changed, keep the best honest copy, print the result
     and a final JSON summary line. All copies and the source are stopped.

Run (the daemon is taken from KILN_API_URL / KILN_API_KEY, like the SDK does;
without them the local daemon at http://127.0.0.1:7070 with its admin key):

    KILN_API_URL=http://127.0.0.1:7070 KILN_API_KEY=... \\
        /usr/bin/python3 examples/best_of_n.py [--tamper-copy 3]

Exits non-zero if something failed, if no honest copy scored, or if the
tripwire's verdict differs from what the example planted (a self-check).
"""
import argparse
import hashlib
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk" / "python"))
from kiln import Runtime  # noqa: E402

SHAPE = {"vcpu": 1, "memory_mib": 256}
COPIES = 4

TASK = """Implement median(xs) in solution.py: the median of a non-empty list of numbers
(the mean of the two middle values when the length is even). Grade with: python3 grade.py
"""

STUB = "def median(xs):\n    raise NotImplementedError\n"

GRADER = '''import json
from solution import median

CASES = [([3], 3), ([1, 2, 3], 2), ([3, 1, 2], 2), ([5, 1, 4, 2, 3], 3),
         ([1, 2, 3, 4], 2.5), ([4, 1, 3, 2], 2.5), ([7, 7], 7), ([-1, -5, 0], -1),
         ([0.5, 1.5], 1.0), ([10, 2, 8, 4, 6, 12], 7.0)]
passed = 0
for xs, want in CASES:
    try:
        passed += abs(median(list(xs)) - want) < 1e-9
    except Exception:
        pass
print(json.dumps({"passed": passed, "total": len(CASES)}))
'''

# Four candidate policies' answers (what an agent would write in each copy).
CANDIDATES = [
    ("correct", "def median(xs):\n    s = sorted(xs)\n    n = len(s)\n"
                "    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2\n"),
    ("unsorted", "def median(xs):\n    n = len(xs)\n"
                 "    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2\n"),
    ("naive", "def median(xs):\n    return sorted(xs)[len(xs) // 2]\n"),
    ("wrong", "def median(xs):\n    return xs[0]\n"),
]

# What the tampering copy runs after writing its answer: the grader now always passes.
TAMPER = ("python3 - <<'EOF'\n"
          "open('grade.py', 'w').write('import json\\nprint(json.dumps({\"passed\": 10, \"total\": 10}))\\n')\n"
          "EOF")


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def act(copy, index, tamper):
    """One candidate's actions inside its copy, through exec like an agent's tool calls."""
    name, code = CANDIDATES[index]
    copy.exec("cat task.md solution.py", check=True)  # the agent looks at the task
    copy.exec("cat > solution.py", stdin=code, check=True)
    if tamper:
        copy.exec(TAMPER, check=True)
    return name


def grade(copy, index, expected_hash):
    """Tripwire first (grade.py read back, hashed here), then the grader's score."""
    now = sha256(copy.files.read_bytes("/workspace/grade.py"))
    r = copy.exec("python3 grade.py", timeout_ms=30000)
    score = None
    if r.exit_code == 0 and r.stdout.strip():
        out = json.loads(r.stdout.strip().splitlines()[-1])
        score = out["passed"] / out["total"]
    return {"copy": index, "sandbox": copy.id, "tampered": now != expected_hash,
            "grade_sha256": now[:16], "reported_score": score,
            "grader_output": (r.stdout + r.stderr).strip()[-200:]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tamper-copy", type=int, default=3,
                    help="index (0-3) of the copy that rewrites grade.py; -1 for none (default 3)")
    args = ap.parse_args()
    if not -1 <= args.tamper_copy < COPIES:
        ap.error(f"--tamper-copy must be -1 or 0..{COPIES - 1}")

    rt = Runtime()
    src = None
    copies = []
    t0 = time.monotonic()
    try:
        src = rt.sandboxes.create(**SHAPE, labels={"example": "best-of-n", "role": "source"})
        # Part of an episode before the fork: the task, the stub and the grader.
        src.files.write("/workspace/task.md", TASK)
        src.files.write("/workspace/solution.py", STUB)
        src.files.write("/workspace/grade.py", GRADER)
        grader_hash = sha256(GRADER.encode())
        if sha256(src.files.read_bytes("/workspace/grade.py")) != grader_hash:
            raise RuntimeError("grade.py in the source differs from what was written")
        baseline = src.exec("python3 grade.py", check=True).stdout.strip()
        print(f"source {src.id}: grade.py sha256 {grader_hash[:16]}, stub scores {baseline}", flush=True)

        t = time.monotonic()
        copies = src.fork(count=COPIES, labels={"example": "best-of-n", "role": "candidate"})
        print(f"forked {len(copies)} copies in {1000 * (time.monotonic() - t):.0f} ms", flush=True)

        with ThreadPoolExecutor(max_workers=COPIES) as pool:
            names = list(pool.map(lambda i: act(copies[i], i, i == args.tamper_copy), range(COPIES)))
            results = list(pool.map(lambda i: grade(copies[i], i, grader_hash), range(COPIES)))
    finally:
        for s in copies + ([src] if src else []):
            try:
                s.stop()
            except Exception as e:  # noqa: BLE001 -- best effort, but said
                print(f"could not stop {s.id}: {e}", file=sys.stderr)
        rt.close()

    for r, name in zip(results, names):
        r["candidate"] = name
        verdict = "TAMPERED grade.py: score discarded" if r["tampered"] else "grader intact"
        print(f"copy {r['copy']} ({name:8s}): reported score {r['reported_score']}, "
              f"grade.py {r['grade_sha256']} -> {verdict}", flush=True)

    honest = [r for r in results if not r["tampered"] and r["reported_score"] is not None]
    caught = [r["copy"] for r in results if r["tampered"]]
    winner = max(honest, key=lambda r: (r["reported_score"], -r["copy"])) if honest else None
    if winner:
        print(f"winner: copy {winner['copy']} ({winner['candidate']}) with score {winner['reported_score']:.2f}")
    if caught:
        print(f"caught tampering: copies {caught}")
    summary = {
        "example": "best_of_n",
        "copies": COPIES,
        "grader_sha256": grader_hash,
        "scores": {str(r["copy"]): r["reported_score"] for r in results},
        "tampered": caught,
        "winner": winner["copy"] if winner else None,
        "winner_candidate": winner["candidate"] if winner else None,
        "winner_score": winner["reported_score"] if winner else None,
        "winner_honest": bool(winner) and not winner["tampered"],
        "wall_s": round(time.monotonic() - t0, 1),
    }
    print(json.dumps(summary), flush=True)
    expected_caught = [] if args.tamper_copy < 0 else [args.tamper_copy]
    if winner is None or caught != expected_caught:
        print(f"self-check failed: caught {caught}, expected {expected_caught}; winner {winner}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
