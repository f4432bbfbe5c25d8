"""The TypeScript SDK (sdk/js) against a real kilnd.

Builds the SDK once (`npm ci`, `npx tsc`, and tsc for the TypeScript test),
then runs each node test script in sdk/js/test (not test/unit/, which needs
no daemon and runs in `make unit`) with KILN_API_URL /
KILN_API_KEY pointing at the session's daemon, the CLI (`kiln-js sandbox run`)
and capacity waiting against a second, small daemon filled and freed from
here. Needs Node >= 20 (`node` on PATH, or KILN_NODE) and npm with access to
the npm registry; see sdk/js/README.md for installing them on Debian 12.
"""
import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from client import Client
from conftest import REPO, start_kilnd, stop_kilnd

# These modules build sdk/js (npm ci, tsc) in place: one worker runs them all.
pytestmark = pytest.mark.xdist_group("sdk_js")

SDK = REPO / "sdk" / "js"
NODE_MAJOR_MIN = 20
SCRIPTS = sorted(p.name for p in (SDK / "test").glob("*.test.mjs"))
TS_SCRIPTS = sorted(p.name.replace(".ts", ".js") for p in (SDK / "test" / "ts").glob("*.test.ts"))


def _find_node():
    node = os.environ.get("KILN_NODE") or shutil.which("node")
    if not node:
        pytest.fail("node not found: the JS SDK tests need Node >= 20 on PATH (or KILN_NODE); "
                    "sdk/js/README.md says how to install it on Debian 12", pytrace=False)
    if not os.access(node, os.X_OK):
        pytest.fail(f"KILN_NODE={node} is not an executable", pytrace=False)
    out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    m = re.match(r"v(\d+)\.", out.stdout.strip())
    if out.returncode != 0 or not m or int(m.group(1)) < NODE_MAJOR_MIN:
        pytest.fail(f"{node} is {out.stdout.strip() or out.stderr.strip()!r}; the JS SDK needs Node >= "
                    f"{NODE_MAJOR_MIN} (sdk/js/README.md says how to install it on Debian 12)", pytrace=False)
    return node


def _env(node, url=None, key=None):
    env = {k: v for k, v in os.environ.items()
           if k not in ("RUNTIME_API_URL", "RUNTIME_API_KEY", "KILN_ADMIN_KEY_FILE", "NODE_OPTIONS")}
    # The node found first, so npm and npx run under it too.
    env["PATH"] = str(Path(node).resolve().parent) + os.pathsep + env.get("PATH", "")
    if url:
        env["KILN_API_URL"] = url
    if key:
        env["KILN_API_KEY"] = key
    return env


def _run(argv, env, timeout, cwd=SDK):
    try:
        return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(map(str, argv))} did not finish within {timeout} s\n"
                    f"{(e.stdout or b'')[-4000:]!r}\n{(e.stderr or b'')[-4000:]!r}")


def _show(r):
    return f"exit {r.returncode}\n--- stdout ---\n{r.stdout[-6000:]}\n--- stderr ---\n{r.stderr[-6000:]}"


@pytest.fixture(scope="module")
def node():
    return _find_node()


@pytest.fixture(scope="module")
def built(node):
    """npm ci + tsc (the SDK into dist/, the TypeScript tests into dist-test/)."""
    env = _env(node)
    npm = shutil.which("npm", path=env["PATH"])
    npx = shutil.which("npx", path=env["PATH"])
    if not npm or not npx:
        pytest.fail("npm/npx not found next to node or on PATH (sdk/js/README.md)", pytrace=False)
    for argv, timeout in (([npm, "ci", "--no-audit", "--no-fund"], 600),
                          ([npx, "--no-install", "tsc"], 300),
                          ([npx, "--no-install", "tsc", "-p", "test/tsconfig.json"], 300)):
        r = _run(argv, env, timeout)
        assert r.returncode == 0, f"{' '.join(argv)} failed\n{_show(r)}"
    assert (SDK / "dist" / "index.js").exists() and (SDK / "dist" / "index.d.ts").exists()
    return env


def _node_test(node, built, kilnd, path, timeout=120):
    env = _env(node, kilnd.url, kilnd.admin_key)
    r = _run([node, "--test", "--test-reporter=spec", str(path)], env, timeout)
    assert r.returncode == 0, f"node --test {path.name} failed\n{_show(r)}"
    assert re.search(r"\bfail 0\b", r.stdout) and re.search(r"\bpass [1-9]", r.stdout), _show(r)


@pytest.mark.parametrize("script", SCRIPTS)
def test_node_script(node, built, kilnd, script):
    _node_test(node, built, kilnd, SDK / "test" / script)


@pytest.mark.parametrize("script", TS_SCRIPTS)
def test_typescript_script(node, built, kilnd, script):
    """Tests written in TypeScript (`await using`, which Node 20 cannot parse), compiled by tsc."""
    _node_test(node, built, kilnd, SDK / "dist-test" / script)


def _running_ids(api):
    return {s["id"] for s in api.get("/v1/sandboxes", query={"state": "running", "limit": 500}).json()["data"]}


