#!/usr/bin/python3
"""make soak: bounded load against one kilnd for SOAK_MINUTES (default 30).

Eight workers loop over the life of an episode: create (from the image, or
handed out by a snapshot's warm pool), exec, write and read a file, egress to
the tests' own hosts (tests/integration/nethosts.py; nothing leaves the
machine), snapshot, fork, stop; one iteration in four also runs a hostile
command (fork bomb, memory bomb, output flood, disk fill, kill -9 -1, an
infinite loop) whose answer must be one a hostile command may get. Each
worker also keeps one long-lived persistent sandbox holding a file.

kilnd is restarted twice, with SIGTERM at one third and `kill -9` at two
thirds; before each the workers are quiesced, after it every long-lived
sandbox must answer with its file intact (paused by the graceful stop and
woken by the next call, or re-adopted after kill -9).

Resources are sampled when the workers are quiesced (same live sandboxes:
the long-lived ones and the pool): kilnd's RSS, open fds and threads, and
the host's kiln cgroups, mounts, network namespaces and sandbox
directories. The run fails on any unexpected error, on RSS growth over 10 %
between the warm-up sample and the last sample of the same kilnd process,
or on any growth of the other counts. One JSON line per sample and a
summary line.

Usage: /usr/bin/python3 bench/soak.py --kilnd build/bin/kilnd [--minutes 30]"""
import argparse
import glob
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "integration"))
from common import Api, ApiError, KilndSession, emit, log, spawn  # noqa: E402
from nethosts import TestHosts  # noqa: E402

WORKERS = 8
HOSTILE = {
    # name: (command, what a hostile command may get back)
    "fork_bomb": ":(){ :|:& };: ; sleep 2",
    "memory_bomb": "python3 -c 'x=[]\nwhile True: x.append(bytearray(64<<20))'",
    "output_flood": "yes flood | head -c 200000000",
    "disk_fill": "dd if=/dev/zero of=/tmp/fill bs=1M count=4000 2>&1 | tail -1; rm -f /tmp/fill",
    "kill_all": "kill -9 -1",
    "busy_loop": "while :; do :; done",
}


def raw(api, method, path, data=None):
    """A request with a raw body; (status, body bytes)."""
    if api.conn is None or api.conn.sock is None:
        api.connect()
    headers = {"Authorization": f"Bearer {api.key}"}
    api.conn.request(method, path, body=data.encode() if data else None, headers=headers)
    resp = api.conn.getresponse()
    body = resp.read()
    if resp.will_close:
        api.close()
    return resp.status, body


