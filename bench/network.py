#!/usr/bin/python3
"""Egress proxy benchmarks: one JSON line per figure on stdout, each beside
the same work done from the host (the peer) in the same run.

  * latency: one HTTPS request on a new connection (TCP connect, TLS
    handshake, GET, answer) from inside a sandbox through its proxy, against
    the same request from the host straight to the test host;
  * throughput: a 100 MB download with curl, over HTTPS and plain HTTP,
    through the proxy and from the host.

The only outside hosts are the integration tests' own (tests/integration/
nethosts.py: servers in a network namespace on 198.51.100.0/24), and kilnd
resolves their names from a test resolver file. Needs root.

Usage: /usr/bin/python3 bench/network.py [--kilnd PATH] [--quick]
"""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile

from common import REPO, KilndSession, emit, log

sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from nethosts import TestHosts  # noqa: E402

DOWNLOAD_BYTES = 100_000_000
# Variables of this machine that would point curl or Python at another CA.
CA_ENV = ("CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")

# One HTTPS request per new connection, `n` times: prints the milliseconds.
LATENCY = r'''
import json, ssl, sys, time, urllib.request
url, ca, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ctx = ssl.create_default_context(cafile=ca)
out = []
for _ in range(n):
    t = time.perf_counter()
    with urllib.request.urlopen(url, context=ctx) as r:
        r.read()
    out.append((time.perf_counter() - t) * 1000)
print(json.dumps(out))
'''


class Api:
    def __init__(self, port, key):
        self.port, self.key = port, key

    def call(self, method, path, body=None, timeout=300):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Authorization": f"Bearer {self.key}"}
            if data is not None:
                headers["Content-Type"] = "application/json"
            c.request(method, path, body=data, headers=headers)
            r = c.getresponse()
            raw = r.read()
            if r.status != 200:
                raise RuntimeError(f"{method} {path} -> {r.status}: {raw[:300]!r}")
            return json.loads(raw) if raw.startswith(b"{") else raw
        finally:
            c.close()

    def put_file(self, sid, path, content):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            c.request("PUT", f"/v1/sandboxes/{sid}/files/content?path={path}", body=content,
                      headers={"Authorization": f"Bearer {self.key}"})
            r = c.getresponse()
            r.read()
            assert r.status == 200, r.status
        finally:
            c.close()

    def sh(self, sid, command, timeout_ms=600000):
        r = self.call("POST", f"/v1/sandboxes/{sid}:exec", {"command": command, "timeoutMs": timeout_ms})
        if r["exitCode"] != 0:
            raise RuntimeError(f"{command!r}: {r}")
        return r["stdout"]


def summary(values):
    v = sorted(values)
    return {"median": round(statistics.median(v), 2), "p10": round(v[len(v) // 10], 2),
            "p90": round(v[(len(v) * 9) // 10], 2), "n": len(v)}


def host_env():
    return {k: v for k, v in os.environ.items() if k not in CA_ENV and "proxy" not in k.lower()}


def curl_seconds(run, url, ca, runs):
    """Median seconds of `runs` downloads of `url` (run(cmd) -> stdout)."""
    times = []
    for _ in range(runs):
        out = run(f"curl -sS --cacert {ca} -o /dev/null -w '%{{time_total}} %{{size_download}}' '{url}'")
        t, size = out.split()
        assert int(float(size)) == DOWNLOAD_BYTES, out
        times.append(float(t))
    return statistics.median(times)


def measure(api, hosts, n, runs):
    sid = api.call("POST", "/v1/sandboxes", {"vcpu": 2, "memoryMiB": 1024,
                                             "network": {"internet": True, "allow": ["pkgs.test"]}})["id"]
    api.put_file(sid, "/tmp/ca.pem", hosts.ca_pem)
    api.put_file(sid, "/tmp/latency.py", LATENCY.encode())

    log(f"latency: {n} HTTPS requests, each on a new connection")
    inside = json.loads(api.sh(sid, f"python3 /tmp/latency.py https://pkgs.test/whoami /tmp/ca.pem {n + 3}"))[3:]
    with tempfile.TemporaryDirectory() as tmp:
        script, ca = os.path.join(tmp, "latency.py"), os.path.join(tmp, "ca.pem")
        open(script, "w").write(LATENCY)
        open(ca, "wb").write(hosts.ca_pem)
        out = subprocess.run(["/usr/bin/python3", script, f"https://{hosts.addr('pkgs.test')}/whoami", ca,
                              str(n + 3)], capture_output=True, text=True, env=host_env(), check=True)
        host = json.loads(out.stdout)[3:]
        k, h = summary(inside), summary(host)
        emit({"figure": "egress_https_request_ms", "what": "one HTTPS request on a new connection "
              "(connect, TLS, GET): sandbox through its proxy vs the host directly",
              "kiln": k, "peer": h, "addedMs": round(k["median"] - h["median"], 2),
              "ratio": round(k["median"] / h["median"], 2)})

        log(f"throughput: {DOWNLOAD_BYTES} bytes x {runs}")
        for scheme in ("https", "http"):
            path = f"/bytes/{DOWNLOAD_BYTES}"
            t_in = curl_seconds(lambda c: api.sh(sid, c), f"{scheme}://pkgs.test{path}", "/tmp/ca.pem", runs)
            t_host = curl_seconds(
                lambda c: subprocess.run(c, shell=True, capture_output=True, text=True, env=host_env(),
                                         check=True).stdout,
                f"{scheme}://{hosts.addr('pkgs.test')}{path}", ca, runs)
            mbs = lambda t: round(DOWNLOAD_BYTES / t / 1e6, 1)  # noqa: E731
            emit({"figure": f"egress_download_{scheme}_MBps", "what": f"100 MB over {scheme} with curl: "
                  "sandbox through its proxy vs the host directly",
                  "kiln": mbs(t_in), "peer": mbs(t_host), "ratio": round(t_host / t_in, 2),
                  "seconds": {"kiln": round(t_in, 2), "peer": round(t_host, 2)}})
    api.call("DELETE", f"/v1/sandboxes/{sid}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kilnd", default=os.path.join(REPO, "build", "bin", "kilnd"))
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 10 if args.quick else 50
    runs = 1 if args.quick else 3
    hosts = TestHosts().start()
    try:
        with KilndSession(args.kilnd, args.image_dir, "kiln-bench-net-",
                          kilnd_args=["--test-resolver-file", str(hosts.resolver_file)]) as session:
            measure(Api(session.kilnd.port, session.kilnd.key), hosts, n, runs)
    finally:
        hosts.close()
    return session.rc


if __name__ == "__main__":
    sys.exit(main())
