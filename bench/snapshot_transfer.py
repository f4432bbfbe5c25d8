#!/usr/bin/env python3
"""Export and import time of a snapshot holding ~100 MiB of process memory.

Usage: bench/snapshot_transfer.py URL KEY [--mib 100] [--runs 3]

Against one kilnd: a sandbox whose python process holds MIB of random bytes is
snapshotted; then, RUNS times: GET /v1/snapshots/{id}/archive to a local file
(wall time, MB/s), delete the snapshot, POST /v1/snapshots:import of the file
(wall time, MB/s, every checksum checked before the answer), and a restore that
still finds the process's bytes. Prints one JSON line per run and the medians.
"""
import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
import urllib.parse

HOLD = """
import hashlib, os, time
data = os.urandom({mib} << 20)
open('/tmp/digest', 'w').write(hashlib.sha256(data).hexdigest())
while True:
    time.sleep(1)
"""
# The digest file, and the process that holds the bytes still running.
CHECK = "cat /tmp/digest && ps -eo args | grep -q '[o]s.urandom'"


class Api:
    def __init__(self, url, key):
        u = urllib.parse.urlsplit(url)
        self.host, self.port, self.key = u.hostname, u.port, key

    def call(self, method, path, body=None, headers=None, out=None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=600)
        hdrs = {"Authorization": f"Bearer {self.key}"}
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        conn.request(method, path, body=body, headers=hdrs)
        r = conn.getresponse()
        if out is not None and r.status == 200:
            n = 0
            while True:
                chunk = r.read(1 << 20)
                if not chunk:
                    break
                out.write(chunk)
                n += len(chunk)
            conn.close()
            return r.status, n
        data = r.read()
        conn.close()
        if r.status >= 300:
            raise SystemExit(f"{method} {path} -> {r.status} {data[:500]!r}")
        return r.status, json.loads(data) if data else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("key")
    p.add_argument("--mib", type=int, default=100)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    api = Api(a.url, a.key)
    _, sbx = api.call("POST", "/v1/sandboxes", {"vcpu": 1, "memoryMiB": a.mib + 512})
    sid = sbx["id"]
    try:
        api.call("POST", f"/v1/sandboxes/{sid}/processes",
                 {"argv": ["python3", "-c", HOLD.format(mib=a.mib)]})
        for _ in range(300):
            _, r = api.call("POST", f"/v1/sandboxes/{sid}:exec", {"argv": ["cat", "/tmp/digest"]})
            if r["exitCode"] == 0:
                digest = r["stdout"].strip()
                break
            time.sleep(0.2)
        _, snap = api.call("POST", f"/v1/sandboxes/{sid}:snapshot", {})
    finally:
        api.call("DELETE", f"/v1/sandboxes/{sid}")
    sid_snap = snap["id"]
    rows = []
    for run in range(a.runs):
        time.sleep(1)  # the background hasher finishes first
        with tempfile.NamedTemporaryFile(suffix=".tar") as f:
            t0 = time.monotonic()
            _, size = api.call("GET", f"/v1/snapshots/{sid_snap}/archive", out=f)
            f.flush()
            export_s = time.monotonic() - t0
            api.call("POST", f"/v1/snapshots/{sid_snap}:delete", {})
            f.seek(0)
            t0 = time.monotonic()
            status, got = api.call("POST", "/v1/snapshots:import", body=f,
                                   headers={"Content-Type": "application/x-tar", "Content-Length": str(size)})
            import_s = time.monotonic() - t0
        assert status == 201 and got["id"] == sid_snap, (status, got)
        _, copy = api.call("POST", "/v1/sandboxes", {"snapshot": sid_snap})
        try:
            _, r = api.call("POST", f"/v1/sandboxes/{copy['id']}:exec", {"argv": ["sh", "-c", CHECK]})
            assert r["exitCode"] == 0 and r["stdout"].strip() == digest, r
        finally:
            api.call("DELETE", f"/v1/sandboxes/{copy['id']}")
        row = {"run": run, "bytes": size, "export_s": round(export_s, 3),
               "export_MBps": round(size / 1e6 / export_s, 1), "import_s": round(import_s, 3),
               "import_MBps": round(size / 1e6 / import_s, 1)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    api.call("POST", f"/v1/snapshots/{sid_snap}:delete", {})
    med = {k: statistics.median(r[k] for r in rows) for k in ("export_s", "export_MBps", "import_s", "import_MBps")}
    print(json.dumps({"median": med, "bytes": rows[0]["bytes"], "runs": len(rows)}))


if __name__ == "__main__":
    sys.exit(main())
