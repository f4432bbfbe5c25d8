"""Fixtures: one real kilnd per test session, sandboxes made through its API.

Environment:
  KILN_BIN_DIR    kilnd, kiln, kiln-agent (default <repo>/build/bin)
  KILN_IMAGE_DIR  prebuilt base image dir (default /var/lib/kiln/images)
"""
import http.client
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from client import Client
from host import Host, runsc_of
from lib.net import free_port

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("KILN_BIN_DIR") or REPO / "build" / "bin")
IMAGE_DIR = Path(os.environ.get("KILN_IMAGE_DIR") or "/var/lib/kiln/images")
STARTUP_TIMEOUT = 120  # seconds; kilnd may build the base image first

_log_path = None  # kilnd's log, printed at the end of a failed run
_notes = []  # shutdown problems, printed in the summary
_started = []  # every Daemon start_kilnd made, so a failed test can show its own logs


def pytest_configure(config):
    config.addinivalue_line("markers", "hostile: slow hostile-workload tests (deselect with -m 'not hostile')")
    config.addinivalue_line(
        "markers", "serial: runs alone (make test runs these after the parallel part): it times a "
                   "neighbour, steps the host's clock or compares host-wide state")
    config.addinivalue_line("markers", "languages: SandboxFusion's full language matrix "
                            "(make sandboxfusion-languages; not in make test)")
    config.addinivalue_line("markers", "fs_mib(n): test_faults_disk.py's loop file system size")
    # pytest-xdist registers it only when loaded; a plain `pytest file.py` run warns without this.
    config.addinivalue_line("markers", "xdist_group(name): tests sharing one xdist worker")
    # Figures of a neighbour's exec during each attack (attacks.py), written by whichever
    # process runs the attack (an xdist worker inherits the path) and shown in the summary.
    if not hasattr(config, "workerinput") and "KILN_ATTACK_FIGURES" not in os.environ:
        fd, path = tempfile.mkstemp(prefix="kiln-attack-figures-", suffix=".jsonl")
        os.close(fd)
        os.environ["KILN_ATTACK_FIGURES"] = path
        config._kiln_attack_figures = path


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (make test's `--dist loadgroup`), a module's tests stay on one
    worker, in order: module fixtures (a kilnd, a registry, a built image) are made once, and
    tests that follow "the test before" see it. A module's own xdist_group mark (modules that
    share a host resource: the test hosts' namespace, sdk/js's node_modules) wins."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    # xdist hands groups out in collection order, so the longest go first and
    # the short ones fill in at the end, instead of one long group running
    # alone on a worker while the others idle (the part's last 90 s did).
    first = {name: rank for rank, name in enumerate(LONGEST_GROUPS)}
    rank = {id(item): first.get(_group_of(item), len(first)) for item in items}
    items.sort(key=lambda item: rank[id(item)])  # stable: each group keeps its order


# The slowest groups of the parallel part, slowest first (make test's
# --durations, summed by group, 2026-12-07): Ray's cluster, the vendor
# clients' samples, the SDKs' and image modules. Harbor's builds start later: beside the
# others at the start they starved Runtime's layer samples past their limits (2 cores).
LONGEST_GROUPS = ("test_ray", "e2b", "sdk_js", "test_withruntime_layers", "test_withruntime_client",
                  "test_images", "test_pause", "test_watches", "test_interpreter", "test_faults_disk", "test_images_base",
                  "test_control_plane", "test_pandastack", "nethosts")


def _group_of(item):
    mark = item.get_closest_marker("xdist_group")
    return (mark.kwargs.get("name") or mark.args[0]) if mark else item.module.__name__


_started_mark = pytest.StashKey[int]()
_shared_log_mark = pytest.StashKey[int]()


def _without_requests(lines):
    return [x for x in lines if '"event":"http.request"' not in x]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_started_mark] = len(_started)
    item.stash[_shared_log_mark] = _log_path.stat().st_size if _log_path and _log_path.exists() else 0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report carries the log of each kilnd started for it
    (the fixtures delete those logs at teardown, after this runs)."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    if _log_path and _log_path.exists():
        with open(_log_path, "rb") as f:
            f.seek(item.stash.get(_shared_log_mark, 0))
            during = _without_requests(f.read().decode(errors="replace").splitlines())
        report.sections.append((f"shared kilnd log {_log_path} during this test (requests left out)",
                                "\n".join(during[-80:])))
    for d in _started[item.stash.get(_started_mark, len(_started)):]:
        if d.log_path.exists() and d.log_path != _log_path:
            report.sections.append((f"kilnd log {d.log_path} (last 80 lines, requests left out)",
                                    d.log_tail(80, skip_requests=True)))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    path = getattr(config, "_kiln_attack_figures", None)
    if path and os.path.exists(path):
        figures = [line for line in Path(path).read_text().splitlines() if line.strip()]
        if figures:
            terminalreporter.section("figures of each attack: a neighbour's exec p50 (idle / during, "
                                     "ms), or kilnd's RSS (MiB) and threads (reach-in attacks)")
            for line in figures:
                terminalreporter.write_line(("REACH-IN " if '"rssGrowthMiB"' in line else "NEIGHBOUR ") + line)
        os.unlink(path)
    for note in _notes:
        terminalreporter.write_line(f"kilnd: {note}", red=True)
    if (exitstatus != 0 or _notes) and _log_path and _log_path.exists():
        lines = _without_requests(_log_path.read_text(errors="replace").splitlines())
        terminalreporter.section(f"shared kilnd log ({_log_path}, last 150 lines, requests left out)")
        for line in lines[-150:]:
            terminalreporter.write_line(line)


