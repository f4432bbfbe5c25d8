"""The RL examples (examples/rollouts.py, examples/best_of_n.py) run as programs
against the session's kilnd, with small parameters; their JSON summaries are checked."""
import json
import os
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_example(kilnd, script, *args, timeout=300):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KILN_API_", "RUNTIME_API_"))}
    env.update(KILN_API_URL=kilnd.url, KILN_API_KEY=kilnd.admin_key, KILN_ADMIN_KEY_FILE="/nonexistent/admin.key")
    t = time.monotonic()
    p = subprocess.run(["/usr/bin/python3", str(REPO / "examples" / script), *args], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=timeout)
    elapsed = time.monotonic() - t
    assert p.returncode == 0, f"{script} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    lines = p.stdout.strip().splitlines()
    summary = json.loads(lines[-1])
    print(f"{script} {' '.join(args)}: {elapsed:.1f} s\n{p.stdout}")
    return summary, p.stdout


def _leftovers(kilnd, label_value):
    from client import Client
    api = Client(kilnd.url, key=kilnd.admin_key)
    listed = api.get("/v1/sandboxes", query={"label": f"example:{label_value}", "state": "running"}).json()
    return [s["id"] for s in listed.get("data", [])]


def test_rollouts(kilnd):
    summary, out = run_example(kilnd, "rollouts.py", "--episodes", "10", "--parallel", "4")
    assert summary["example"] == "rollouts"
    assert summary["episodes"] == summary["completed"] == 10 and summary["failed"] == 0
    assert len(summary["rewards"]) == 10
    assert all(0.0 <= r <= 1.0 for r in summary["rewards"])
    assert summary["solved"] >= 1  # a bisection policy finds 1..100 within 7 guesses most of the time
    assert 0 < summary["reset_ms_median"] <= summary["reset_ms_p90"]
    assert "reset (create from snapshot -> first result): median" in out
    assert _leftovers(kilnd, "rollouts") == []


def test_best_of_n(kilnd):
    summary, out = run_example(kilnd, "best_of_n.py")
    assert summary["example"] == "best_of_n" and summary["copies"] == 4
    assert summary["tampered"] == [3]
    assert summary["scores"]["3"] == 1.0  # the tampered grader claims a perfect score ...
    assert summary["winner"] != 3 and summary["winner_honest"] is True  # ... and is discarded
    assert summary["winner"] == 0 and summary["winner_candidate"] == "correct" and summary["winner_score"] == 1.0
    assert "caught tampering: copies [3]" in out
    assert _leftovers(kilnd, "best-of-n") == []


def test_best_of_n_tamperer_with_best_honest_rival(kilnd):
    # The correct candidate tampers too: it is still discarded, the best other one wins.
    summary, _ = run_example(kilnd, "best_of_n.py", "--tamper-copy", "0")
    assert summary["tampered"] == [0] and summary["winner"] != 0 and summary["winner_honest"] is True
    assert summary["winner_score"] == max(v for k, v in summary["scores"].items() if k != "0")
