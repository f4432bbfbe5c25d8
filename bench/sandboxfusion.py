#!/usr/bin/python3
"""kiln's SandboxFusion front beside SandboxFusion's own server, run from its
source on this machine: the same generated problem set
(bench/sandboxfusion_problems.py, Python and C++) sent to both at client
concurrency 64, one POST /run_code per hidden test as verl's
check_correctness sends them (a new connection each, verl's body, verl's
retries of a 504), each answer classified as verl 0.9.1 does.

Figures (one JSON line each, {"bench": "sandboxfusion", "figure", "side",
"value", "unit", ...}; progress on stderr):
  programs_per_s      programs graded per second (all their tests answered)
  latency_p50/p99     one POST, request to answer, retries included (ms)
  agreement_expected  share of tests whose verdict is the one expected
  cpu_per_program     host CPU seconds per program: the server process
                      itself (kilnd / SandboxFusion's uvicorn) and everything
                      under it (runsc and the sandboxes / compilers, programs,
                      mount and cgroup tools), from /proc
  agreement_sides     share of tests where both sides gave the same verdict
  ratio_kiln_to_peer  kiln's programs/s over the peer's
  probe_*             (when kiln is under half the peer's rate, or --probe):
                      one program's steps through kiln's /v1 API, one at a
                      time: create from the image's pool, write, compile,
                      run, delete; beside the same compile and run on the host

The peer: SandboxFusion's source is not committed to kiln and GitHub may not
be reachable from this machine; extract a checkout to --peer-src (default
/opt/kiln/sandboxfusion-peer/src) with bench/sandboxfusion_peer_src.sh. Its
Python packages (its poetry.lock's versions) go into a venv at --peer-venv
(made on first use, from the package index). Without the source, the peer is
skipped (a JSON line says so) and kiln's figures are still measured.

The peer is configured, not patched: a config yaml beside its own
(sandbox/configs/kiln_bench_<isolation>.yaml: local.yaml with the isolation
mode), an empty docs/build (its server mounts the docs site), a `condabin`
folder in the venv so its python runner's conda lookup finds the venv (whose
bin/activate then puts the host's python 3.11 first, the same Debian python
kiln's image has), HOME set to an empty folder (bash run on asyncio's socket
stdin reads ~/.bashrc, which here puts pyenv first), and for `lite`
isolation a `sudo` that just runs its command (we are root) and
cgroup-tools' cgcreate/cgexec (apt). `lite` (overlayfs + chroot + cgroup v1 +
netns) is tried first and `none` used if it cannot run a program; the lines
say which. lite's leftovers (network namespaces, NAT rules, ip_forward,
cgroups, overlay mounts) are removed at the end.

Usage: /usr/bin/python3 bench/sandboxfusion.py [--kilnd PATH] [--full] [--peer-src DIR]
  default: 40 programs (~130 POSTs a side); --full: 400.
"""
import argparse
import collections
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from common import (Api, KilndSession, emit, forget, free_port, host_busy_ms, log,  # noqa: E402
                    run, spawn)
from measure import ms, percentile  # noqa: E402
import sandboxfusion_problems as problems_mod  # noqa: E402

BENCH = "sandboxfusion"
API_TIMEOUT = 10  # verl: a request may take compile + run + 10 s
MAX_RETRIES = 3   # verl: a 504 is retried, 1 s then 2 s later
PEER_VENV = "/opt/kiln/sandboxfusion-peer"
# SandboxFusion's runtime dependencies (pyproject.toml), at its poetry.lock's versions.
PEER_REQUIREMENTS = [
    "aiofiles==23.2.1", "aiohttp==3.10.6", "aiomysql==0.2.0", "aiosqlite==0.20.0",
    "databases==0.9.0", "fastapi==0.103.2", "uvicorn[standard]==0.25.0", "httptools==0.6.1",
    "psutil==5.9.8", "pydantic==2.6.4", "pyyaml==6.0.2", "starlette==0.27.0",
    "structlog==23.3.0", "tenacity==8.5.0", "transformers==4.45.0", "uvloop==0.20.0",
]


def fig(figure, value, unit, **extra):
    emit({"bench": BENCH, "figure": figure, "value": value, "unit": unit, **extra})


