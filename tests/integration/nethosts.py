"""The integration tests' own network test hosts: the only outside hosts a
test may ever reach through kilnd's egress proxy.

    with TestHosts() as hosts:                 # root, iproute2, openssl, git
        start kilnd with --test-resolver-file hosts.resolver_file
        hosts.url("api.allowed.test", "/whoami")    -> "https://api.allowed.test/whoami"
        hosts.addr("pkgs.test")                     -> "198.51.100.10"
        hosts.hits()                                -> [{"addr", "host", "path", "method", ...}]

On start it creates
  * network namespace kilnth-<pid> with a veth pair kth<pid>h (host side,
    198.51.100.1/24) / kth<pid>n (namespace side, 198.51.100.10-13/24), lo up;
  * a test CA and one server certificate (SANs: every name below, their
    wildcards, 198.51.100.10-13), `ca_pem_path` / `ca_pem`;
  * nethosts_server.py inside the namespace: HTTP :80 and HTTPS :443 on each of
    the four addresses (routes: see nethosts_server.py);
  * a loopback "canary" HTTP server on the host at 127.0.0.1:`canary_port`
    and 127.77.0.1:80 (addresses kilnd must refuse: it records any connection);
  * the resolver file for `kilnd --test-resolver-file` (format in
    write_resolver_file below), rewritten atomically by set_names/resolve_to.

Leftovers of earlier runs whose pid is dead (namespaces kilnth-*, links kth*h,
temp dirs /tmp/kilnth-<pid>-*) are removed first. close() is idempotent and
removes everything; an atexit hook closes instances left open. One instance
per machine at a time (the addresses are fixed).
"""
import atexit
import base64
import gzip
import hashlib
import http.client
import io
import ipaddress
import json
import os
import re
import selectors
import shutil
import signal
import ssl
import subprocess
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SERVER_SCRIPT = HERE / "nethosts_server.py"
PYTHON = "/usr/bin/python3"

# TEST-NET-2. Not 203.0.113.0/24: the machines this runs on reach their package
# registries at an address in that range, and a link route over it cut them off
# for as long as the hosts were up.
HOST_ADDR = "198.51.100.1"
NS_ADDRS = ("198.51.100.10", "198.51.100.11", "198.51.100.12", "198.51.100.13")
PREFIX_LEN = 24
START_TIMEOUT = 15.0  # seconds until every server answers

DEFAULT_NAMES = {
    "pkgs.test": ["198.51.100.10"],
    "allowed.test": ["198.51.100.11"],
    "api.allowed.test": ["198.51.100.11"],
    "deep.api.allowed.test": ["198.51.100.11"],
    "blocked.allowed.test": ["198.51.100.11"],
    "other.test": ["198.51.100.12"],
    "rebind.test": ["198.51.100.13"],
    "private.test": ["127.0.0.1"],
    # One refused address (the canary's second one) and one public: only the public is dialled.
    "mixed.test": ["127.77.0.1", "198.51.100.12"],
}
# The canary also listens on port 80 of this loopback address, so that a name
# answering it (mixed.test) would be caught at the port a URL without one uses.
CANARY_ADDR_80 = "127.77.0.1"

# Certificate SANs: every default name, a wildcard under each, and the
# wildcards for the deeper allowed.test names.
CERT_NAMES = sorted(set(DEFAULT_NAMES) | {"*." + n for n in DEFAULT_NAMES})

WHEEL_NAME = "kilntestpkg-1.0-py3-none-any.whl"
NPM_NAME = "kiln-test-pkg"
NPM_TARBALL = "kiln-test-pkg-1.0.0.tgz"

_GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")
_live = {}  # id(instance) -> instance, for the atexit hook and the one-per-process rule


def _find(tool):
    path = shutil.which(tool)
    if path:
        return path
    for d in ("/usr/sbin", "/sbin", "/usr/bin", "/bin"):
        if os.access(f"{d}/{tool}", os.X_OK):
            return f"{d}/{tool}"
    return None


