"""What the benchmark scripts share: child processes, output, kilnd and its
API, the raw-runsc peer, and KilndSession, which gives a script its own kilnd
and leaves nothing behind. Python standard library only.
"""
import ctypes
import datetime
import glob
import hashlib
import http.client
import json
import os
import platform
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNSC = "runsc"  # set to the runsc kilnd uses (runsc_of) when a KilndSession starts


def runsc_of(kilnd):
    """The runsc a kilnd build uses: line 2 of `kilnd --version` is `runsc VERSION PATH ...`."""
    return subprocess.run([kilnd, "--version"], capture_output=True, text=True).stdout.split("\n")[1].split()[2]


# The flags kilnd gives runsc (src/engine/runsc_engine.cc), for the peer too:
# no network, writes in an overlay backed by a file on host disk (4 GiB, the
# default diskMiB), systrap.
# A Peer made with memory_overlay=True keeps writes in sandbox memory instead
# (kiln's choice before the file-backed disk), to measure the difference.
def peer_flags(root, memory_overlay=False):
    disk = os.path.join(os.path.dirname(root), "peer-disk")
    os.makedirs(disk, exist_ok=True)
    overlay = "root:memory" if memory_overlay else f"root:dir={disk},size=4096m"
    return ["--network=none", f"--overlay2={overlay}", "--platform", "systrap"]


# --------------------------------------------------------------------------
# Child processes. kilnd makes itself a child subreaper and reaps the runsc
# sandbox processes that `runsc run --detach` orphans; the peer must too, or
# `runsc delete` waits (polling kill(pid, 0)) until PID 1 of the machine reaps
# the zombie, which here takes 1.5-2 s instead of ~0.1 s. So a script with a
# peer makes itself a subreaper as well (start_subreaper), and a thread reaps
# orphans as soon as they exit. It never reaps a child started by spawn():
# one of our own Popen objects will wait for it.

_spawn_lock = threading.Lock()
_own_pids = set()
_reaper_stop = threading.Event()
PR_SET_CHILD_SUBREAPER = 36


def spawn(args, **kw):
    with _spawn_lock:
        p = subprocess.Popen(args, **kw)
        _own_pids.add(p.pid)
    return p


def forget(p):
    with _spawn_lock:
        _own_pids.discard(p.pid)


