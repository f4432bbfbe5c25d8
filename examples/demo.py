#!/usr/bin/python3
"""kiln demo: several sandboxes in parallel, each running a few commands.

Uses the kilnd at KILN_API_URL (default http://127.0.0.1:7070); starts one
(state in /var/lib/kiln) if none answers, and stops it again at the end.
Standard library only.
"""
import argparse
import http.client
import json
import os
import subprocess
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

COMMANDS = [
    ("whoami && pwd", "who runs commands, and where"),
    ("python3 -c 'print(sum(i * i for i in range(10**6)))'", "a CPU-bound Python one-liner"),
    ("echo hello > notes.txt && sha256sum notes.txt | cut -c1-16", "write a file, hash it"),
    ("python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), 2)' 2>&1 | tail -1", "no network by default"),
    ("nproc && free -m | awk '/Mem/ {print $2 \" MiB\"}'", "vcpu and memory"),
]


class Api:
    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 80

    def call(self, method, path, body=None, timeout=120):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data, headers={"Content-Type": "application/json",
                                                           "Authorization": f"Bearer {api_key()}"})
            r = conn.getresponse()
            answer = json.loads(r.read() or b"{}")
            if r.status >= 300:
                raise RuntimeError(f"{method} {path}: {answer.get('error', answer)}")
            return answer
        finally:
            conn.close()

    def healthy(self):
        try:
            return self.call("GET", "/v1/health", timeout=2).get("ok") is True
        except OSError:
            return False


def api_key():
    """KILN_API_KEY, else the local daemon's admin key (root only)."""
    key = os.environ.get("KILN_API_KEY")
    if key:
        return key
    try:
        with open(os.environ.get("KILN_ADMIN_KEY_FILE", "/var/lib/kiln/admin.key")) as f:
            return f.read().strip()
    except OSError:
        return ""


def start_kilnd(bin_dir, url):
    port = urllib.parse.urlsplit(url).port or 7070
    log = open("/tmp/kiln-demo-kilnd.log", "ab")
    proc = subprocess.Popen([os.path.join(bin_dir, "kilnd"), "--listen", f"127.0.0.1:{port}"],
                            stdout=log, stderr=log)
    api = Api(url)
    for _ in range(600):  # the first start may build the base image
        if api.healthy():
            return proc
        if proc.poll() is not None:
            sys.exit(f"kilnd exited with {proc.returncode}; see /tmp/kiln-demo-kilnd.log")
        time.sleep(0.2)
    proc.kill()
    sys.exit("kilnd did not answer; see /tmp/kiln-demo-kilnd.log")


def episode(api, n):
    """One sandbox: create, run every command, stop. Returns table rows."""
    t0 = time.monotonic()
    sbx = api.call("POST", "/v1/sandboxes", {"vcpu": 1, "memoryMiB": 512, "labels": {"demo": str(n)}})
    created_ms = (time.monotonic() - t0) * 1000
    rows = [(n, sbx["id"][:8], "(create)", "", f"{created_ms:.0f}")]
    try:
        for cmd, _ in COMMANDS:
            t = time.monotonic()
            r = api.call("POST", f"/v1/sandboxes/{sbx['id']}:exec", {"command": cmd, "timeoutMs": 20000})
            out = (r["stdout"] or r["stderr"]).strip().replace("\n", " ")
            rows.append((n, sbx["id"][:8], cmd[:44], f"{r['exitCode']} {out[:34]}", f"{(time.monotonic() - t) * 1000:.0f}"))
    finally:
        t = time.monotonic()
        api.call("POST", f"/v1/sandboxes/{sbx['id']}:stop", {})
        rows.append((n, sbx["id"][:8], "(stop)", "", f"{(time.monotonic() - t) * 1000:.0f}"))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin-dir", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin"))
    ap.add_argument("--sandboxes", type=int, default=4)
    args = ap.parse_args()
    url = os.environ.get("KILN_API_URL", "http://127.0.0.1:7070")
    api = Api(url)
    daemon = None if api.healthy() else start_kilnd(args.bin_dir, url)
    try:
        t0 = time.monotonic()
        with ThreadPoolExecutor(args.sandboxes) as pool:
            results = list(pool.map(lambda n: episode(api, n), range(1, args.sandboxes + 1)))
        wall = time.monotonic() - t0
        print(f"{'#':<2} {'sandbox':<9} {'command':<45} {'exit / output':<37} {'ms':>6}")
        for rows in results:
            for n, sid, cmd, out, ms in rows:
                print(f"{n:<2} {sid:<9} {cmd:<45} {out:<37} {ms:>6}")
        print(f"\n{args.sandboxes} sandboxes, {len(COMMANDS)} commands each, in parallel: {wall:.2f} s wall")
    finally:
        if daemon:
            daemon.terminate()
            daemon.wait(timeout=60)


if __name__ == "__main__":
    main()