def test_hosts_available():
    """None if TestHosts can be created here, else the reason (for skips)."""
    if os.geteuid() != 0:
        return "network test hosts need root (network namespaces, veth)"
    for tool, pkg in (("ip", "iproute2"), ("openssl", "openssl"), ("git", "git")):
        if _find(tool) is None:
            return f"network test hosts need `{tool}` (apt-get install {pkg})"
    if not os.path.exists(PYTHON):
        return f"network test hosts need {PYTHON}"
    if not os.path.isdir("/proc/self/ns") or not os.path.exists("/proc/self/ns/net"):
        return "network test hosts need network namespaces (/proc/self/ns/net)"
    return None


test_hosts_available.__test__ = False  # not a pytest test, despite the name


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_zombie(proc_dir):
    try:
        return (proc_dir / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def write_resolver_file(path, names):
    """Writes `names` ({name: [address, ...]}) to `path` atomically.

    Format (kilnd --test-resolver-file, re-read on every lookup): one line per
    name, `name address [address ...]`, separated by single spaces; names lower
    case without a trailing dot; addresses IPv4 or IPv6 literals; `#` starts a
    comment line; blank lines are ignored. A name not in the file does not
    resolve.
    """
    lines = ["# kiln integration test resolver (tests/integration/nethosts.py)",
             "# name address [address ...]", ""]
    for name in sorted(names):
        lines.append(" ".join([name, *names[name]]))
    data = "\n".join(lines) + "\n"
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=".resolver-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _norm_name(name):
    n = str(name).strip().lower().rstrip(".")
    if not n or any(c.isspace() or c == "#" for c in n):
        raise ValueError(f"bad host name {name!r}")
    return n


def _norm_addrs(addrs):
    if isinstance(addrs, str):
        addrs = addrs.split()
    out = [str(ipaddress.ip_address(a)) for a in addrs]
    return out


class TestHosts:
    """See the module docstring. Attributes after start():

      ns, veth_host, veth_ns   namespace and link names
      host_addr, addrs         "198.51.100.1", the four namespace addresses
      dir                      temp dir (certs, www content, logs)
      ca_pem_path, ca_pem      test CA (path, PEM bytes)
      cert_path, key_path      the servers' certificate and key
      resolver_file            path of the resolver file
      canary_port              port of the host-side canary on 127.0.0.1
      wheel_path, wheel_sha256, npm_tarball_path, npm_integrity, npm_shasum
      names                    {name: [address, ...]} as in the resolver file
      started_in, closed_in    seconds start()/close() took
    """

    __test__ = False  # a helper, not a pytest test class

    def __init__(self, extra_names=()):
        self.pid = os.getpid()
        self.ns = f"kilnth-{self.pid}"
        self.veth_host = f"kth{self.pid}h"
        self.veth_ns = f"kth{self.pid}n"
        self.host_addr = HOST_ADDR
        self.addrs = NS_ADDRS
        self.extra_names = [_norm_name(n) if not n.startswith("*.") else "*." + _norm_name(n[2:])
                            for n in extra_names]
        self.names = {}
        self.dir = None
        self.resolver_file = None
        self.ca_pem_path = self.cert_path = self.key_path = None
        self.ca_pem = b""
        self.canary_port = None
        self._procs = []
        self._ns_created = False
        self._started = False
        self._closed = False
        self.started_in = self.closed_in = None
        self._ip = None

    # -- context manager -------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- public API --------------------------------------------------------------
    def start(self):
        if self._started:
            return self
        reason = test_hosts_available()
        if reason:
            raise RuntimeError(f"TestHosts: {reason}")
        for other in _live.values():
            if other.pid == self.pid and not other._closed:
                raise RuntimeError("TestHosts: another instance is already running in this process")
        self._ip = _find("ip")
        t0 = time.monotonic()
        self._started = True
        _live[id(self)] = self
        try:
            self._remove_leftovers()
            self.dir = Path(tempfile.mkdtemp(prefix=f"kilnth-{self.pid}-", dir="/tmp"))
            self._make_certs()
            self._make_content()
            self.resolver_file = str(self.dir / "resolver")
            self.names = {k: list(v) for k, v in DEFAULT_NAMES.items()}
            write_resolver_file(self.resolver_file, self.names)
            self._hits_path = self.dir / "hits.jsonl"
            self._conns_path = self.dir / "conns.jsonl"
            self._hits_path.touch()
            self._conns_path.touch()
            self._make_netns()
            listen = [f"{a}:{p}:{s}" for a in self.addrs for p, s in ((80, "http"), (443, "https"))]
            self._spawn("servers", listen, netns=True)
            canary = self._spawn("canary", ["127.0.0.1:0:http", f"{CANARY_ADDR_80}:80:http"],
                                 netns=False)
            self.canary_port = canary[0][1]
            self._wait_until_answering(t0 + START_TIMEOUT)
            self.clear_hits()
        except BaseException:
            self.close()
            raise
        self.started_in = time.monotonic() - t0
        return self

    def close(self):
        if self._closed or not self._started:
            return
        self._closed = True
        t0 = time.monotonic()
        for proc, _log in self._procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, log in self._procs:
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout:
                proc.stdout.close()
            log.close()
        self._procs = []
        if self._ns_created:
            self._kill_ns_pids(self.ns)
        self._ip_quiet("link", "del", self.veth_host)
        self._ip_quiet("netns", "del", self.ns)
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        _live.pop(id(self), None)
        self.closed_in = time.monotonic() - t0

    def addr(self, name):
        """First address of `name` in the resolver file (KeyError if absent)."""
        return self.names[_norm_name(name)][0]

    def url(self, name, path="/", https=True):
        if not path.startswith("/"):
            path = "/" + path
        return f"{'https' if https else 'http'}://{_norm_name(name)}{path}"

    def set_names(self, names, replace=False):
        """Updates the resolver file: {name: address | [address, ...] | None}.
        None (or []) removes a name; replace=True drops every name not given."""
        new = {} if replace else {k: list(v) for k, v in self.names.items()}
        for name, addrs in names.items():
            n = _norm_name(name)
            a = _norm_addrs(addrs) if addrs else []
            if a:
                new[n] = a
            else:
                new.pop(n, None)
        write_resolver_file(self.resolver_file, new)
        self.names = new

    def resolve_to(self, name, *addrs):
        """Points one name at `addrs` (no addrs: the name stops resolving)."""
        self.set_names({name: list(addrs)})

    def reset_names(self):
        """Back to the names written at start."""
        self.set_names(DEFAULT_NAMES, replace=True)

    def hits(self):
        """Requests served since the last clear_hits(), oldest first: dicts with
        addr (local address that served it; "127.0.0.1" for the canary), port,
        scheme, host (Host header, or SNI without one), sni, path, method,
        peer, t."""
        return _read_jsonl(self._hits_path)

    def connections(self):
        """TCP connections accepted since the last clear_hits() (recorded before
        any TLS handshake or request): dicts with addr, port, scheme, peer, t."""
        return _read_jsonl(self._conns_path)

    def clear_hits(self):
        for p in (self._hits_path, self._conns_path):
            os.truncate(p, 0)

    def wait_for_hits(self, pred=lambda h: True, count=1, timeout=5.0):
        """Hits matching pred once at least `count` of them are recorded (or
        whatever there is when the timeout runs out)."""
        deadline = time.monotonic() + timeout
        while True:
            got = [h for h in self.hits() if pred(h)]
            if len(got) >= count or time.monotonic() > deadline:
                return got
            time.sleep(0.02)

    def ssl_context(self):
        """A client SSLContext that trusts only the test CA."""
        return ssl.create_default_context(cadata=self.ca_pem.decode())

    # -- setup steps ---------------------------------------------------------------
    def _run(self, *argv, **kw):
        r = subprocess.run(argv, capture_output=True, text=True, **kw)
        if r.returncode != 0:
            raise RuntimeError(f"TestHosts: `{' '.join(map(str, argv))}` failed "
                               f"({r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
        return r.stdout

    def _ip_run(self, *args):
        return self._run(self._ip, *args)

    def _ip_quiet(self, *args):
        subprocess.run([self._ip or "ip", *args], capture_output=True)

    def _kill_ns_pids(self, ns):
        r = subprocess.run([self._ip, "netns", "pids", ns], capture_output=True, text=True)
        for tok in r.stdout.split():
            try:
                os.kill(int(tok), signal.SIGKILL)
            except (ValueError, ProcessLookupError):
                pass

    @staticmethod
    def _kill_orphaned_servers():
        """Kills the servers of a dead instance that are still up. The host-side
        canary is outside the namespace and exits on its own only within 0.5 s
        of its parent's death, holding 127.77.0.1:80 until then."""
        waiting = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if str(SERVER_SCRIPT).encode() not in argv or b"--parent-pid" not in argv:
                continue
            i = argv.index(b"--parent-pid")
            parent = int(argv[i + 1]) if i + 1 < len(argv) and argv[i + 1].isdigit() else 0
            if parent and _pid_alive(parent):
                continue
            try:
                os.kill(int(proc.name), signal.SIGKILL)
                waiting.append(proc)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5
        while waiting and time.monotonic() < deadline:  # until their sockets are closed
            waiting = [p for p in waiting if p.exists() and not _is_zombie(p)]
            time.sleep(0.01)

    def _remove_leftovers(self):
        mine = str(self.pid)
        for line in self._ip_run("netns", "list").splitlines():
            name = line.split()[0] if line.strip() else ""
            m = re.fullmatch(r"kilnth-(\d+)", name)
            if not m:
                continue
            pid = int(m.group(1))
            if m.group(1) != mine and _pid_alive(pid):
                raise RuntimeError(
                    f"TestHosts: namespace {name} of live process {pid} holds the test addresses; "
                    f"one instance per machine (if stale: ip netns del {name}; ip link del kth{pid}h)")
            self._kill_ns_pids(name)
            self._ip_quiet("link", "del", f"kth{pid}h")
            self._ip_quiet("netns", "del", name)
        for line in self._ip_run("-o", "link", "show").splitlines():
            m = re.match(r"\d+:\s+(kth(\d+)h)[@:]", line)
            if m and (m.group(2) == mine or not _pid_alive(int(m.group(2)))):
                self._ip_quiet("link", "del", m.group(1))
        self._kill_orphaned_servers()
        for d in Path("/tmp").glob("kilnth-*-*"):
            m = re.match(r"kilnth-(\d+)-", d.name)
            if m and d.is_dir() and (m.group(1) == mine or not _pid_alive(int(m.group(1)))):
                shutil.rmtree(d, ignore_errors=True)
        # Anything else on the host using the test subnet would steal our traffic.
        net = ipaddress.ip_network(f"{HOST_ADDR}/{PREFIX_LEN}", strict=False)
        for line in self._ip_run("-o", "-4", "addr", "show").splitlines():
            f = line.split()
            if "inet" in f:
                a = ipaddress.ip_interface(f[f.index("inet") + 1])
                if a.ip in net:
                    raise RuntimeError(f"TestHosts: {a} already configured on {f[1]}; "
                                       f"the test subnet {net} must be free")

    def _make_netns(self):
        ip, ns = self._ip, self.ns
        self._ip_run("netns", "add", ns)
        self._ns_created = True
        self._ip_run("link", "add", self.veth_host, "type", "veth", "peer", "name", self.veth_ns,
                     "netns", ns)
        self._ip_run("addr", "add", f"{HOST_ADDR}/{PREFIX_LEN}", "dev", self.veth_host)
        self._ip_run("link", "set", self.veth_host, "up")
        batch = ["link set lo up"]
        batch += [f"addr add {a}/{PREFIX_LEN} dev {self.veth_ns}" for a in self.addrs]
        batch += [f"link set {self.veth_ns} up"]
        self._run(ip, "-n", ns, "-batch", "-", input="\n".join(batch) + "\n")

    def _make_certs(self):
        d, openssl = self.dir, _find("openssl")
        ca_key, ca_pem = d / "ca.key", d / "ca.pem"
        key, csr, pem, ext = d / "server.key", d / "server.csr", d / "server.pem", d / "server.ext"
        ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")  # fast keygen
        self._run(openssl, "req", "-x509", *ec, "-keyout", ca_key, "-out", ca_pem, "-days", "30",
                  "-subj", f"/CN=kiln test CA {self.pid}",
                  "-addext", "basicConstraints=critical,CA:TRUE",
                  "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        sans = [f"DNS:{n}" for n in CERT_NAMES + sorted(set(self.extra_names) - set(CERT_NAMES))]
        sans += [f"IP:{a}" for a in self.addrs]
        ext.write_text("[v3]\n"
                       "basicConstraints=critical,CA:FALSE\n"
                       "keyUsage=critical,digitalSignature\n"
                       "extendedKeyUsage=serverAuth\n"
                       "subjectKeyIdentifier=hash\n"
                       "authorityKeyIdentifier=keyid,issuer\n"
                       f"subjectAltName={','.join(sans)}\n")
        self._run(openssl, "req", "-new", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=kiln test hosts")
        self._run(openssl, "x509", "-req", "-in", csr, "-CA", ca_pem, "-CAkey", ca_key,
                  "-CAcreateserial", "-days", "30", "-sha256", "-extfile", ext, "-extensions", "v3",
                  "-out", pem)
        self.ca_pem_path, self.cert_path, self.key_path = str(ca_pem), str(pem), str(key)
        self.ca_pem = ca_pem.read_bytes()

    def _make_content(self):
        www = self.dir / "www"
        (www / "packages").mkdir(parents=True)
        (www / "npm").mkdir()
        wheel = _build_wheel()
        self.wheel_path = str(www / "packages" / WHEEL_NAME)
        Path(self.wheel_path).write_bytes(wheel)
        self.wheel_sha256 = hashlib.sha256(wheel).hexdigest()
        tgz = _build_npm_tarball()
        self.npm_tarball_path = str(www / "npm" / NPM_TARBALL)
        Path(self.npm_tarball_path).write_bytes(tgz)
        self.npm_integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
        self.npm_shasum = hashlib.sha1(tgz).hexdigest()
        self._build_git_repo(www / "repo.git")

    def _build_git_repo(self, bare):
        git = _find("git")
        env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV_DROP}
        env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", HOME=str(self.dir),
                   GIT_AUTHOR_NAME="kiln", GIT_AUTHOR_EMAIL="kiln@example.invalid",
                   GIT_COMMITTER_NAME="kiln", GIT_COMMITTER_EMAIL="kiln@example.invalid",
                   GIT_AUTHOR_DATE="2024-01-01T00:00:00Z", GIT_COMMITTER_DATE="2024-01-01T00:00:00Z")
        work = self.dir / "repo-work"
        self._run(git, "init", "-q", "-b", "main", work, env=env)
        (work / "README").write_text("kiln test repo\n")
        self._run(git, "-C", work, "add", "README", env=env)
        self._run(git, "-C", work, "commit", "-q", "-m", "kiln test repo", env=env)
        self._run(git, "clone", "-q", "--bare", "--no-local", work, bare, env=env)
        self._run(git, "-C", bare, "update-server-info", env=env)
        shutil.rmtree(work, ignore_errors=True)

    def _spawn(self, what, listen, netns):
        argv = [PYTHON, str(SERVER_SCRIPT), "--www", str(self.dir / "www"),
                "--hits", str(self._hits_path), "--conns", str(self._conns_path),
                "--cert", self.cert_path, "--key", self.key_path, "--parent-pid", str(self.pid)]
        for spec in listen:
            argv += ["--listen", spec]
        if netns:
            argv = [self._ip, "netns", "exec", self.ns, *argv]
        log = open(self.dir / f"{what}.log", "ab")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        self._procs.append((proc, log))
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + START_TIMEOUT
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise RuntimeError(f"TestHosts: {what} not ready after {START_TIMEOUT}s"
                                   f"{self._log_tail(what)}")
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                proc.wait()
                raise RuntimeError(f"TestHosts: {what} exited with {proc.returncode} during start"
                                   f"{self._log_tail(what)}")
            line += chunk
        sel.close()
        if not line.startswith(b"READY "):
            raise RuntimeError(f"TestHosts: {what} said {line!r}{self._log_tail(what)}")
        return json.loads(line[6:])

    def _log_tail(self, what):
        try:
            text = (self.dir / f"{what}.log").read_text(errors="replace").strip()
        except OSError:
            return ""
        return ":\n" + "\n".join(text.splitlines()[-20:]) if text else ""

    def _wait_until_answering(self, deadline):
        targets = [(a, 80, False) for a in self.addrs] + [(a, 443, True) for a in self.addrs]
        targets.append(("127.0.0.1", self.canary_port, False))
        ctx = self.ssl_context()
        for addr, port, tls in targets:
            last = None
            while True:
                for proc, _ in self._procs:
                    if proc.poll() is not None:
                        raise RuntimeError(f"TestHosts: a server exited with {proc.returncode}"
                                           f"{self._log_tail('servers')}{self._log_tail('canary')}")
                try:
                    if tls:
                        c = http.client.HTTPSConnection(addr, port, timeout=1, context=ctx)
                    else:
                        c = http.client.HTTPConnection(addr, port, timeout=1)
                    c.request("GET", "/whoami", headers={"Host": "startup.probe"})
                    r = c.getresponse()
                    body = r.read().decode()
                    c.close()
                    if r.status == 200 and body.split()[0] == addr:
                        break
                    last = f"status {r.status}, body {body!r}"
                except (OSError, http.client.HTTPException) as e:
                    last = repr(e)
                if time.monotonic() > deadline:
                    raise RuntimeError(f"TestHosts: {'https' if tls else 'http'}://{addr}:{port} "
                                       f"not answering after {START_TIMEOUT}s (last: {last})"
                                       f"{self._log_tail('servers')}")
                time.sleep(0.05)


def _read_jsonl(path):
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for line in data.split(b"\n"):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line being written right now
    return out


# -- package artifacts -------------------------------------------------------------
_EPOCH = (2024, 1, 1, 0, 0, 0)


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _build_wheel():
    """kilntestpkg 1.0: kilntestpkg/__init__.py (VALUE = 42), reproducible."""
    dist = "kilntestpkg-1.0.dist-info"
    files = [
        ("kilntestpkg/__init__.py", b"VALUE = 42\n"),
        (f"{dist}/METADATA", b"Metadata-Version: 2.1\nName: kilntestpkg\nVersion: 1.0\n"
                             b"Summary: kiln integration test package\n"),
        (f"{dist}/WHEEL", b"Wheel-Version: 1.0\nGenerator: kiln-nethosts (1.0)\n"
                          b"Root-Is-Purelib: true\nTag: py3-none-any\n"),
        (f"{dist}/top_level.txt", b"kilntestpkg\n"),
    ]
    record = "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, d in files) + f"{dist}/RECORD,,\n"
    files.append((f"{dist}/RECORD", record.encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            info = zipfile.ZipInfo(name, _EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return buf.getvalue()


def _build_npm_tarball():
    """kiln-test-pkg 1.0.0: package/package.json, package/index.js, reproducible."""
    files = [
        ("package/package.json", json.dumps({"name": NPM_NAME, "version": "1.0.0",
                                              "description": "kiln test package",
                                              "main": "index.js", "license": "MIT"},
                                             indent=2).encode() + b"\n"),
        ("package/index.js", b"module.exports = 42;\n"),
    ]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 1704067200
            info.uname = info.gname = ""
            t.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


@atexit.register
def _close_all():
    for inst in list(_live.values()):
        try:
            inst.close()
        except Exception:  # noqa: BLE001 -- best effort at exit
            pass