def run(args, timeout=120, check=False, text=False, capture=False, **kw):
    """subprocess.run through spawn(); returns CompletedProcess."""
    if capture:
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
    kw.setdefault("stdin", subprocess.DEVNULL)
    p = spawn(args, text=text, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except BaseException:
        p.kill()
        p.wait()
        raise
    finally:
        forget(p)
    r = subprocess.CompletedProcess(args, p.returncode, out, err)
    if check:
        r.check_returncode()
    return r


def _reap_orphans():
    while not _reaper_stop.is_set():
        reaped = False
        with _spawn_lock:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                info = None
            if info is not None and info.si_pid not in _own_pids:
                try:
                    os.waitpid(info.si_pid, 0)
                    reaped = True
                except ChildProcessError:
                    pass
        if not reaped:
            time.sleep(0.003)


def start_subreaper():
    """Only for scripts that start every child through spawn()/run()."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        log(f"prctl(PR_SET_CHILD_SUBREAPER) failed: errno {ctypes.get_errno()}")
        return False
    threading.Thread(target=_reap_orphans, name="reaper", daemon=True).start()
    return True


def host_busy_ms():
    """Host CPU time spent not idle (all cores) since boot, in ms (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) * 1000 / os.sysconf("SC_CLK_TCK")


def mem_available_mib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


def process_cpu_ms(pid):
    """CPU time of one process itself (not its children), in ms."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def emit(obj):
    """One figure: one JSON line on stdout."""
    print(json.dumps(obj), flush=True)


# --------------------------------------------------------------------------
# HTTP client (keep-alive, TCP_NODELAY)


class ApiError(Exception):
    pass


class Api:
    def __init__(self, port, timeout=120, key=None):
        self.port = port
        self.timeout = timeout
        self.key = key
        self.conn = None
        self.connects = 0

    def connect(self):
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        self.conn.connect()
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connects += 1

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def send(self, method, path, body=None):
        """Sends a request, returns the open response (caller reads it)."""
        reused = self.conn is not None and self.conn.sock is not None
        if not reused:
            self.connect()
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        try:
            self.conn.request(method, path, body=data, headers=headers)
            return self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            self.close()
            if not reused:
                raise
            # kilnd closes keep-alive connections idle past --idle-timeout-seconds
            # (60 s); the request never reached it: send it once more.
            self.connect()
            self.conn.request(method, path, body=data, headers=headers)
            return self.conn.getresponse()
        except (ConnectionError, http.client.HTTPException, socket.timeout):
            self.close()
            raise

    def call(self, method, path, body=None, ok=(200,)):
        resp = self.send(method, path, body)
        raw = resp.read()
        if resp.will_close:
            self.close()
        if resp.status not in ok:
            raise ApiError(f"{method} {path} -> {resp.status}: {raw[:500]!r}")
        return json.loads(raw) if raw else None


# --------------------------------------------------------------------------
# kilnd and its sandboxes


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Kilnd:
    def __init__(self, binary, image_dir, workdir, args=()):
        self.binary = os.path.abspath(binary)
        self.image_dir = image_dir
        self.args = list(args)  # more kilnd flags
        self.state_dir = os.path.join(workdir, "kilnd-state")
        self.log_path = os.path.join(workdir, "kilnd.log")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None
        self.sandboxes = set()  # ids made and not yet stopped
        self.snapshots = set()  # ids made and not yet deleted
        self.version = None
        self.key = None  # the admin key, once it is up

    def api(self, timeout=120):
        return Api(self.port, timeout=timeout, key=self.key)

    def start(self, timeout=120):
        os.makedirs(self.state_dir)
        self.log_file = open(self.log_path, "wb")
        self.proc = spawn(
            [self.binary, "--listen", f"127.0.0.1:{self.port}", "--state-dir", self.state_dir,
             "--image-dir", self.image_dir, *self.args],
            stdin=subprocess.DEVNULL, stdout=self.log_file, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kilnd exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                h = Api(self.port, timeout=2).call("GET", "/v1/health")
                self.version = h.get("version")
                break
            except (OSError, ApiError, http.client.HTTPException):
                time.sleep(0.05)
        else:
            raise RuntimeError(f"kilnd did not answer /v1/health within {timeout} s: "
                               + self.log_tail())
        with open(os.path.join(self.state_dir, "admin.key")) as f:
            self.key = f.read().strip()

    def log_tail(self, n=1500):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def create(self, api, body=None):
        info = api.call("POST", "/v1/sandboxes", body or {})
        self.sandboxes.add(info["id"])
        return info["id"]

    def stop_sandbox(self, api, sid):
        api.call("POST", f"/v1/sandboxes/{sid}:stop", {})
        self.sandboxes.discard(sid)

    def snapshot(self, api, sid, body=None):
        rec = api.call("POST", f"/v1/sandboxes/{sid}:snapshot", body or {})
        self.snapshots.add(rec["id"])
        return rec

    def delete_snapshot(self, api, snap_id):
        """Deletes it (and its pool); copies already made keep running."""
        api.call("POST", f"/v1/snapshots/{snap_id}:delete", {}, ok=(200, 404))
        self.snapshots.discard(snap_id)

    def set_pool(self, api, snap_id, size):
        """POST /v1/snapshots/{id}:pool. False if this kilnd has no such route."""
        resp = api.send("POST", f"/v1/snapshots/{snap_id}:pool", {"size": size})
        raw = resp.read()
        if resp.will_close:
            api.close()
        if resp.status in (404, 405) and (b"route_not_found" in raw or b"method_not_allowed" in raw):
            return False
        if resp.status != 200:
            raise ApiError(f"POST :pool {size} -> {resp.status}: {raw[:500]!r}")
        return True

    def shutdown(self):
        if self.proc is None:
            return
        if self.proc.poll() is None and (self.sandboxes or self.snapshots):
            api = self.api(timeout=30)
            # Deleting a snapshot also destroys its pool of ready copies.
            for snap_id in list(self.snapshots):
                try:
                    self.delete_snapshot(api, snap_id)
                except Exception as e:
                    log(f"delete snapshot {snap_id} failed: {e}")
            for sid in list(self.sandboxes):
                try:
                    self.stop_sandbox(api, sid)
                except Exception as e:  # keep cleaning up
                    log(f"stop {sid} failed: {e}")
            api.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                log("kilnd did not exit on SIGTERM; killing it")
                self.proc.kill()
                self.proc.wait()
        forget(self.proc)
        self.log_file.close()
        # Whatever runsc still lists under kilnd's root (should be nothing).
        root = os.path.join(self.state_dir, "runsc")
        left = runsc_list(root)
        if left:
            log(f"kilnd left runsc containers behind: {left}; deleting them")
        for cid in left:
            runsc_delete(root, cid)
        for sid in self.sandboxes:
            for d in glob.glob(f"/sys/fs/cgroup/*/kiln/{sid}"):
                try:
                    os.rmdir(d)
                except OSError:
                    pass


# --------------------------------------------------------------------------
# The peer: the raw runsc CLI on an OCI bundle with the same rootfs


def runsc_cmd(root, *args, memory_overlay=False):
    return [RUNSC, "--root", root, *peer_flags(root, memory_overlay), *args]


def runsc_list(root):
    if not os.path.isdir(root):
        return []
    r = run([RUNSC, "--root", root, "list", "-quiet"], capture=True, text=True, timeout=60)
    return r.stdout.split()


def runsc_delete(root, cid):
    run([RUNSC, "--root", root, "delete", "--force", cid], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, timeout=60)


class Peer:
    def __init__(self, rootfs, workdir, memory_overlay=False, name="peer"):
        self.rootfs = rootfs
        self.memory_overlay = memory_overlay
        self.root = os.path.join(workdir, f"{name}-root")
        self.bundles = os.path.join(workdir, f"{name}-bundles")
        self.images = os.path.join(workdir, f"{name}-images")  # runsc checkpoints
        os.makedirs(self.root)
        os.makedirs(self.bundles)
        os.makedirs(self.images)
        self.seq = 0
        self.containers = set()
        self.pipes = {}  # cid -> (stdin write end, stdout read end) we hold
        self._lock = threading.Lock()

    def bundle(self, name, args):
        """`runsc spec`, then root = the image dir (its writes go to the overlay,
        never to the image, as in kilnd's sandboxes), no terminal, args."""
        d = os.path.join(self.bundles, name)
        os.makedirs(d)
        run([RUNSC, "spec", "--bundle", d], check=True, capture=True)
        path = os.path.join(d, "config.json")
        with open(path) as f:
            spec = json.load(f)
        spec["root"] = {"path": self.rootfs, "readonly": False}
        spec["process"]["args"] = args
        spec["process"]["terminal"] = False
        with open(path, "w") as f:
            json.dump(spec, f, indent=2)
        return d

    def cmd(self, *args):
        return runsc_cmd(self.root, *args, memory_overlay=self.memory_overlay)

    def next_id(self, prefix):
        with self._lock:
            self.seq += 1
            return f"kb-{prefix}-{os.getpid()}-{self.seq:06d}"  # runsc takes ids by prefix

    def run(self, bundle, cid, detach=False):
        args = ["run"] + (["--detach"] if detach else []) + ["--bundle", bundle, cid]
        self.containers.add(cid)
        # A detached sandbox inherits runsc's stdio: a pipe would never see
        # EOF, so its stderr goes to a file.
        err_path = os.path.join(self.bundles, cid + ".err")
        with open(err_path, "wb") as err:
            r = run(self.cmd(*args), stdout=subprocess.DEVNULL, stderr=err, timeout=120)
        if r.returncode != 0:
            with open(err_path, "rb") as f:
                raise RuntimeError(f"runsc run {cid}: rc={r.returncode} {f.read()[-500:]!r}")

    def start_piped(self, bundle, cid, image=None, restore_flags=()):
        """`runsc run --detach` (or, with image, `runsc restore --detach
        --image-path image` plus restore_flags) with the container's stdin and
        stdout on fresh pipes that we hold (Peer.pipes[cid]) until delete()."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        with self._lock:
            self.pipes[cid] = (in_w, out_r)
            self.containers.add(cid)
        verb = (["restore", "--detach", *restore_flags, "--image-path", image] if image
                else ["run", "--detach"])
        err_path = os.path.join(self.bundles, cid + ".err")
        try:
            with open(err_path, "wb") as err:
                r = run(self.cmd(*verb, "--bundle", bundle, cid), stdin=in_r,
                        stdout=out_w, stderr=err, timeout=120)
        finally:
            os.close(in_r)
            os.close(out_w)
        if r.returncode != 0:
            with open(err_path, "rb") as f:
                raise RuntimeError(f"runsc {verb[0]} {cid}: rc={r.returncode} {f.read()[-500:]!r}")
        return in_w, out_r

    def checkpoint(self, cid, path):
        """`runsc checkpoint --leave-running --compression=none`, as kilnd does."""
        os.makedirs(path)
        r = run(self.cmd("checkpoint", "--leave-running", "--compression=none",
                          "--image-path", path, cid), capture=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"runsc checkpoint {cid}: rc={r.returncode} {r.stderr[-500:]!r}")

    def exec(self, cid, *argv, stdout=subprocess.DEVNULL):
        return run(self.cmd("exec", cid, *argv), stdout=stdout, stderr=subprocess.PIPE,
                   timeout=120)

    def delete(self, cid):
        runsc_delete(self.root, cid)
        with self._lock:
            self.containers.discard(cid)
            fds = self.pipes.pop(cid, ())
        for fd in fds:
            os.close(fd)

    def cleanup(self):
        for cid in set(self.containers) | set(runsc_list(self.root)):
            self.delete(cid)


def read_until(fd, needle, timeout=180):
    """Reads a pipe until needle appears; returns what was read."""
    buf = b""
    deadline = time.monotonic() + timeout
    while needle not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"no {needle!r} within {timeout} s: {buf[-300:]!r}")
        r, _, _ = select.select([fd], [], [], left)
        if r:
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"EOF before {needle!r}: {buf[-300:]!r}")
            buf += chunk
    return buf


def unmount_under(workdir):
    """runsc pins the empty network namespace its sandboxes share at
    <root>/null-netns (a bind mount); the raw peers' roots are under our
    temp dir, so unmount whatever is mounted there before removing it."""
    prefix = os.path.realpath(workdir) + "/"
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    for point in sorted((p for p in points if p.startswith(prefix)), reverse=True):
        subprocess.run(["umount", "-l", point], check=False)


def kill_leftovers(workdir):
    """Processes whose command line names our temp dir (runsc sandboxes,
    gofers) must be gone by now; kill any that are not, by pid."""
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        if workdir in cmd:
            found.append(int(name))
    for pid in found:
        log(f"leftover process {pid} names {workdir}; killing it")
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return found


# --------------------------------------------------------------------------
# A script's run


def base_rootfs(image_dir):
    """The base image kilnd uses: keyed by the recipe's hash (images/base/build.sh)."""
    with open(os.path.join(REPO, "images", "base", "build.sh"), "rb") as f:
        rootfs = os.path.join(image_dir, "base-" + hashlib.sha256(f.read()).hexdigest()[:16])
    if not os.path.isdir(rootfs):
        sys.exit(f"no base image {rootfs}: run `make image`")
    return rootfs


def machine_line(kilnd_version):
    model = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = round(int(f.readline().split()[1]) / 1048576, 1)
    except (OSError, ValueError, IndexError):
        pass
    rv = run([RUNSC, "--version"], capture=True, text=True).stdout.split("\n")[0]
    return {"machine": platform.node(), "cpus": os.cpu_count(), "cpuModel": model, "memGiB": mem,
            "kernel": platform.release(), "runsc": rv.replace("runsc version ", "").strip(),
            "kilnd": kilnd_version, "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


class KilndSession:
    """`with KilndSession(...) as s:` runs the block against a kilnd of its
    own (s.kilnd) on a free port, state in a temp dir s.workdir, and emits the
    machine line first. SIGTERM and SIGINT interrupt the block once. A failure
    is logged with kilnd's log tail and sets s.rc to 1 instead of raising (if
    kilnd does not start, the script exits 1). At the end, whatever happened:
    the on_exit() functions in order, then kilnd stopped with what it still
    runs, stray processes naming s.workdir killed, s.workdir removed."""

    def __init__(self, binary, image_dir, prefix, kilnd_args=(), machine=True):
        global RUNSC
        RUNSC = runsc_of(binary)  # the peer runs the same runsc as kilnd
        self.workdir = tempfile.mkdtemp(prefix=prefix)
        self.kilnd = Kilnd(binary, image_dir, self.workdir, kilnd_args)
        self.machine = machine
        self.rc = 0
        self._on_exit = []
        self._stopping = False
        self._started = time.monotonic()

    def on_exit(self, what, fn):
        """fn() runs before kilnd stops; if it raises, `what: error` is logged and rc is 1."""
        self._on_exit.append((what, fn))

    def _on_signal(self, signum, frame):
        if not self._stopping:
            self._stopping = True
            raise KeyboardInterrupt(f"signal {signum}")

    def __enter__(self):
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        try:
            log(f"starting kilnd on port {self.kilnd.port}, state {self.kilnd.state_dir}")
            self.kilnd.start()
            if self.machine:
                emit(machine_line(self.kilnd.version))
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise SystemExit(1)
        return self

    def __exit__(self, typ, exc, tb):
        if exc is not None:
            self.rc = 1
            log(f"FAILED: {typ.__name__}: {exc}")
            tail = self.kilnd.log_tail()
            if tail:
                log("kilnd log tail:\n" + tail)
        # Cleanup runs to the end; signals stay ignored so what the caller
        # cleans up after us finishes too.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        log("cleaning up")
        for what, fn in self._on_exit:
            try:
                fn()
            except Exception as e:
                log(f"{what}: {e}")
                self.rc = 1
        try:
            self.kilnd.shutdown()
        except Exception as e:
            log(f"kilnd shutdown: {e}")
            self.rc = 1
        if kill_leftovers(self.workdir):
            self.rc = 1
        unmount_under(self.workdir)
        shutil.rmtree(self.workdir, ignore_errors=True)
        log(f"total {time.monotonic() - self._started:.1f} s")
        return True