# --------------------------------------------------------------------------
# kiln's side


def prepare_kiln(session, image_set="core"):
    """A key of session's kilnd with SandboxFusion's core language image built
    under it (examples/images/sandboxfusion.py: ~3 min the first time per
    state dir). Returns (base URL of the front for that key, cleanup)."""
    kilnd = session.kilnd
    secret = kilnd.api().call("POST", "/v1/keys", {"name": "bench-sandboxfusion"}, ok=(201,))["secret"]
    env = dict(os.environ, KILN_API_URL=kilnd.url, KILN_API_KEY=secret)
    for k in ("RUNTIME_API_URL", "RUNTIME_API_KEY"):
        env.pop(k, None)
    t0 = time.monotonic()
    p = run([sys.executable, os.path.join(REPO, "examples", "images", "sandboxfusion.py"),
             "--set", image_set, "--quiet"], env=env, capture=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(f"image build exit {p.returncode}: {p.stderr[-2000:]}")
    built = json.loads(p.stdout.strip().splitlines()[-1])
    log(f"kiln: language image {built['image']} ({'built' if built['built'] else 'reused'}) "
        f"in {time.monotonic() - t0:.0f} s")

    def cleanup():
        # The front's warm pool runs copies kilnd would keep past its stop (to
        # adopt them again): emptied first, so nothing is left on the host.
        kilnd.api().call("POST", f"/v1/images/{built['image']}:pool", {"size": 0})

    return f"{kilnd.url}/sandboxfusion/{secret}", cleanup


# --------------------------------------------------------------------------
# The peer: SandboxFusion's server from its source


def _read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


class HostNetState:
    """What lite isolation changes on the host, to put it back."""

    def __init__(self):
        self.ip_forward = _read("/proc/sys/net/ipv4/ip_forward").strip()
        self.netns = self.list_netns()
        self.nat = self.nat_rules()
        self.cgroups = self.list_cgroups()

    @staticmethod
    def list_netns():
        r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
        return {line.split()[0] for line in r.stdout.splitlines() if line.strip()}

    @staticmethod
    def nat_rules():
        r = subprocess.run(["iptables", "-w", "-t", "nat", "-S", "POSTROUTING"], capture_output=True,
                           text=True)
        return collections.Counter(line for line in r.stdout.splitlines() if line.startswith("-A "))

    @staticmethod
    def list_cgroups():
        out = set()
        for ctl in ("memory", "cpu"):
            d = f"/sys/fs/cgroup/{ctl}"
            if os.path.isdir(d):
                out |= {os.path.join(d, n) for n in os.listdir(d) if n.startswith("sandbox_")}
        return out

    def restore(self):
        with open("/proc/mounts") as f:
            mounts = [line.split()[1] for line in f]
        for m in sorted((m for m in mounts if m.startswith("/tmp/overlay_")), reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)
        for ns in self.list_netns() - self.netns:
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
            subprocess.run(["ip", "link", "delete", f"veth-{ns}-br"], capture_output=True)
        for rule, count in (self.nat_rules() - self.nat).items():  # lite adds one per netns, alike
            for _ in range(count):
                subprocess.run(["iptables", "-w", "-t", "nat", "-D", *rule.split()[1:]], capture_output=True)
        for cg in self.list_cgroups() - self.cgroups:
            for pid in _read(os.path.join(cg, "cgroup.procs")).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
            for _ in range(50):
                try:
                    os.rmdir(cg)
                    break
                except OSError:
                    time.sleep(0.1)
        if self.ip_forward and _read("/proc/sys/net/ipv4/ip_forward").strip() != self.ip_forward:
            with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
                f.write(self.ip_forward)
        for d in os.listdir("/tmp"):
            if d.startswith("overlay_") and len(d) == len("overlay_") + 6:
                shutil.rmtree(os.path.join("/tmp", d), ignore_errors=True)


def ensure_peer_venv(venv):
    """SandboxFusion's packages in a venv of the host's python3 (3.11), made
    on first use; plus the folders its configuration needs (see the top)."""
    py = os.path.join(venv, "bin", "python")
    if not (os.path.exists(py) and subprocess.run(
            [py, "-c", "import fastapi, uvicorn, structlog, databases, transformers, aiofiles"],
            capture_output=True).returncode == 0):
        log(f"peer: making {venv} (SandboxFusion's packages from the index)")
        subprocess.run(["/usr/bin/python3", "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", *PEER_REQUIREMENTS],
                       check=True, timeout=1800)
    for d in ("condabin", "home", "shim"):
        os.makedirs(os.path.join(venv, d), exist_ok=True)
    sudo = os.path.join(venv, "shim", "sudo")
    if not os.path.exists(sudo):
        with open(sudo, "w") as f:
            f.write("#!/bin/sh\n# we are root: SandboxFusion's lite isolation sudo's each step\nexec \"$@\"\n")
        os.chmod(sudo, 0o755)
    return py


class SfPeer:
    def __init__(self, src, venv, workdir):
        self.src, self.venv, self.workdir = src, venv, workdir
        self.proc = None
        self.isolation = None
        self.net = None
        self.log_path = os.path.join(workdir, "sandboxfusion-peer.log")
        self.commit = _read(os.path.join(src, ".peer-commit")).strip() or None

    def start(self, isolation):
        py = ensure_peer_venv(self.venv)
        with open(os.path.join(self.src, "sandbox", "configs", "local.yaml")) as f:
            config = f.read()
        if "isolation: none" not in config:
            raise RuntimeError("SandboxFusion's local.yaml has no `isolation: none` to change")
        name = f"kiln_bench_{isolation}"
        with open(os.path.join(self.src, "sandbox", "configs", name + ".yaml"), "w") as f:
            f.write(config.replace("isolation: none", f"isolation: {isolation}"))
        os.makedirs(os.path.join(self.src, "docs", "build"), exist_ok=True)
        if isolation == "lite":
            missing = [t for t in ("cgcreate", "cgexec", "cgset", "cgdelete", "iptables") if not shutil.which(t)]
            if missing:
                raise RuntimeError(f"lite isolation needs {missing} (apt-get install cgroup-tools iptables)")
            self.net = HostNetState()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, SANDBOX_CONFIG=name, HOME=os.path.join(self.venv, "home"),
                   PATH=os.path.join(self.venv, "shim") + ":" + os.environ.get("PATH", ""))
        self.log_file = open(self.log_path, "ab")
        self.proc = spawn([py, "-m", "uvicorn", "sandbox.server.server:app", "--host", "127.0.0.1",
                           "--port", str(self.port), "--log-level", "warning"],
                          cwd=self.src, env=env, stdin=subprocess.DEVNULL, stdout=self.log_file,
                          stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"SandboxFusion exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/v1/ping")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("SandboxFusion did not answer /v1/ping in 180 s: " + self.log_tail())
            time.sleep(0.2)
        # It must run a program (python and cpp) before it counts as up.
        for lang, code, out in (("python", "print(int(input()) * 2)", "42"),
                                ("cpp", "#include <iostream>\nint main(){int n; std::cin >> n;"
                                        " std::cout << n * 2;}", "42")):
            ans, err, _ = post_run_code(self.url, {"code": code, "language": lang, "stdin": "21",
                                                   "compile_timeout": 30, "run_timeout": 10,
                                                   "memory_limit_MB": 1024, "files": {},
                                                   "fetch_files": []})
            if err or ans.get("status") != "Success" or (ans.get("run_result") or {}).get("stdout", "").strip() != out:
                raise RuntimeError(f"SandboxFusion ({isolation}) cannot run {lang}: {err or ans}")
        self.isolation = isolation
        log(f"peer: SandboxFusion {self.commit or '?'} up on {self.url}, isolation {isolation}")

    def log_tail(self, n=1500):
        return _read(self.log_path)[-n:]

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            forget(self.proc)
            self.log_file.close()
            self.proc = None
        if self.net is not None:
            self.net.restore()
            self.net = None