class Daemon:
    def __init__(self, url, state_dir, proc, log_path):
        self.url, self.state_dir, self.proc, self.log_path = url, Path(state_dir), proc, log_path

    def alive(self):
        return self.proc.poll() is None

    def log_tail(self, n=60, skip_requests=False):
        lines = self.log_path.read_text(errors="replace").splitlines()
        if skip_requests:
            lines = _without_requests(lines)
        return "\n".join(lines[-n:])


# The tests' registries run on this machine's loopback (oci.py), which kilnd
# pulls from only when told to (--allow-registry); test_attack_tenant.py
# starts kilnds without it.
LOOPBACK_REGISTRIES = ("--allow-registry", "127.0.0.1", "--allow-registry", "localhost")


def start_kilnd(state_dir, *extra_args, port=None, log_path=None, loopback_registries=True, env=None,
                netns=None, address="127.0.0.1"):
    """Starts a kilnd on `state_dir` and waits until it is healthy. Returns a
    Daemon with its admin key; raises RuntimeError if it does not come up.
    `netns`: a network namespace (`ip netns`) to run it in, listening on `address`."""
    port = port or free_port()
    log_path = Path(log_path or str(state_dir) + ".log")
    log = open(log_path, "ab")
    registries = LOOPBACK_REGISTRIES if loopback_registries else ()
    wrap = ["ip", "netns", "exec", netns] if netns else []
    # A sanitized kilnd keeps freed memory in ASan's quarantine (256 MiB by default), which
    # would hide what the tests measure of its RSS; 16 MiB still catches a use after free.
    env = dict(os.environ if env is None else env)
    if "quarantine_size_mb" not in env.get("ASAN_OPTIONS", ""):
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "quarantine_size_mb=16"]))
    proc = subprocess.Popen(
        [*wrap, str(BIN_DIR / "kilnd"), "--listen", f"{address}:{port}", "--state-dir", str(state_dir),
         "--image-dir", str(IMAGE_DIR), *registries, *extra_args], env=env,
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    d = Daemon(f"http://{address}:{port}", state_dir, proc, log_path)
    _started.append(d)
    probe = Client(d.url)
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        if not d.alive():
            raise RuntimeError(f"kilnd exited with {proc.returncode} during startup:\n{d.log_tail()}")
        try:
            if probe.health(timeout=2).status == 200:
                break
        except (OSError, http.client.HTTPException):
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"kilnd not healthy after {STARTUP_TIMEOUT}s:\n{d.log_tail()}")
        time.sleep(0.2)
    d.admin_key = (Path(state_dir) / "admin.key").read_text().strip()
    return d


def stop_kilnd(d, timeout=60):
    """SIGTERM, then wait; returns the exit status (kills it on a timeout)."""
    d.proc.send_signal(signal.SIGTERM)
    try:
        return d.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        d.proc.kill()
        d.proc.wait()
        return None


@pytest.fixture(scope="session")
def kilnd(request):
    global _log_path
    for b in ("kilnd", "kiln", "kiln-agent"):
        if not (BIN_DIR / b).exists():
            pytest.exit(f"{BIN_DIR / b} not found: build kiln first (or set KILN_BIN_DIR)", returncode=3)
    state_dir = tempfile.mkdtemp(prefix="kiln-it-", dir="/tmp")
    _log_path = Path(state_dir + ".log")
    try:
        d = start_kilnd(state_dir, log_path=_log_path)
    except RuntimeError as e:
        pytest.exit(str(e), returncode=3)
    proc = d.proc
    api = Client(d.url, key=d.admin_key)
    yield d
    # Remove what the tests left behind, then stop the daemon.
    try:
        listed = api.get("/v1/sandboxes", query={"includeStopped": True, "limit": 500}).json()
        for s in listed.get("data", []):
            api.request("DELETE", f"/v1/sandboxes/{s['id']}")
    except Exception:  # noqa: BLE001 -- teardown is best effort
        pass
    if stop_kilnd(d) is None:
        _notes.append("did not exit within 60 s of SIGTERM; killed")
    if proc.returncode != 0:
        _notes.append(f"exited with status {proc.returncode} after SIGTERM")
    if request.session.testsfailed or _notes:
        _notes.append(f"state dir kept: {state_dir}")
    else:
        shutil.rmtree(state_dir, ignore_errors=True)
        _log_path.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def api(kilnd):
    return Client(kilnd.url, key=kilnd.admin_key)


@pytest.fixture(scope="session")
def image_dir(kilnd):
    return IMAGE_DIR


@pytest.fixture(scope="session")
def bin_dir(kilnd):
    return BIN_DIR


@pytest.fixture(scope="session")
def host(kilnd):
    return Host(kilnd.state_dir, runsc_of(BIN_DIR / "kilnd"))


class Sandboxes:
    """Creates sandboxes and deletes them when the owning fixture ends."""

    def __init__(self, api):
        self.api, self.ids = api, []

    def create(self, **fields):
        info = self.api.create(**fields)
        self.ids.append(info["id"])
        assert info["state"] == "running", f"new sandbox not running: {info!r}"
        return info

    def close(self):
        for sid in self.ids:
            try:
                self.api.request("DELETE", f"/v1/sandboxes/{sid}")
            except OSError:
                pass


@pytest.fixture
def sandboxes(api):
    """Fresh sandboxes for one test: `sandboxes.create(**fields)`."""
    pool = Sandboxes(api)
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def sandbox(api):
    """One default sandbox shared by the tests of a module (SandboxInfo)."""
    pool = Sandboxes(api)
    yield pool.create()
    pool.close()


@pytest.fixture(scope="module")
def sid(sandbox):
    return sandbox["id"]