def test_cli_sandbox_run_prints_output_and_exits_with_the_command_code(node, built, kilnd, api):
    pkg = json.loads((SDK / "package.json").read_text())
    assert pkg["bin"]["kiln-js"] == "dist/cli.js", pkg["bin"]
    cli = SDK / pkg["bin"]["kiln-js"]
    assert cli.read_text().startswith("#!/usr/bin/env node"), "the bin needs a shebang"
    env = _env(node, kilnd.url, kilnd.admin_key)
    before = _running_ids(api)

    r = _run([node, str(cli), "sandbox", "run", "--vcpu", "1", "--memory", "512", "--",
              "sh", "-c", "echo hi; exit 3"], env, 120)
    assert r.returncode == 3, _show(r)
    assert r.stdout == "hi\n", _show(r)

    r = _run([node, str(cli), "sandbox", "run", "--no-stream", "--vcpu", "1", "--memory", "512", "--",
              "python3", "-c", "import sys; print(6 * 7); print('e', file=sys.stderr)"], env, 120)
    assert (r.returncode, r.stdout, r.stderr) == (0, "42\n", "e\n"), _show(r)

    r = _run([node, str(cli), "sandbox", "run", "--timeout", "1", "--vcpu", "1", "--memory", "512", "--",
              "sleep", "30"], env, 120)
    assert r.returncode == 124, _show(r)

    # The same CLI under the public SDK's name.
    r = _run([node, str(SDK / "withruntime" / "cli.js"), "sandbox", "run", "--vcpu", "1", "--memory", "512",
              "--", "echo", "via withruntime"], env, 120)
    assert (r.returncode, r.stdout) == (0, "via withruntime\n"), _show(r)

    r = _run([node, str(cli), "sandbox", "run", "--", "true"], {**env, "KILN_API_KEY": "wrong"}, 60)
    assert r.returncode == 1 and "unauthorized" in r.stderr, _show(r)
    r = _run([node, str(cli), "sandbox", "run", "--bogus", "1", "--", "true"], env, 60)
    assert r.returncode == 2 and "--bogus" in r.stderr, _show(r)

    # Every sandbox the CLI made was stopped.
    assert _running_ids(api) - before == set()


class _Lines:
    """Lines of a child's stdout, read on a thread so waits can time out."""

    def __init__(self, proc):
        self.q, self.seen = queue.Queue(), []
        threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True).start()

    def _pump(self, stream):
        for line in stream:
            self.q.put(line)
        self.q.put(None)

    def next_json(self, timeout):
        line = self.q.get(timeout=timeout)
        if line is None:
            return None
        self.seen.append(line)
        return json.loads(line)


def test_create_waits_for_capacity_then_succeeds(node, built):
    """A daemon with room for two 512 MiB sandboxes, both taken from Python;
    the JS creates wait (in the daemon's line, then with client-side retries
    under one Idempotency-Key) and succeed once Python frees room ~2 s later."""
    state = tempfile.mkdtemp(prefix="kiln-sdkjs-cap-", dir="/tmp")
    d = start_kilnd(state, "--host-memory-mib", "1024", "--memory-overcommit", "1")
    proc = None
    try:
        api = Client(d.url, key=d.admin_key)
        held = [api.create(vcpu=1, memoryMiB=512)["id"] for _ in range(2)]
        full = api.post("/v1/sandboxes", json={"vcpu": 1, "memoryMiB": 512})
        assert full.status == 409, full
        proc = subprocess.Popen([node, str(SDK / "test" / "capacity.driver.mjs")], cwd=SDK,
                                env=_env(node, d.url, d.admin_key), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        lines = _Lines(proc)
        results = {}
        while True:
            msg = lines.next_json(timeout=90)
            if msg is None or msg.get("done"):
                break
            if "ready" in msg:
                time.sleep(2.0 if msg["ready"] == "A" else 2.5)
                api.delete(held.pop())
            elif "phase" in msg:
                results[msg["phase"]] = msg
        rc = proc.wait(timeout=60)
        err = proc.stderr.read()
        assert rc == 0, f"capacity driver failed ({rc})\n{''.join(lines.seen)}\n{err}"
        assert results["no-wait"]["refusedMs"] < 1000, results
        assert results["A"]["waitedMs"] >= 1500, results
        assert results["B"]["waitedMs"] >= 2000 and len(results["B"]["refusals"]) >= 1, results
        assert 1000 <= results["gave-up"]["afterMs"] < 5000, results
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        rc = stop_kilnd(d)
        assert rc == 0, f"the capacity daemon exited with {rc}\n{d.log_tail()}"
        shutil.rmtree(state, ignore_errors=True)
        Path(state + ".log").unlink(missing_ok=True)


def test_package_has_no_runtime_dependency_and_ignores_build_output(built):
    pkg = json.loads((SDK / "package.json").read_text())
    assert not pkg.get("dependencies"), pkg.get("dependencies")
    assert pkg["type"] == "module" and pkg["engines"]["node"] == ">=20"
    assert pkg["exports"]["."]["types"] == "./dist/index.d.ts"
    for js in (SDK / "dist").glob("*.js"):
        for spec in re.findall(r'^\s*(?:import|export)\b[^"\';]*?from\s+"([^"]+)"', js.read_text(), re.M):
            assert spec.startswith("./") or spec.startswith("node:"), f"{js.name} imports {spec}"
    ignored = (SDK / ".gitignore").read_text().split()
    assert "dist/" in ignored and "node_modules/" in ignored


def test_overhead_bench_runs(node, built, kilnd):
    """bench/overhead.mjs prints one JSON object per figure (a short run here)."""
    env = {**_env(node, kilnd.url, kilnd.admin_key), "KILN_BENCH_RUNS": "10"}
    r = _run([node, str(SDK / "bench" / "overhead.mjs")], env, 120)
    assert r.returncode == 0, _show(r)
    figures = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(figures) == 7, r.stdout
    sdk_exec = figures[0]
    assert sdk_exec["runs"] == 10 and sdk_exec["median_ms"] > 0, sdk_exec
    assert sdk_exec["tcp_connections_opened_both_loops"] <= 2, sdk_exec
