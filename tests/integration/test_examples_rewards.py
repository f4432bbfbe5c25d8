"""examples/code_rewards.py run as a user would, against the session's kilnd."""
import json
import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "code_rewards.py"
PROGRAMS = 24


def test_code_rewards_example(kilnd, api):
    env = dict(os.environ, KILN_API_URL=kilnd.url, KILN_API_KEY=kilnd.admin_key)
    for k in ("RUNTIME_API_URL", "RUNTIME_API_KEY"):
        env.pop(k, None)
    p = subprocess.run([sys.executable, str(EXAMPLE), "--programs", str(PROGRAMS), "--concurrency", "4"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["ok"] is True and summary["unexpected"] == 0
    assert summary["programs"] == PROGRAMS
    assert summary["programsPerS"] > 0
    cats = summary["categories"]
    assert sum(c["n"] for c in cats.values()) == PROGRAMS
    assert cats["cheat"]["n"] == 1 and summary["cheaterScore"] == 0.0
    for name in ("correct", "wrong", "hang", "flood", "crash"):
        assert cats[name]["n"] >= 1, name
    assert cats["correct"]["passed"] == cats["correct"]["n"] and cats["correct"]["meanScore"] == 1.0
    for name in ("wrong", "hang", "flood", "crash", "cheat"):
        assert cats[name]["passed"] == 0, name
    assert cats["hang"]["reasons"].get("timeout", 0) == cats["hang"]["n"]
    assert cats["crash"]["reasons"].get("runtime_error", 0) == cats["crash"]["n"]
    assert "output_truncated" in cats["flood"]["reasons"] or "timeout" in cats["flood"]["reasons"]
    # Every sandbox the example made is stopped.
    mine = api.get("/v1/sandboxes", query={"includeStopped": True, "limit": 500,
                                           "label": "example:code_rewards"}).json()["data"]
    assert len(mine) == PROGRAMS
    assert all(s["state"] == "stopped" for s in mine), [s["state"] for s in mine]