def start_peer(args, workdir, mode):
    """The peer up in isolation `mode`, or (None, why)."""
    if not os.path.isfile(os.path.join(args.peer_src, "sandbox", "server", "server.py")):
        return None, f"no SandboxFusion source at {args.peer_src} (bench/sandboxfusion_peer_src.sh)"
    peer = SfPeer(args.peer_src, args.peer_venv, workdir)
    try:
        peer.start(mode)
        return peer, None
    except Exception as e:
        log(f"peer: isolation {mode} did not work: {e}")
        peer.stop()
        return None, f"{mode}: {str(e)[:500]}"


# --------------------------------------------------------------------------
# The load: one POST per test, as verl sends it


def post_run_code(base_url, body, timeout=None):
    """verl's call_sandbox_api: a new connection per attempt, a 504 retried
    (1 s, then 2 s later), any other failure final. (answer, error, 504s)."""
    u = urllib.parse.urlsplit(base_url)
    path = u.path.rstrip("/") + "/run_code"
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if timeout is None:
        timeout = body["compile_timeout"] + body["run_timeout"] + API_TIMEOUT
    n504 = 0
    err = None
    for attempt in range(MAX_RETRIES):
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        try:
            conn.request("POST", path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        except Exception as e:
            return None, f"{type(e).__name__}: {e}", n504
        finally:
            conn.close()
        if resp.status == 504:
            n504 += 1
            err = "504 after retries"
            if attempt < MAX_RETRIES - 1:
                time.sleep(1 * (attempt + 1))
            continue
        if resp.status >= 400:
            return None, f"HTTP {resp.status}: {raw[:200]!r}", n504
        try:
            return json.loads(raw), None, n504
        except ValueError as e:
            return None, f"bad JSON: {e}", n504
    return None, err, n504


def tree_cpu_ms(pid):
    """(pid's own CPU, CPU of everything under it) in ms: its reaped
    children's (cutime + cstime) plus each live descendant's own and reaped."""
    tick = 1000 / os.sysconf("SC_CLK_TCK")
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # fields[1] = ppid; [11..14] = utime stime cutime cstime
            stats[int(name)] = (int(fields[1]), [int(x) for x in fields[11:15]])
    if pid not in stats:
        return None, None
    own = sum(stats[pid][1][:2]) * tick
    below = sum(stats[pid][1][2:]) * tick
    kids = {}
    for p, (pp, _) in stats.items():
        kids.setdefault(pp, []).append(p)
    todo = list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        below += sum(stats[p][1]) * tick
        todo.extend(kids.get(p, []))
    return own, below


def run_load(base_url, programs, args, server_pid, label):
    """Every test of every program POSTed at args.concurrency, the order
    shuffled (seeded). Returns the side's results."""
    tasks = [(pi, ti) for pi, p in enumerate(programs) for ti in range(len(p["tests"]))]
    random.Random(args.seed).shuffle(tasks)
    answers = {}
    lock = threading.Lock()
    nxt = [0]
    done_at = {}  # program -> time its last test was answered
    left = {pi: len(p["tests"]) for pi, p in enumerate(programs)}

    def worker():
        while True:
            with lock:
                if nxt[0] >= len(tasks):
                    return
                pi, ti = tasks[nxt[0]]
                nxt[0] += 1
            p = programs[pi]
            t = p["tests"][ti]
            body = {"compile_timeout": args.compile_timeout, "run_timeout": args.run_timeout,
                    "code": p["code"], "stdin": t["stdin"], "memory_limit_MB": args.memory_mb,
                    "language": p["language"], "files": {}, "fetch_files": []}
            t0 = time.perf_counter()
            ans, err, n504 = post_run_code(base_url, body, args.request_timeout)
            took = time.perf_counter() - t0
            v = problems_mod.verl_verdict(ans, t["expected_output"], err)
            with lock:
                answers[(pi, ti)] = {"verdict": v, "ms": ms(took), "err": err, "n504": n504,
                                     "status": (ans or {}).get("status"), "answer": ans}
                left[pi] -= 1
                if left[pi] == 0:
                    done_at[pi] = time.perf_counter()

    cpu0 = tree_cpu_ms(server_pid)
    busy0 = host_busy_ms()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, name=f"load-{i}") for i in range(args.concurrency)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    busy = host_busy_ms() - busy0
    cpu1 = tree_cpu_ms(server_pid)
    # verl's per-program post-processing (after a compile error, -4).
    verdicts = {}
    for pi, p in enumerate(programs):
        per = problems_mod.program_verdicts([answers[(pi, ti)]["verdict"] for ti in range(len(p["tests"]))])
        for ti, v in enumerate(per):
            verdicts[(pi, ti)] = v
    lat = sorted(a["ms"] for a in answers.values())
    same = lambda a, b: a == b and type(a) is type(b)  # noqa: E731  (True is not 1)
    ok = sum(1 for (pi, ti), v in verdicts.items() if same(v, programs[pi]["tests"][ti]["verdict"]))
    misses = [(pi, ti) for (pi, ti), v in verdicts.items()
              if not same(v, programs[pi]["tests"][ti]["verdict"])]
    for pi, ti in misses[:6]:
        a = answers[(pi, ti)]
        ans = a["answer"] or {}
        log(f"{label}: program {pi} ({programs[pi]['language']} {programs[pi]['kind']}) test {ti}: "
            f"verdict {verdicts[(pi, ti)]} expected {programs[pi]['tests'][ti]['verdict']}; "
            f"err {a['err']}, status {a['status']}, compile "
            f"{(ans.get('compile_result') or {}).get('status')}, run {(ans.get('run_result') or {}).get('status')}"
            f" {str((ans.get('run_result') or {}).get('stderr'))[:120]!r} {ans.get('message', '')[:120]!r}")
    verl_limit = ms(args.compile_timeout + args.run_timeout + API_TIMEOUT)
    out = {"over_verl_timeout": sum(1 for a in answers.values() if a["ms"] > verl_limit),
           "wall": wall, "programs": len(programs), "tests": len(tasks),
           "programs_per_s": len(programs) / wall, "p50": percentile(lat, 0.5),
           "p99": percentile(lat, 0.99), "agreement": ok / len(tasks), "misses": len(misses),
           "verdicts": verdicts, "n504": sum(a["n504"] for a in answers.values()),
           "errors": sum(1 for a in answers.values() if a["err"]),
           "host_cpu_s": busy / 1000,
           "server_cpu_s": None if cpu0[0] is None or cpu1[0] is None else (cpu1[0] - cpu0[0]) / 1000,
           "below_cpu_s": None if cpu0[1] is None or cpu1[1] is None else (cpu1[1] - cpu0[1]) / 1000}
    log(f"{label}: {len(programs)} programs ({len(tasks)} POSTs) in {wall:.1f} s = "
        f"{out['programs_per_s']:.2f} programs/s; p50 {out['p50']:.0f} ms, p99 {out['p99']:.0f} ms; "
        f"verdicts as expected {ok}/{len(tasks)}; 504s {out['n504']}; errors {out['errors']}; "
        f"past verl's request timeout {out['over_verl_timeout']}; "
        f"host CPU {out['host_cpu_s']:.1f} s")
    return out


