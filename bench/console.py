#!/usr/bin/python3
"""The web console's cost: one JSON line per figure on stdout.

  console_first_load   /ui/ in Debian's chromium (Playwright) over loopback, from
                       navigation to the "API key" field, a fresh browser page
                       each run; and the bytes it transfers (gzip, as browsers
                       ask), beside the same files uncompressed
  console_polling      the sandboxes view left open on N running sandboxes for
                       10 s: requests per second and bytes per poll, and none
                       while the tab is hidden

The browser scenario is tests/integration/console_driver.py's `measure`, run by
Playwright's venv (/opt/kiln/console-venv; `make playwright-env`). Skipped with
a JSON line saying why when that venv or the console build is missing.

Usage: /usr/bin/python3 bench/console.py [--kilnd PATH] [--image-dir DIR]
                                         [--runs N] [--sandboxes N]
"""
import argparse
import json
import os
import statistics
import subprocess

from common import REPO, KilndSession, emit, log

VENV_PY = "/opt/kiln/console-venv/bin/python"
DRIVER = os.path.join(REPO, "tests", "integration", "console_driver.py")
CONSOLE_DIR = os.path.join(REPO, "build", "console")


def measure(url, key):
    r = subprocess.run([VENV_PY, DRIVER, "measure", json.dumps({"url": url, "key": key})],
                       capture_output=True, text=True, timeout=300)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"console_driver gave no answer: {r.stderr[-2000:]}")
    out = json.loads(lines[-1])
    if not out.get("ok"):
        raise RuntimeError(f"console_driver measure failed: {out.get('error')}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kilnd", default="build/bin/kilnd")
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sandboxes", type=int, default=20)
    args = ap.parse_args()
    for what, path in (("Playwright's venv", VENV_PY), ("the console build", CONSOLE_DIR)):
        if not os.path.exists(path):
            emit({"bench": "console", "skipped": f"{what} is missing: {path} (make setup playwright-env)"})
            return 0
    plain = sum(os.path.getsize(os.path.join(CONSOLE_DIR, f)) for f in ("index.html", "app.js", "app.css"))
    with KilndSession(args.kilnd, args.image_dir, "kiln-bench-console-",
                      kilnd_args=["--console-dir", CONSOLE_DIR]) as s:
        kilnd = s.kilnd
        api = kilnd.api()
        for _ in range(args.sandboxes):
            kilnd.create(api, {"labels": {"bench": "console"}})
        runs = [measure(kilnd.url, kilnd.key) for _ in range(args.runs)]
        loads = [r["firstLoadMs"] for r in runs]
        dcl = [r["navigation"]["domContentLoaded"] for r in runs]
        transfer = [r["navigation"]["transfer"] for r in runs]
        log(f"console: first load p50 {statistics.median(loads):.0f} ms, "
            f"{statistics.median(transfer)} bytes transferred ({plain} uncompressed)")
        emit({"bench": "console_first_load", "runs": len(runs),
              "firstLoadMsP50": round(statistics.median(loads), 1),
              "firstLoadMsMin": round(min(loads), 1), "firstLoadMsMax": round(max(loads), 1),
              "domContentLoadedMsP50": round(statistics.median(dcl), 1),
              "transferBytes": int(statistics.median(transfer)), "uncompressedBytes": plain,
              "note": "navigation to the API key field in Debian's chromium, loopback"})
        polls = [r["pollRequests10s"] for r in runs]
        per_poll = [b for r in runs for b in r["pollBytes"]]
        emit({"bench": "console_polling", "sandboxes": args.sandboxes,
              "requestsPerSecond": round(statistics.median(polls) / 10, 2),
              "bytesPerPollP50": int(statistics.median(per_poll)) if per_poll else None,
              "bytesPerSandboxRow": (round(statistics.median(per_poll) / args.sandboxes)
                                     if per_poll else None),
              "hiddenTabRequests": max(r["hiddenRequests7s"] for r in runs)})
    return s.rc


if __name__ == "__main__":
    raise SystemExit(main())
