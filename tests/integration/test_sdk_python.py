"""Python SDK (sdk/python, package `kiln`) against a real kilnd.

The SDK is imported from the source tree (no install). Every call goes to the
session's kilnd (or, for capacity, to one of this module's own); no mocks.
Its tests without a daemon are in sdk/python/tests.
"""
import asyncio
import hashlib
import http.client
import json
import os
import socket
import sys
import threading
import time
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

from client import Client
from conftest import stop_kilnd
from lib.kilnd import OwnKilnds

SDK_DIR = Path(__file__).resolve().parents[2] / "sdk" / "python"
sys.path.insert(0, str(SDK_DIR))

# scripts/setup.sh installs gymnasium here, outside the system packages; it
# must be importable before kiln.gym is first imported.
sys.path.append("/opt/kiln/pydeps")
import kiln  # noqa: E402
import kiln.gym  # noqa: E402
import kiln.rewards  # noqa: E402
from kiln import AsyncRuntime, Runtime, Sandbox  # noqa: E402

SMALL = {"vcpu": 1, "memory_mib": 256}


@pytest.fixture(autouse=True)
def sdk_env(monkeypatch, kilnd):
    """Points the SDK at the session's kilnd through the environment only."""
    for name in ("RUNTIME_API_URL", "RUNTIME_API_KEY", "KILN_API_URL", "KILN_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KILN_API_URL", kilnd.url)
    monkeypatch.setenv("KILN_API_KEY", kilnd.admin_key)
    monkeypatch.setenv("KILN_ADMIN_KEY_FILE", "/nonexistent/admin.key")


@pytest.fixture
def rt():
    runtime = Runtime()
    yield runtime
    runtime.close()


@pytest.fixture(scope="module")
def shared(kilnd):
    """One sandbox for the read-mostly tests of this module."""
    runtime = Runtime(kilnd.url, kilnd.admin_key)
    sbx = runtime.sandboxes.create(**SMALL, labels={"suite": "sdk-shared"})
    yield sbx
    sbx.delete()
    runtime.close()