def emit_side(side, r, extra):
    common = {"side": side, "programs": r["programs"], "tests": r["tests"], **extra}
    fig("programs_per_s", round(r["programs_per_s"], 3), "programs/s", wallS=round(r["wall"], 2), **common)
    fig("latency_p50", round(r["p50"], 1), "ms", **common)
    fig("latency_p99", round(r["p99"], 1), "ms", overVerlRequestTimeout=r["over_verl_timeout"], **common)
    fig("agreement_expected", round(r["agreement"], 4), "fraction", mismatches=r["misses"],
        retried504=r["n504"], requestErrors=r["errors"], **common)
    n = r["programs"]
    fig("cpu_per_program", round(r["host_cpu_s"] / n, 3), "cpu-s/program",
        serverSelf=None if r["server_cpu_s"] is None else round(r["server_cpu_s"] / n, 4),
        underServer=None if r["below_cpu_s"] is None else round(r["below_cpu_s"] / n, 3),
        what="host CPU (all processes, /proc/stat) per program; serverSelf: the server process "
             "itself; underServer: what runs under it", **common)


# --------------------------------------------------------------------------
# The probe: where a kiln request's time goes


def probe_kiln(session, secret, args, n=6):
    """One program at a time through kiln's /v1 API, as the front runs it:
    create from the language image (its pool), write the file, compile, run,
    delete; beside the same compile and run on the host. Medians in ms."""
    api = Api(session.kilnd.port, timeout=120, key=secret)
    cpp = problems_mod.cpp_program(problems_mod.PROBLEMS[0], "correct")
    py = problems_mod.python_program(problems_mod.PROBLEMS[0], "correct")
    stdin = "3\n1 2 3\n"
    steps = {k: [] for k in ("create", "write", "compile", "run_cpp", "run_python", "delete",
                             "host_compile", "host_run_cpp", "host_run_python")}
    kilnd_pid = session.kilnd.proc.pid
    cpu0 = tree_cpu_ms(kilnd_pid)
    for i in range(n):
        t = time.perf_counter()
        sid = api.call("POST", "/v1/sandboxes", {"image": "sandboxfusion", "timeoutSeconds": 300})["id"]
        steps["create"].append(ms(time.perf_counter() - t))
        t = time.perf_counter()
        for name, src in (("main.cpp", cpp), ("main.py", py)):
            r = api.call("POST", f"/v1/sandboxes/{sid}:exec",
                         {"argv": ["sh", "-c", f"cat > {name}"], "stdin": src})
            assert r["exitCode"] == 0, r
        steps["write"].append(ms(time.perf_counter() - t) / 2)
        for key, argv, sin in (("compile", ["g++", "-std=c++17", "main.cpp", "-o", "test", "-lpthread"], None),
                               ("run_cpp", ["./test"], stdin), ("run_python", ["python3", "main.py"], stdin)):
            t = time.perf_counter()
            body = {"argv": argv}
            if sin:
                body["stdin"] = sin
            r = api.call("POST", f"/v1/sandboxes/{sid}:exec", body)
            steps[key].append(ms(time.perf_counter() - t))
            assert r["exitCode"] == 0, r
        t = time.perf_counter()
        api.call("DELETE", f"/v1/sandboxes/{sid}")
        steps["delete"].append(ms(time.perf_counter() - t))
    cpu1 = tree_cpu_ms(kilnd_pid)
    hd = os.path.join(session.workdir, "host-probe")
    os.makedirs(hd, exist_ok=True)
    with open(os.path.join(hd, "main.cpp"), "w") as f:
        f.write(cpp)
    with open(os.path.join(hd, "main.py"), "w") as f:
        f.write(py)
    for i in range(n):
        for key, argv, sin in (("host_compile", ["g++", "-std=c++17", "main.cpp", "-o", "test", "-lpthread"], None),
                               ("host_run_cpp", ["./test"], stdin),
                               ("host_run_python", ["/usr/bin/python3", "main.py"], stdin)):
            t = time.perf_counter()
            subprocess.run(argv, cwd=hd, input=(sin or "").encode(), capture_output=True, check=True)
            steps[key].append(ms(time.perf_counter() - t))
    med = {k: round(percentile(sorted(v), 0.5), 1) for k, v in steps.items()}
    log(f"probe: {med}")
    fig("probe_steps_p50", med, "ms", n=n,
        what="one program at a time through kiln's /v1 API (create from the sandboxfusion image's "
             "pool, write main.cpp/main.py via exec, g++ compile, run, DELETE) beside the same "
             "compile and runs on the host")
    own = (cpu1[0] - cpu0[0]) / 1000 / n
    below = (cpu1[1] - cpu0[1]) / 1000 / n
    fig("probe_cpu_per_program", round(own + below, 3), "cpu-s/program", kilndSelf=round(own, 4),
        runscAndSandbox=round(below, 3), kilndShare=round(own / (own + below), 4) if own + below else None,
        what="CPU per probe program (one cpp compile+run and one python run in one sandbox): "
             "kilnd itself vs runsc and everything in the sandbox, from /proc")