class Soak:
    def __init__(self, session, hosts, minutes):
        self.s = session
        self.k = session.kilnd
        self.hosts = hosts
        self.end = time.monotonic() + minutes * 60
        self.minutes = minutes
        self.errors = []
        self.counts = {}
        self.lock = threading.Lock()
        self.go = threading.Event()  # cleared while quiesced
        self.go.set()
        self.idle = threading.Semaphore(0)
        self.busy = 0
        self.base_snapshot = None
        self.long_lived = {}  # worker -> sandbox id
        self.seen = set()  # every sandbox id this kilnd ran for us (or for its pool)

    # -- bookkeeping --
    def count(self, what):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def error(self, what):
        with self.lock:
            self.errors.append(what)
        log(f"ERROR {what}")

    def api(self):
        return Api(self.k.port, timeout=180, key=self.k.key)

    # -- one episode --
    def episode(self, api, rnd, worker):
        allow = rnd.random() < 0.5
        if self.base_snapshot and rnd.random() < 0.3:
            sid = api.call("POST", "/v1/sandboxes", {"snapshot": self.base_snapshot})["id"]
            self.seen.add(sid)
            allow = False  # the snapshot's rules: internet off
            self.count("pool_handout")
        else:
            body = {"vcpu": 1, "memoryMiB": 512, "timeoutSeconds": 600}
            if allow:
                body["network"] = {"internet": True, "allow": ["api.allowed.test"]}
            sid = api.call("POST", "/v1/sandboxes", body)["id"]
        self.seen.add(sid)
        self.count("create")
        try:
            r = api.call("POST", f"/v1/sandboxes/{sid}:exec", {"argv": ["echo", f"w{worker}"]})
            if r["stdout"] != f"w{worker}\n":
                self.error(f"exec answered {r!r}")
            data = os.urandom(4096).hex()
            status, _ = raw(api, "PUT", f"/v1/sandboxes/{sid}/files/content?path=/tmp/f.txt", data)
            if status != 200:
                self.error(f"file write -> {status}")
            status, got = raw(api, "GET", f"/v1/sandboxes/{sid}/files/content?path=/tmp/f.txt")
            if status != 200 or got.decode() != data:
                self.error(f"file read back -> {status}, differs: {got[:80]!r}")
            self.count("files")
            if allow:
                url = self.hosts.url("api.allowed.test", "/whoami", https=False)
                r = api.call("POST", f"/v1/sandboxes/{sid}:exec",
                             {"command": f"curl -sS --max-time 30 {url}"})
                if r["stdout"] != "198.51.100.11 api.allowed.test\n":
                    self.error(f"egress answered {r!r}")
                self.count("egress")
            if rnd.random() < 0.25:
                name = rnd.choice(sorted(HOSTILE))
                self.hostile(api, sid, name)
            if rnd.random() < 0.2:
                snap = api.call("POST", f"/v1/sandboxes/{sid}:snapshot", {})
                copy = api.call("POST", "/v1/sandboxes", {"snapshot": snap["id"]})["id"]
                self.seen.add(copy)
                api.call("POST", f"/v1/sandboxes/{copy}:stop", {}, ok=(200, 409))
                api.call("POST", f"/v1/snapshots/{snap['id']}:delete", {}, ok=(200, 404))
                self.count("snapshot")
            if rnd.random() < 0.2:
                forks = api.call("POST", f"/v1/sandboxes/{sid}:fork", {"count": 2})
                for f in forks.get("sandboxes", []):
                    self.seen.add(f["id"])
                    api.call("POST", f"/v1/sandboxes/{f['id']}:stop", {}, ok=(200, 409))
                self.count("fork")
        finally:
            api.call("POST", f"/v1/sandboxes/{sid}:stop", {}, ok=(200, 409))
            self.count("stop")

    def hostile(self, api, sid, name):
        resp = api.send("POST", f"/v1/sandboxes/{sid}:exec",
                        {"command": HOSTILE[name], "timeoutMs": 5000})
        raw = resp.read()
        if resp.will_close:
            api.close()
        # A hostile command may finish, time out (answered by the agent, or by
        # kilnd when the agent itself could not answer in time under a fork
        # bomb: 504 agent_timeout), be killed, or take its own sandbox down
        # (409 not_running); nothing else. Then the sandbox must answer again
        # or be stopped.
        if (resp.status == 200 or (resp.status == 409 and b"not_running" in raw)
                or (resp.status == 504 and b"agent_timeout" in raw)):
            self.count("hostile_" + name)
        else:
            self.error(f"hostile {name} -> {resp.status} {raw[:200]!r}")
            return
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            resp = api.send("POST", f"/v1/sandboxes/{sid}:exec",
                            {"argv": ["true"], "timeoutMs": 10000})
            raw = resp.read()
            if resp.will_close:
                api.close()
            if resp.status == 200 or (resp.status == 409 and b"not_running" in raw):
                return
            if resp.status != 504:
                break
        self.error(f"after {name} the sandbox neither answers nor stopped: {resp.status} {raw[:200]!r}")

    def worker(self, n):
        rnd = random.Random(n)
        api = self.api()
        while time.monotonic() < self.end:
            if not self.go.is_set():
                self.idle.release()
                self.go.wait()
                api = self.api()
                continue
            try:
                self.episode(api, rnd, n)
            except Exception as e:  # noqa: BLE001 -- every failure is counted
                self.error(f"worker {n}: {type(e).__name__}: {e}")
                api = self.api()
        self.idle.release()

    # -- quiescing, restarts, samples --
    def quiesce(self, live_workers):
        self.go.clear()
        for _ in range(live_workers):
            self.idle.acquire()

    def resume(self):
        self.go.set()

    def restart(self, how):
        proc = self.k.proc
        if how == "sigterm":
            proc.send_signal(signal.SIGTERM)
        else:
            proc.kill()
        proc.wait(timeout=120)
        log(f"kilnd stopped ({how}); starting it again on the same state")
        self.k.proc = spawn(
            [self.k.binary, "--listen", f"127.0.0.1:{self.k.port}", "--state-dir",
             self.k.state_dir, "--image-dir", self.k.image_dir, *self.k.args],
            stdin=subprocess.DEVNULL, stdout=self.k.log_file, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                Api(self.k.port, timeout=2).call("GET", "/v1/health")
                break
            except Exception:  # noqa: BLE001 -- not up yet
                time.sleep(0.2)
        api = self.api()
        for n, sid in self.long_lived.items():
            info = api.call("GET", f"/v1/sandboxes/{sid}")
            # Persistent: paused by a graceful stop, re-adopted after kill -9;
            # the exec below wakes a paused one.
            if info["state"] not in ("running", "paused"):
                self.error(f"long-lived {sid} is {info['state']} after {how}")
                continue
            r = api.call("POST", f"/v1/sandboxes/{sid}:exec", {"argv": ["cat", "/tmp/kept"]})
            if r["stdout"] != f"kept {n}\n":
                self.error(f"long-lived {sid} lost its file after {how}: {r!r}")
        self.set_pool(api)
        self.count("restart_" + how)

    def set_pool(self, api):
        api.call("POST", f"/v1/snapshots/{self.base_snapshot}:pool", {"size": 2})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            pool = api.call("GET", f"/v1/snapshots/{self.base_snapshot}").get("pool", {})
            if pool.get("ready", 0) >= 2:
                return
            time.sleep(0.5)
        self.error("the pool did not refill within 120 s")

    def heap_figures(self):
        """kilnd's own account of its memory (/metrics), to tell what RSS holds."""
        status, body = raw(self.api(), "GET", "/metrics")
        if status != 200:
            self.error(f"/metrics answered {status}")
            return {}
        gauges = {'kiln_daemon_heap_bytes{kind="in_use"}': "heap_in_use_mib",
                  'kiln_daemon_heap_bytes{kind="free"}': "heap_free_mib",
                  "kiln_daemon_sqlite_bytes": "sqlite_mib"}
        out = {}
        for line in body.decode().splitlines():
            name, _, value = line.rpartition(" ")
            if name in gauges:
                out[gauges[name]] = round(float(value) / 2**20, 2)
        return out

    def sample(self, label):
        pid = self.k.proc.pid
        state = self.k.state_dir
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
        with open("/proc/self/mountinfo") as f:
            mounts = sum(1 for line in f if state in line)
        netns = len([n for n in os.listdir("/run/netns")
                     if n.startswith("kiln") and not n.startswith("kilnth")]) \
            if os.path.isdir("/run/netns") else 0
        dirs = glob.glob(os.path.join(state, "sandboxes", "*"))
        self.seen.update(os.path.basename(d) for d in dirs)
        # Other kilnds may share the machine: count only our sandboxes' cgroups.
        cgroups = sum(1 for d in glob.glob("/sys/fs/cgroup/*/kiln/*")
                      if os.path.basename(d) in self.seen)
        fig = {"bench": "soak", "sample": label, "at_s": round(time.monotonic() - self.t0),
               "kilnd_pid": pid,
               "rss_mib": round(int(status["VmRSS"].split()[0]) / 1024, 1),
               "fds": len(os.listdir(f"/proc/{pid}/fd")),
               "threads": int(status["Threads"]),
               "cgroups": cgroups, "mounts": mounts, "netns": netns,
               "sandbox_dirs": len(dirs)}
        fig.update(self.heap_figures())
        emit(fig)
        return fig

    def run(self):
        self.t0 = time.monotonic()
        api = self.api()
        base = api.call("POST", "/v1/sandboxes", {"vcpu": 1, "memoryMiB": 512})["id"]
        api.call("POST", f"/v1/sandboxes/{base}:exec", {"command": "echo base > /tmp/base"})
        self.base_snapshot = api.call("POST", f"/v1/sandboxes/{base}:snapshot", {})["id"]
        api.call("POST", f"/v1/sandboxes/{base}:stop", {})
        self.set_pool(api)
        for n in range(WORKERS):
            sid = api.call("POST", "/v1/sandboxes",
                           {"vcpu": 1, "memoryMiB": 256, "timeoutSeconds": 3600,
                            "persistent": True})["id"]
            api.call("POST", f"/v1/sandboxes/{sid}:exec", {"command": f"echo kept {n} > /tmp/kept"})
            self.long_lived[n] = sid
            self.seen.add(sid)
        threads = [threading.Thread(target=self.worker, args=(n,), daemon=True)
                   for n in range(WORKERS)]
        for t in threads:
            t.start()
        total = self.minutes * 60
        # Warm-up ends once kilnd's list of recently stopped sandboxes (the
        # last 1,000) is full, which a restart reloads at once; before that
        # its memory grows by design.
        plan = [(total * 0.15, "warmup", None), (total * 0.30, "before", "sigterm"),
                (total * 0.43, "warmup", None), (total * 0.63, "before", "kill9"),
                (total * 0.76, "warmup", None), (total * 0.999, "end", None)]
        samples = []
        for at, label, restart in plan:
            time.sleep(max(0.0, self.t0 + at - time.monotonic()))
            while label == "warmup" and not samples and self.counts.get("stop", 0) < 1000 \
                    and time.monotonic() < self.t0 + total * 0.25:
                time.sleep(1)
            self.quiesce(WORKERS)
            qapi = self.api()
            self.set_pool(qapi)
            for sid in self.long_lived.values():  # long soaks outlive one lease
                qapi.call("POST", f"/v1/sandboxes/{sid}:extend", {"seconds": 1800})
            time.sleep(3)  # stops in flight settle
            samples.append(self.sample(label))
            if restart:
                self.restart(restart)
                samples.append(self.sample("after_" + restart))
            if label != "end":
                self.resume()
        self.end = 0
        self.resume()
        for t in threads:
            t.join(timeout=300)
        self.check(samples)
        for sid in self.long_lived.values():
            api = self.api()
            api.call("POST", f"/v1/sandboxes/{sid}:stop", {}, ok=(200, 409))
        api.call("POST", f"/v1/snapshots/{self.base_snapshot}:delete", {}, ok=(200, 404))

    def check(self, samples):
        # Within each kilnd process: warm-up sample vs its last sample.
        by_pid = {}
        for s in samples:
            by_pid.setdefault(s["kilnd_pid"], []).append(s)
        growth = []
        for pid, ss in by_pid.items():
            warm = next((s for s in ss if s["sample"] == "warmup"), None)
            last = ss[-1]
            if warm is None or warm is last:
                continue
            rss = (last["rss_mib"] - warm["rss_mib"]) / warm["rss_mib"]
            growth.append(rss)
            if rss > 0.10:
                self.error(f"kilnd {pid} RSS grew {rss:.1%} ({warm['rss_mib']} -> {last['rss_mib']} MiB)")
            for key, slack in (("fds", 8), ("threads", 4), ("cgroups", 0), ("mounts", 0),
                               ("netns", 0), ("sandbox_dirs", 0)):
                if last[key] > warm[key] + slack:
                    self.error(f"kilnd {pid}: {key} grew {warm[key]} -> {last[key]}")
        first, last = samples[0], samples[-1]
        for key in ("cgroups", "mounts", "netns", "sandbox_dirs"):
            if last[key] > first[key]:
                self.error(f"{key} grew over the run: {first[key]} -> {last[key]}")
        emit({"bench": "soak", "summary": True, "minutes": self.minutes, "workers": WORKERS,
              "operations": self.counts, "errors": len(self.errors),
              "rss_growth_max": round(max(growth), 4) if growth else None,
              "first": first, "last": last})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnd", required=True)
    ap.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", 30)))
    ap.add_argument("--image-dir", default=os.environ.get("KILN_IMAGE_DIR", "/var/lib/kiln/images"))
    a = ap.parse_args()
    with TestHosts() as hosts:
        with KilndSession(a.kilnd, a.image_dir, "kiln-soak-",
                          kilnd_args=["--test-resolver-file", hosts.resolver_file]) as s:
            soak = Soak(s, hosts, a.minutes)
            try:
                soak.run()
            except Exception:  # noqa: BLE001 -- reported, then cleaned up
                soak.error("soak driver: " + traceback.format_exc())
            if soak.errors:
                for e in soak.errors[:50]:
                    log(f"soak error: {e}")
                s.rc = 1
        return s.rc


if __name__ == "__main__":
    sys.exit(main())