def _ts(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# --- configuration and keys ----------------------------------------------------


def test_environment_selects_daemon_and_key(rt, kilnd, monkeypatch):
    assert rt.api_url == kilnd.url
    assert rt.health()["ok"] is True
    assert isinstance(rt.sandboxes.list(), list)
    # The public API's names work when kiln's are unset.
    monkeypatch.delenv("KILN_API_URL")
    monkeypatch.delenv("KILN_API_KEY")
    monkeypatch.setenv("RUNTIME_API_URL", kilnd.url)
    monkeypatch.setenv("RUNTIME_API_KEY", kilnd.admin_key)
    with Runtime() as other:
        assert other.api_url == kilnd.url
        other.sandboxes.list()
    # With no key anywhere, the local admin key file is read (KILN_ADMIN_KEY_FILE).
    monkeypatch.delenv("RUNTIME_API_KEY")
    monkeypatch.setenv("KILN_ADMIN_KEY_FILE", str(Path(kilnd.state_dir) / "admin.key"))
    with Runtime() as local:
        local.sandboxes.list()
    # Nothing set at all: the default daemon address.
    monkeypatch.delenv("RUNTIME_API_URL")
    assert kiln.config.resolve() == ("http://127.0.0.1:7070", kilnd.admin_key)


def test_explicit_key_wins_and_a_wrong_key_is_auth_error(kilnd, monkeypatch):
    with Runtime(api_key="not-a-real-key") as wrong:
        with pytest.raises(kiln.AuthError) as err:
            wrong.sandboxes.list()
    e = err.value
    assert isinstance(e, kiln.AuthenticationError) and isinstance(e, kiln.KilnError)
    assert (e.code, e.status) == ("unauthorized", 401) and e.request_id and e.message
    monkeypatch.setenv("KILN_API_KEY", "also-wrong")
    with Runtime(api_key=kilnd.admin_key) as right:
        right.sandboxes.list()
    # The public client's order: the key first, then the URL (a key is never a URL).
    with pytest.raises(ValueError):
        Runtime(kilnd.admin_key, "kiln-key-in-the-url-slot")
    with Runtime(kilnd.admin_key, kilnd.url) as ordered:
        ordered.sandboxes.list()


# --- sandboxes, exec -----------------------------------------------------------


def test_create_get_list_extend_stop(rt):
    sbx = rt.sandboxes.create(**SMALL, timeout_seconds=120, labels={"suite": "sdk-life"})
    try:
        assert sbx.state == "running" and sbx.info["memoryMiB"] == 256 and sbx.info["vcpu"] == 1
        assert rt.sandboxes.get(sbx.id).info["labels"] == {"suite": "sdk-life"}
        assert [s.id for s in rt.sandboxes.list(labels={"suite": "sdk-life"})] == [sbx.id]
        assert [s.id for s in rt.sandboxes.list(labels={"suite": "sdk-life"}, state="running")] == [sbx.id]
        before = _ts(sbx.info["expiresAt"])
        info = sbx.extend(600)
        assert 599 <= _ts(info["expiresAt"]) - before <= 601 and sbx.info is info
        assert sbx.stop()["state"] == "stopped" and sbx.state == "stopped"
        assert rt.sandboxes.get(sbx.id).state == "stopped"
        assert rt.sandboxes.list(labels={"suite": "sdk-life"}) == []
        assert [s.id for s in rt.sandboxes.list(labels={"suite": "sdk-life"}, include_stopped=True)] == [sbx.id]
        with pytest.raises(kiln.ConflictError) as err:
            sbx.exec("true")
        assert err.value.code == "not_running" and err.value.status == 409
    finally:
        sbx.delete()
    with pytest.raises(kiln.NotFoundError):
        rt.sandboxes.get(sbx.id)


def test_exec(shared):
    r = shared.exec("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (3, "out\n", "err\n", False)
    assert isinstance(r.duration_ms, int) and not r.stdout_truncated and not r.stderr_truncated
    assert shared.exec(["printf", "%s|", "a b", "$HOME"]).stdout == "a b|$HOME|"
    assert shared.exec("cat", stdin="piped text").stdout == "piped text"
    assert shared.exec(["od", "-An", "-tx1"], stdin=b"\x00\xff").stdout.split() == ["00", "ff"]
    assert shared.exec("echo $A-$B; pwd", env={"A": "1", "B": "2"}, cwd="/tmp").stdout == "1-2\n/tmp\n"
    slow = shared.exec("echo started; sleep 30", timeout_ms=500)
    assert slow.timed_out and slow.exit_code is None and slow.stdout == "started\n"
    flood = shared.exec("head -c 100000 /dev/zero | tr '\\0' x")
    assert flood.stdout_truncated and len(flood.stdout) == 65536
    with pytest.raises(kiln.CommandError) as err:
        shared.exec("echo nope >&2; exit 4", check=True)
    assert err.value.exit_code == 4 and err.value.code == "command_failed" and "nope" in str(err.value)
    with pytest.raises(kiln.CommandTimeoutError) as err:
        shared.exec("sleep 30", timeout_ms=300, check=True)
    assert isinstance(err.value, kiln.TimeoutError) and err.value.code == "command_timeout"
    assert shared.exec("true", check=True).ok
    # Every call above went over this thread's one keep-alive connection.
    assert shared.runtime._transport.connection_count() == 1


def test_exec_streaming(shared):
    seen = []
    r = shared.exec("for i in 1 2 3; do echo $i; sleep 0.05; done; echo e >&2", on_stdout=seen.append,
                    on_stderr=seen.append)
    assert r.exit_code == 0 and r.stdout == "1\n2\n3\n" and r.stderr == "e\n" and "".join(seen) == "1\n2\n3\ne\n"
    events = list(shared.exec_stream(["sh", "-c", "echo hi; exit 5"]))
    assert events[0]["type"] == "start" and events[-1]["type"] == "exit" and events[-1]["exitCode"] == 5
    assert "".join(e["data"] for e in events if e["type"] == "stdout") == "hi\n"


def test_spawn(shared):
    cat = shared.spawn("cat; echo done >&2", stdin="pipe")
    assert cat.state == "running" and cat.id
    assert cat.write("line 1\n") == 7
    cat.write(b"line 2\n", eof=True)
    result = cat.wait(timeout_seconds=30)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "line 1\nline 2\n", "done\n")
    sleeper = shared.spawn(["sleep", "60"])
    assert any(p["id"] == sleeper.id for p in shared.processes())
    # An answer that does not come in time is a TimeoutError (the daemon long-polls 5 s here).
    with pytest.raises(kiln.TimeoutError) as err:
        shared.runtime.request("GET", f"/v1/sandboxes/{shared.id}/processes/{sleeper.id}/output",
                               query={"cursor": 0, "waitMs": 5000}, timeout=0.5)
    assert err.value.code == "request_timeout" and isinstance(err.value, TimeoutError)
    sleeper.kill("SIGKILL")
    assert sleeper.wait(timeout_seconds=30).exit_code is None
    assert shared.process(sleeper.id).state == "killed"


# --- files -----------------------------------------------------------------------


def test_files(shared):
    f = shared.files
    assert f.write("/workspace/sdk/a.txt", "héllo\n") == {"path": "/workspace/sdk/a.txt", "size": 7}
    assert f.read_text("/workspace/sdk/a.txt") == "héllo\n"
    blob = bytes(range(256)) * 5
    f.write("/workspace/sdk/blob.bin", blob, mode=0o600)
    assert f.read_bytes("/workspace/sdk/blob.bin") == blob == f.read("/workspace/sdk/blob.bin")
    st = f.stat("/workspace/sdk/blob.bin")
    assert st["exists"] and st["size"] == 1280 and st["mode"] == "600" and st["type"] == "file"
    assert f.stat("/workspace/sdk/none") == {"exists": False, "path": "/workspace/sdk/none"}
    assert not f.exists("/workspace/sdk/none")
    assert sorted(e["name"] for e in f.list("/workspace/sdk")) == ["a.txt", "blob.bin"]
    f.mkdir("/workspace/sdk/d/e")
    f.rename("/workspace/sdk/a.txt", "/workspace/sdk/d/e/b.txt")
    assert shared.exec("cat /workspace/sdk/d/e/b.txt").stdout == "héllo\n"
    assert f.remove("/workspace/sdk/blob.bin") is True
    assert f.remove("/workspace/sdk/blob.bin") is False
    with pytest.raises(kiln.NotFoundError) as err:
        f.read("/workspace/sdk/blob.bin")
    assert err.value.code == "file_not_found" and "/workspace/sdk/blob.bin" in err.value.message
    with pytest.raises(kiln.ConflictError) as err:
        f.read("/workspace/sdk/d")
    assert err.value.code == "is_a_directory"
    assert f.remove("/workspace/sdk", recursive=True)


def test_upload_and_download(shared, tmp_path):
    src = tmp_path / "src"
    (src / "pkg" / "deep").mkdir(parents=True)
    (src / "top.txt").write_text("top\n")
    (src / "pkg" / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "pkg" / "run.sh").chmod(0o755)
    (src / "pkg" / "deep" / "data.bin").write_bytes(os.urandom(300_000))
    shared.files.upload(src, "/workspace/up")
    assert shared.exec("/workspace/up/pkg/run.sh").stdout == "ran\n"
    assert shared.exec("stat -c %U /workspace/up/top.txt").stdout == "user\n"
    back = tmp_path / "back"
    assert shared.files.download("/workspace/up", back) == str(back)
    for rel in ("top.txt", "pkg/run.sh", "pkg/deep/data.bin"):
        assert (back / rel).read_bytes() == (src / rel).read_bytes(), rel
    assert os.access(back / "pkg" / "run.sh", os.X_OK)
    # Single files both ways, keeping the permission bits.
    shared.files.upload(src / "pkg" / "run.sh", "/workspace/one/run.sh")
    assert shared.files.stat("/workspace/one/run.sh")["mode"] == "755"
    shared.files.download("/workspace/one/run.sh", tmp_path / "one.sh")
    assert (tmp_path / "one.sh").read_text() == "#!/bin/sh\necho ran\n"
    # An archive entry that escapes the target is refused.
    shared.exec("mkdir -p /workspace/evil && ln -s / /workspace/evil/root && ln -s .. /workspace/evil/up", check=True)
    with pytest.raises(kiln.KilnError) as err:
        shared.files.download("/workspace/evil", tmp_path / "evil")
    assert err.value.code == "unsafe_archive"
    shared.exec("rm -rf /workspace/up /workspace/one /workspace/evil", check=True)


# --- snapshots and forks ---------------------------------------------------------------


def test_snapshot_fork_and_copies(rt):
    with rt.sandboxes.create(**SMALL) as src:
        src.files.write("/workspace/state.txt", "before\n")
        src.spawn(["python3", "-c", "import time\nwhile True: time.sleep(1)"])
        snap = src.snapshot(name="sdk-snap", retention_days=1)
        assert snap["id"] and snap["state"] == "ready" and snap["sourceSandboxId"] == src.id
        assert snap["retentionDays"] == 1 and rt.snapshots.get(snap["id"])["name"] == "sdk-snap"
        assert src.exec("cat /workspace/state.txt").stdout == "before\n"  # the source keeps running
        with rt.sandboxes.create(snapshot=snap["id"]) as copy:
            assert copy.id != src.id and copy.exec("cat /workspace/state.txt").stdout == "before\n"
            assert "python3" in copy.exec("ps -eo args").stdout
        copies = src.fork(count=2, labels={"suite": "sdk-fork"})
        try:
            assert isinstance(copies, list) and len(copies) == 2
            assert all(isinstance(c, Sandbox) and c.state == "running" for c in copies)
            for c in copies:
                assert c.exec("cat /workspace/state.txt").stdout == "before\n"
            copies[0].files.write("/workspace/state.txt", "changed\n")
            assert copies[1].exec("cat /workspace/state.txt").stdout == "before\n"
        finally:
            for c in copies:
                c.stop()
        rt.snapshots.delete(snap["id"])
        with pytest.raises(kiln.NotFoundError) as err:
            rt.snapshots.get(snap["id"])
        assert err.value.code == "snapshot_not_found"


# --- context managers, errors --------------------------------------------------------


def test_with_stops_the_sandbox_even_on_exception(rt):
    with pytest.raises(ValueError, match="inside the block"):
        with rt.sandboxes.create(**SMALL) as sbx:
            assert sbx.exec("true").ok
            raise ValueError("inside the block")
    assert rt.sandboxes.get(sbx.id).state == "stopped"
    with Sandbox.create(**SMALL) as other:  # the default client, from the environment
        sid = other.id
        other.stop()  # already stopped on exit: leaving must not fail
    assert rt.sandboxes.get(sid).state == "stopped"


def test_errors_map_from_codes(rt, shared):
    with pytest.raises(kiln.NotFoundError) as err:
        rt.sandboxes.get("00000000-0000-4000-8000-000000000000")
    e = err.value
    assert (e.code, e.status) == ("not_found", 404) and e.request_id and e.message
    assert str(e).startswith("[not_found 404]")
    with pytest.raises(kiln.InvalidRequestError) as err:
        rt.sandboxes.create(vcpu=1, memory_mib=64)
    e = err.value
    assert e.code == "invalid_request" and e.status == 400
    assert "body.memoryMiB" in [i["path"] for i in e.details["issues"]]
    with pytest.raises(TypeError, match="memory_mib"):
        rt.sandboxes.create(memory_mb=256)  # misspelt: refused before any request
    with pytest.raises(kiln.NotFoundError) as err:
        rt.request("GET", "/v1/no-such-route")
    assert err.value.code == "route_not_found"
    with pytest.raises(kiln.ConflictError) as err:
        shared.files.write("/workspace", "x")
    assert err.value.code == "is_a_directory"
    # Idempotency: the same key and body answer the first sandbox again; another body is refused.
    first = rt.sandboxes.create(**SMALL, idempotency_key="sdk-idem-1")
    try:
        again = rt.sandboxes.create(**SMALL, idempotency_key="sdk-idem-1")
        assert again.id == first.id and again.info.get("replayed") is True
        with pytest.raises(kiln.InvalidRequestError) as err:
            rt.sandboxes.create(vcpu=1, memory_mib=512, idempotency_key="sdk-idem-1")
        assert err.value.code == "idempotency_key_reused" and err.value.status == 422
    finally:
        first.delete()
    with pytest.raises(ValueError):
        rt.sandboxes.create(**SMALL, idempotency_key="-bad key-")


def test_network_rules_and_log(rt):
    """sbx.network: get / set / off / on / log against the daemon's egress proxy."""
    with rt.sandboxes.create(**SMALL, network={"internet": True, "allow": ["pkgs.test"]}) as sbx:
        p = sbx.network.get()
        assert (p["internet"], p["allow"], p["deny"], p["version"]) == (True, ["pkgs.test"], [], 1)
        p = sbx.network.set(internet=True, allow=["*.example.test"], deny=["bad.example.test"])
        assert (p["allow"], p["deny"], p["version"]) == (["*.example.test"], ["bad.example.test"], 2)
        assert sbx.network.off()["internet"] is False
        # Internet off: curl gets the proxy's 403 at once, and the log says why.
        code = sbx.exec("curl -s -o /dev/null -w '%{http_code}' http://example.test/").stdout
        assert code == "403"
        [entry] = sbx.network.log()
        assert (entry["host"], entry["port"], entry["verdict"], entry["method"]) == \
            ("example.test", 80, "internet-off", "GET")
        assert sbx.network.on()["version"] == 4
        with pytest.raises(kiln.InvalidRequestError) as err:
            sbx.network.set(internet=True, allow=["10.0.0.0/8"])
        assert err.value.details["issues"][0]["path"] == "body.allow[0]"
        with pytest.raises(TypeError):
            sbx.network.set(allow=["example.com"])  # `internet` is required
        copy = sbx.fork(network={"internet": False})
        try:
            assert copy.network.get()["internet"] is False and sbx.network.get()["internet"] is True
        finally:
            copy.stop()


# --- capacity ------------------------------------------------------------------------


@pytest.fixture
def own_kilnd():
    """start(*args, state=None, port=None) -> a kilnd of this test's own, stopped at the end."""
    kilnds = OwnKilnds("kiln-sdk-")
    yield kilnds
    kilnds.close()


def _free_later(sbx, delay):
    t = threading.Timer(delay, sbx.stop)
    t.start()
    return t


def test_create_waits_for_capacity_with_the_same_idempotency_key(own_kilnd):
    small_kilnd = own_kilnd("--host-memory-mib", "1024", "--memory-overcommit", "1")  # room for two
    body = {"vcpu": 1, "memory_mib": 512}
    with Runtime(small_kilnd.url, small_kilnd.admin_key, wait_for_capacity=60) as rt:
        a, b = rt.sandboxes.create(**body), rt.sandboxes.create(**body)
        with pytest.raises(kiln.CapacityError) as err:
            rt.sandboxes.create(**body, wait_for_capacity=0)
        e = err.value
        assert isinstance(e, kiln.ConflictError) and e.code == "no_capacity" and e.status == 409
        assert e.retry_after_ms and e.retry_after_ms >= 1000 and e.retryable

        # Short waits in the daemon's line (1 s each) so the SDK must retry; room comes after 2 s.
        refusals = []
        timer = _free_later(a, 2.0)
        t0 = time.monotonic()
        c = rt.sandboxes.create(**body, prefer_wait=1, on_capacity_wait=lambda err, s: refusals.append(err))
        timer.join()
        assert c.state == "running" and time.monotonic() - t0 >= 1.5
        assert refusals and all(r.code == "no_capacity" for r in refusals)
        keys = {r.idempotency_key for r in refusals}
        assert len(keys) == 1 and None not in keys
        # The key of those retries is the key of the sandbox that started: it replays.
        raw = Client(small_kilnd.url, key=small_kilnd.admin_key)
        replay = raw.ok("POST", "/v1/sandboxes", json={"vcpu": 1, "memoryMiB": 512},
                        headers={"Idempotency-Key": keys.pop()})
        assert replay["id"] == c.id and replay["replayed"] is True

        # The default waits in the daemon's line (Prefer: wait=N) and needs no retry.
        refusals.clear()
        timer = _free_later(b, 2.0)
        d = rt.sandboxes.create(**body, on_capacity_wait=lambda err, s: refusals.append(err))
        timer.join()
        assert d.state == "running" and refusals == []
        c.delete()
        d.delete()


def test_retries_only_where_safe_across_a_daemon_restart(own_kilnd):
    d = own_kilnd()
    port = int(d.url.rsplit(":", 1)[1])
    with Runtime(d.url, d.admin_key, max_retries=6) as rt:
        sbx = rt.sandboxes.create(**SMALL)
        assert sbx.exec("true").ok
        stop_kilnd(d)
        # An exec carries no Idempotency-Key: a refused connection fails at once, unretried.
        t0 = time.monotonic()
        with pytest.raises(kiln.ConnectionError) as err:
            sbx.exec("true")
        assert err.value.code == "connection_error" and err.value.status == 0
        assert isinstance(err.value, ConnectionError) and time.monotonic() - t0 < 0.5
        # A GET is retried with backoff until the daemon is back on the same port.
        restarted = []
        thread = threading.Thread(target=lambda: restarted.append(own_kilnd(state=str(d.state_dir), port=port)))
        thread.start()
        try:
            listed = rt.sandboxes.list(include_stopped=True)
        finally:
            thread.join()
        assert restarted and sbx.id in [s.id for s in listed]
        assert rt.sandboxes.get(sbx.id).info["stopReason"] == "host_stopped"
        # The keep-alive connection the old daemon closed is replaced without an error.
        with rt.sandboxes.create(**SMALL) as again:
            assert again.exec("echo back").stdout == "back\n"


# --- asyncio -------------------------------------------------------------------------------


def test_async_runtime(kilnd):
    async def main():
        async with AsyncRuntime() as rt:
            async with rt.sandboxes.create(**SMALL) as sbx:
                assert sbx.state == "running"
                results = await asyncio.gather(*(sbx.exec(f"echo {i}") for i in range(6)))
                assert [r.stdout for r in results] == [f"{i}\n" for i in range(6)]
                await sbx.files.write("/workspace/a.txt", "async\n")
                assert await sbx.files.read_text("/workspace/a.txt") == "async\n"
                proc = await sbx.spawn("echo bg")
                assert (await proc.wait()).stdout == "bg\n"
                events = [e async for e in sbx.exec_stream("echo s")]
                assert events[-1]["type"] == "exit"
                with pytest.raises(kiln.NotFoundError):
                    await sbx.files.read("/workspace/none")
            assert (await rt.sandboxes.get(sbx.id)).state == "stopped"
            other = await rt.sandboxes.create(**SMALL)
            with pytest.raises(RuntimeError, match="boom"):
                async with other:
                    raise RuntimeError("boom")
            assert (await other.refresh())["state"] == "stopped"
            with pytest.raises(kiln.NotFoundError):
                await rt.sandboxes.get("00000000-0000-4000-8000-000000000000")

    asyncio.run(main())


# --- ports, previews, interpreter, watches -----------------------------------------------------

PORT_SERVER = (Path(__file__).resolve().parent / "port_server.py").read_text()
HTTP_PORT, ECHO_PORT = 8000, 9000


@pytest.fixture(scope="module")
def served(kilnd):
    """A sandbox running tests/integration/port_server.py (HTTP on 8000, TCP echo on 9000)."""
    runtime = Runtime(kilnd.url, kilnd.admin_key)
    sbx = runtime.sandboxes.create(**SMALL, labels={"suite": "sdk-ports"})
    sbx.files.write("/tmp/port_server.py", PORT_SERVER)
    sbx.spawn(["python3", "/tmp/port_server.py", str(HTTP_PORT), str(ECHO_PORT)])
    deadline = time.monotonic() + 30
    while sbx.ports.request(HTTP_PORT, "GET", "/echo")[0] != 200:
        assert time.monotonic() < deadline, "the port server did not come up"
        time.sleep(0.1)
    yield sbx
    sbx.delete()
    runtime.close()


def test_ports_url_and_request(served, kilnd):
    assert served.ports.url(HTTP_PORT) == f"{kilnd.url}/v1/sandboxes/{served.id}/ports/{HTTP_PORT}/"
    status, headers, body = served.ports.request(HTTP_PORT, "GET", "/echo?x=1", headers={"X-Custom": "yes"})
    assert status == 200 and headers["content-type"] == "application/json"
    got = json.loads(body)
    assert got["path"] == "/echo?x=1" and got["headers"]["X-Custom"] == "yes"
    assert "Authorization" not in got["headers"], "the key is kilnd's, not the server's"
    data = os.urandom(300_000)
    status, _, body = served.ports.request(HTTP_PORT, "POST", "/upload", body=data)
    assert status == 200 and json.loads(body)["sha256"] == hashlib.sha256(data).hexdigest()
    # Nothing listens on 8999: kilnd's 502 comes back as an answer.
    status, _, body = served.ports.request(8999, "GET", "/")
    assert status == 502 and json.loads(body)["error"]["code"] == "port_closed"
    with pytest.raises(ValueError):
        served.ports.url(70000)


def test_forward_port_http_and_a_3_mib_echo(served):
    with served.forward_port(HTTP_PORT, local_port=0) as fwd:
        assert fwd.local_port > 0
        for _ in range(3):  # each HTTP connection is its own tunnel stream
            with urllib.request.urlopen(f"http://127.0.0.1:{fwd.local_port}/echo?via=tunnel", timeout=30) as r:
                got = json.loads(r.read())
            assert got["path"] == "/echo?via=tunnel"
        with urllib.request.urlopen(f"http://127.0.0.1:{fwd.local_port}/big?n=5000000", timeout=60) as r:
            assert len(r.read()) == 5_000_000
    with served.forward_port(ECHO_PORT, local_port=0) as fwd:
        data = os.urandom(3 << 20)  # three times the credit window
        with socket.create_connection(("127.0.0.1", fwd.local_port), timeout=60) as s:
            def send():
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
            t = threading.Thread(target=send)
            t.start()
            got = bytearray()
            while True:
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                got += chunk
            t.join()
        assert len(got) == len(data) and hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
        # Two at once on one tunnel.
        results = []

        def one(tag):
            with socket.create_connection(("127.0.0.1", fwd.local_port), timeout=60) as c:
                c.sendall(tag * 100_000)
                c.shutdown(socket.SHUT_WR)
                buf = b""
                while (chunk := c.recv(65536)):
                    buf += chunk
                results.append(buf == tag * 100_000)
        threads = [threading.Thread(target=one, args=(t,)) for t in (b"a", b"b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert results == [True, True]
    # Closed: its port no longer listens.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", fwd.local_port), timeout=5).close()


def test_forward_port_to_a_closed_port_closes_the_local_connection(served):
    with served.forward_port(8999, local_port=0) as fwd:
        with socket.create_connection(("127.0.0.1", fwd.local_port), timeout=30) as s:
            s.settimeout(30)
            assert s.recv(10) == b""


def _preview_get(kilnd, sid, token, path="/echo"):
    u = urllib.parse.urlsplit(kilnd.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    headers = {"Host": f"{HTTP_PORT}-{sid}.localhost"}
    if token:
        headers["x-kiln-preview-token"] = token
    conn.request("GET", path, headers=headers)
    r = conn.getresponse()
    out = (r.status, r.read())
    conn.close()
    return out


def test_previews(served, kilnd):
    p = served.previews.create(HTTP_PORT, ttl_seconds=600)
    assert p["port"] == HTTP_PORT and p["visibility"] == "private" and p["token"]
    assert p["url"].startswith(f"http://{HTTP_PORT}-{served.id}.localhost:")
    status, body = _preview_get(kilnd, served.id, p["token"])
    assert status == 200 and json.loads(body)["path"] == "/echo"
    assert _preview_get(kilnd, served.id, None)[0] == 401
    assert [x["port"] for x in served.previews.list()] == [HTTP_PORT]
    got = served.previews.get(HTTP_PORT, ttl_seconds=120)
    assert got["id"] == p["id"] and got["token"]
    rotated = served.previews.rotate(HTTP_PORT)
    assert _preview_get(kilnd, served.id, p["token"])[0] == 401
    assert _preview_get(kilnd, served.id, rotated["token"])[0] == 200
    with pytest.raises(kiln.PermissionDeniedError):
        served.previews.create(HTTP_PORT, visibility="public")
    assert served.previews.delete(HTTP_PORT) == {"id": p["id"], "sandboxId": served.id, "port": HTTP_PORT,
                                                 "deleted": True}
    assert _preview_get(kilnd, served.id, rotated["token"])[0] == 404
    with pytest.raises(kiln.NotFoundError):
        served.previews.get(HTTP_PORT)


def test_interpreter_state_streams_errors_and_contexts(rt):
    with rt.sandboxes.create(vcpu=1, memory_mib=512) as sbx:
        first = sbx.interpreter.run("x = 20\nprint('set')")
        assert first["status"] == "ok" and first["stdout"] == "set\n" and first["contextStarted"] is True
        second = sbx.interpreter.run("x * 2 + 2")
        assert second["results"][0]["data"]["text/plain"] == "42" and second["results"][0]["main"] is True
        assert second["contextStarted"] is False
        seen = {"out": [], "err": [], "res": [], "error": []}
        ex = sbx.interpreter.run(
            "import sys, time\nprint('a', flush=True)\ntime.sleep(0.3)\nprint('b', file=sys.stderr)\n"
            "display = globals().get('display')\ndisplay('side') if display else None\nx",
            on_stdout=seen["out"].append, on_stderr=seen["err"].append, on_result=seen["res"].append)
        assert ex["status"] == "ok"
        assert "".join(seen["out"]) == "a\n" and "".join(seen["err"]) == "b\n"
        assert [r["data"]["text/plain"] for r in seen["res"] if r["main"]] == ["20"]
        err = sbx.interpreter.run("1 / 0", on_error=seen["error"].append)
        assert err["status"] == "error" and err["error"]["name"] == "ZeroDivisionError"
        assert seen["error"] and seen["error"][0]["name"] == "ZeroDivisionError"
        timed = sbx.interpreter.run("import time\ntime.sleep(30)", timeout_ms=500)
        assert timed["status"] == "timeout"
        assert sbx.interpreter.run("x")["results"][0]["data"]["text/plain"] == "20", "state kept after a timeout"
        js = sbx.interpreter.run("let y = 6; y * 7", language="javascript")
        assert js["results"][0]["data"]["text/plain"] == "42"
        # Contexts: their own state, restart empties it, delete ends it.
        ctx = sbx.interpreter.contexts.create(id="other", language="python", cwd="/tmp")
        assert ctx["id"] == "other" and ctx["state"] == "running"
        assert sbx.interpreter.run("import os; os.getcwd()", context="other")["results"][0]["data"]["text/plain"] \
            == "'/tmp'"
        assert sbx.interpreter.run("x", context="other")["error"]["name"] == "NameError"
        assert {c["id"] for c in sbx.interpreter.contexts.list()} >= {"python", "javascript", "other"}
        assert sbx.interpreter.contexts.interrupt("other") is False
        sbx.interpreter.contexts.restart("python")
        assert sbx.interpreter.run("x")["error"]["name"] == "NameError"
        assert sbx.interpreter.contexts.delete("other") is True
        with pytest.raises(kiln.NotFoundError):
            sbx.interpreter.run("1", context="nope")
        with pytest.raises(kiln.InvalidRequestError):
            sbx.interpreter.run("1", language="cobol")


def test_async_interpreter_previews_and_ports(kilnd, served):
    async def main():
        async with AsyncRuntime() as art:
            sbx = await art.sandboxes.get(served.id)
            assert sbx.ports.url(HTTP_PORT) == served.ports.url(HTTP_PORT)
            status, _, body = await sbx.ports.request(HTTP_PORT, "GET", "/echo")
            assert status == 200
            p = await sbx.previews.create(HTTP_PORT)
            assert (await sbx.previews.list())[0]["id"] == p["id"]
            await sbx.previews.delete(HTTP_PORT)
            out = []
            ex = await sbx.interpreter.run("print(3 * 3)", on_stdout=out.append)
            assert ex["status"] == "ok" and out == ["9\n"]
            assert any(c["id"] == "python" for c in await sbx.interpreter.contexts.list())
    asyncio.run(main())


def test_file_watches(rt):
    with rt.sandboxes.create(**SMALL) as sbx:
        sbx.files.mkdir("/workspace/w")
        w = sbx.files.watch("/workspace/w", recursive=True, batch_ms=50)
        assert w.id and w.path == "/workspace/w"
        assert [x["id"] for x in sbx.files.watches.list()] == [w.id]
        sbx.files.write("/workspace/w/a.txt", "1")
        events = []
        deadline = time.monotonic() + 20
        while not any(e["path"] == "/workspace/w/a.txt" for e in events):
            assert time.monotonic() < deadline, events
            events += w.get_new_events(wait_ms=2000)
        assert events[0]["type"] == "create"
        # Followed: events as they happen, from the cursor on.
        got = []

        def follow():
            for e in w.events():
                got.append(e)
                if e["path"].endswith("b.txt"):
                    return
        t = threading.Thread(target=follow)
        t.start()
        sbx.files.rename("/workspace/w/a.txt", "/workspace/w/b.txt")
        t.join(30)
        assert not t.is_alive()
        assert any(e["type"] == "rename" and e.get("oldPath") == "/workspace/w/a.txt" for e in got), got
        assert w.stop() is True
        assert w.get_new_events() == [] and w.exit_reason == "stopped"
        second = sbx.files.watch("/workspace/w")
        assert sbx.files.watches.stop(second.id) is True


# --- RL helpers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def task_snapshot(kilnd):
    runtime = Runtime(kilnd.url, kilnd.admin_key)
    with runtime.sandboxes.create(**SMALL) as sbx:
        sbx.files.write("/workspace/task.txt", "make answer.txt hold 42\n")
        snap = sbx.snapshot(name="sdk-gym-task")
    yield snap["id"]
    runtime.snapshots.delete(snap["id"])
    runtime.close()


def _answer_reward(sandbox, result):
    return 1.0 if sandbox.files.exists("/workspace/answer.txt") and \
        sandbox.files.read_text("/workspace/answer.txt").strip() == "42" else 0.0


def test_gym_env_episode(rt, task_snapshot):
    env = kiln.gym.SandboxEnv(task_snapshot, runtime=rt, reward_fn=_answer_reward,
                              terminated_fn=lambda s, r: _answer_reward(s, r) == 1.0, max_steps=3)
    obs, info = env.reset(seed=7)
    first = info["sandbox_id"]
    assert obs == "" and info["snapshot"] == task_snapshot and info["seed"] == 7
    assert obs in env.observation_space
    obs, reward, terminated, truncated, info = env.step("cat task.txt; echo seed=$KILN_SEED")
    assert obs == "make answer.txt hold 42\nseed=7\n" and reward == 0.0 and not terminated and not truncated
    assert info["exit_code"] == 0 and info["steps"] == 1
    obs, reward, *_ = env.step("echo bad >&2; exit 2")
    assert obs == "bad\n[exit 2]\n" and reward == 0.0
    obs, reward, terminated, truncated, info = env.step("echo 42 > answer.txt")
    assert reward == 1.0 and terminated and not truncated
    # A new episode: a new sandbox from the snapshot; the old one is stopped.
    obs, info = env.reset()
    assert info["sandbox_id"] != first and rt.sandboxes.get(first).state == "stopped"
    assert env.step("cat answer.txt")[0].endswith("[exit 1]\n")
    env.step("true")
    *_, truncated, info = env.step("printf 'caf\\xc3\\xa9 \\x1b'")
    assert truncated and info["steps"] == 3
    second = env.sandbox.id
    assert env.step("printf 'caf\\xc3\\xa9 \\x1b'")[0] == "caf\\xe9 \\x1b"  # escaped into the charset
    env.close()
    env.close()
    assert rt.sandboxes.get(second).state == "stopped"
    with pytest.raises(RuntimeError):
        env.step("true")


def test_gymnasium_env_checker(rt, task_snapshot):
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    assert kiln.gym.HAVE_GYMNASIUM
    env = kiln.gym.SandboxEnv(task_snapshot, runtime=rt, reward_fn=_answer_reward, max_steps=4,
                              max_action_length=64, exec_timeout_ms=10_000)
    assert isinstance(env, gymnasium.Env)
    assert isinstance(env.action_space, gymnasium.spaces.Text)
    check_env(env, skip_render_check=True)
    env.close()


PROGRAM_SUM = "import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))\n"
CASES = [("1 2\n", "3\n"), ("10 20 30\n", "60\n"), {"stdin": "", "expected": "0\n"}]


def test_rewards_score_modes(rt):
    good = kiln.rewards.score(PROGRAM_SUM, CASES, runtime=rt, labels={"suite": "sdk-score"})
    assert good.score == 1.0 and good.passed == good.total == 3 and float(good) == 1.0
    assert [c.reason for c in good.cases] == ["ok"] * 3
    # exact vs whitespace
    spaced = "import sys\nprint(' ', sum(int(x) for x in sys.stdin.read().split()), ' ')\n"
    assert kiln.rewards.score(spaced, CASES, mode="exact", runtime=rt).score == 0.0
    assert kiln.rewards.score(spaced, CASES, mode="whitespace", runtime=rt).score == 1.0
    # float tolerance
    third = "print(1/3)\n"
    assert kiln.rewards.score(third, [("", "0.3333333\n")], mode="float", runtime=rt).score == 1.0
    assert kiln.rewards.score(third, [("", "0.3333333\n")], mode="float", rel_tol=1e-9, runtime=rt).score == 0.0
    # A wrong program, a crashing one, a slow one.
    wrong = kiln.rewards.score("print(0)\n", CASES, runtime=rt)
    assert wrong.score == pytest.approx(1 / 3) and [c.reason for c in wrong.cases] == \
        ["wrong_answer", "wrong_answer", "ok"]
    assert kiln.rewards.score("print('nope')\n", CASES[:2], runtime=rt).score == 0.0
    crash = kiln.rewards.score("raise SystemExit(3)\n", CASES[:1], runtime=rt)
    assert crash.score == 0.0 and crash.cases[0].reason == "runtime_error" and crash.cases[0].exit_code == 3
    slow = kiln.rewards.score("import time\ntime.sleep(60)\n", CASES[:1], timeout_ms=500, runtime=rt)
    assert slow.score == 0.0 and slow.cases[0].reason == "timeout" and slow.cases[0].timed_out
    # A flood is stopped at the output cap, long before its timeout.
    t0 = time.monotonic()
    flood = kiln.rewards.score("while True:\n    print('x' * 1000)\n", CASES[:1], timeout_ms=20000, runtime=rt)
    assert flood.cases[0].reason == "output_truncated" and time.monotonic() - t0 < 10, flood.cases[0].to_dict()
    # Only the program and stdin enter the sandbox: the expected output is nowhere in it.
    needle = "kiln-secret-" + str(8675000 + 309)
    snoop = "import subprocess\nprint(subprocess.run(['grep', '-rl', 'kiln-secret-' + str(8675000 + 309), " \
            "'/workspace', '/tmp', '/home', '/root', '/etc'], capture_output=True, text=True).stdout, end='')\n"
    hidden = kiln.rewards.score(snoop, [("", needle + "\n")], runtime=rt)
    assert hidden.score == 0.0 and hidden.cases[0].stdout == "" and hidden.cases[0].reason == "wrong_answer"
    # Every scoring sandbox was stopped.
    listed = rt.sandboxes.list(labels={"suite": "sdk-score"}, include_stopped=True)
    assert [s.id for s in listed] == [good.sandbox_id] and listed[0].state == "stopped"
    with pytest.raises(ValueError):
        kiln.rewards.score(PROGRAM_SUM, CASES, mode="fuzzy", runtime=rt)


def test_rewards_score_many(rt):
    programs = [PROGRAM_SUM, "print(0)\n", "import time\ntime.sleep(60)\n", "echo 3", PROGRAM_SUM]
    results = kiln.rewards.score_many(programs[:3] + programs[4:], CASES[:2], concurrency=2, runtime=rt,
                                      timeout_ms=1000, labels={"suite": "sdk-many"})
    assert [r.score for r in results] == [1.0, 0.0, 0.0, 1.0]
    assert results[2].cases[0].reason == "timeout"
    assert rt._transport.connection_count() <= 1  # the pool's threads closed their connections
    bash = kiln.rewards.score_many([programs[3]], [("", "3\n")], language="bash", runtime=rt)
    assert bash[0].score == 1.0
    listed = rt.sandboxes.list(labels={"suite": "sdk-many"}, include_stopped=True)
    assert len(listed) == 4 and all(s.state == "stopped" for s in listed)
    assert sorted(s.id for s in listed) == sorted(r.sandbox_id for r in results)