# --------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kilnd", default="build/bin/kilnd")
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--full", action="store_true", help="400 programs instead of 40")
    ap.add_argument("--n", type=int, default=None, help="programs (overrides --full)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--compile-timeout", type=float, default=60,
                    help="verl sends its one timeout (default 10 s) for both; at concurrency 64 "
                         "on 2 cores a queue of g++ runs passes 10 s and correct programs "
                         "would be scored -4, so the compile gets 60 s here")
    ap.add_argument("--run-timeout", type=float, default=5, help="what a looping program costs")
    ap.add_argument("--request-timeout", type=float, default=600,
                    help="the client's wait for one answer; verl waits compile + run + 10 s and "
                         "scores -1 past it: those are counted (overVerlRequestTimeout), not cut")
    ap.add_argument("--memory-mb", type=int, default=1024, help="verl's default memory_limit_mb")
    ap.add_argument("--peer-src", default=os.path.join(PEER_VENV, "src"))
    ap.add_argument("--peer-venv", default=PEER_VENV)
    ap.add_argument("--peer-isolation", default="lite,none",
                    help="SandboxFusion's isolation modes to measure, in order (lite: overlayfs + "
                         "chroot + cgroups + netns; none: its default config, the container being "
                         "the isolation); a mode that cannot run a program is skipped")
    ap.add_argument("--probe", choices=["auto", "always", "never"], default="auto")
    ap.add_argument("--no-kiln", action="store_true", help="the peer only (no image build)")
    args = ap.parse_args()
    n = args.n or (400 if args.full else 40)
    programs = problems_mod.generate(n, args.seed)
    # Each side first answers one wave at the same concurrency (correct
    # programs only): kiln's pool sized, SandboxFusion's lite pools made.
    warmup = [p for p in problems_mod.generate(60, args.seed + 1000) if p["kind"] == "correct"][:24]
    config = {"programs": n, "tests": sum(len(p["tests"]) for p in programs),
              "concurrency": args.concurrency, "compileTimeout": args.compile_timeout,
              "runTimeout": args.run_timeout, "memoryLimitMB": args.memory_mb, "seed": args.seed}
    log(f"{n} programs, {config['tests']} tests, concurrency {args.concurrency}")

    with KilndSession(args.kilnd, args.image_dir, "kiln-bench-sf-") as s:
        fig("config", None, None, kilndFlags="defaults (--sandboxfusion-pool 2: a fresh sandbox "
            "per request from a warm pool of 2)", **config)
        kiln_r, secret = None, None
        if not args.no_kiln:
            url, cleanup = prepare_kiln(s)
            s.on_exit("kiln cleanup", cleanup)
            secret = url.rsplit("/", 1)[1]
            run_load(url, warmup, args, s.kilnd.proc.pid, "kiln warm-up")  # pool sized
            kiln_r = run_load(url, programs, args, s.kilnd.proc.pid, "kiln")
            emit_side("kiln", kiln_r, {})
        worst = None
        for mode in [m for m in args.peer_isolation.split(",") if m]:
            peer, why = start_peer(args, s.workdir, mode)
            if peer is None:
                fig("peer_skipped", None, None, side=f"peer-{mode}", why=why)
                continue
            side = f"peer-{mode}"
            try:
                extra = {"peerIsolation": mode, "peerCommit": peer.commit}
                # lite keeps the cgroups and network namespaces it made for reuse
                run_load(peer.url, warmup, args, peer.proc.pid, f"{side} warm-up")
                peer_r = run_load(peer.url, programs, args, peer.proc.pid, side)
            finally:
                peer.stop()  # before the next mode: lite's namespaces and mounts gone
            emit_side(side, peer_r, extra)
            if kiln_r:
                same = sum(1 for k, v in kiln_r["verdicts"].items()
                           if v == peer_r["verdicts"][k] and type(v) is type(peer_r["verdicts"][k]))
                fig("agreement_sides", round(same / len(kiln_r["verdicts"]), 4), "fraction",
                    side=f"kiln~{side}", peerIsolation=mode)
                ratio = kiln_r["programs_per_s"] / peer_r["programs_per_s"]
                fig("ratio_kiln_to_peer", round(ratio, 3), "x", side=f"kiln/{side}",
                    kilnProgramsPerS=round(kiln_r["programs_per_s"], 3),
                    peerProgramsPerS=round(peer_r["programs_per_s"], 3), peerIsolation=mode)
                worst = ratio if worst is None else min(worst, ratio)
        if kiln_r and (args.probe == "always" or
                       (args.probe == "auto" and worst is not None and worst < 0.5)):
            probe_kiln(s, secret, args)
    sys.exit(s.rc)


if __name__ == "__main__":
    main()
