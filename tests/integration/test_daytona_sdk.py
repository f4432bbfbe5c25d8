"""Daytona's own Python SDK (daytona==0.226.1 from PyPI) against kilnd's Daytona
front (src/api/daytona): DAYTONA_API_URL=<kilnd>/daytona and a kiln key as
DAYTONA_API_KEY, nothing else changed. Each test runs a script of the SDK's
documented usage in the SDK's venv (setup's /opt/kiln/daytona-venv when it holds
the pinned version, else a fresh one) and checks what it printed.
"""
import json
import os
import subprocess
import textwrap
import urllib.error
import urllib.parse
import urllib.request

import pytest

from lib.venvs import setup_venv_or_fresh

PACKAGES = ["daytona==0.226.1"]
pytestmark = pytest.mark.xdist_group("daytona")

PRELUDE = """
import json, sys, time
from daytona import (Daytona, CreateSandboxFromImageParams, CreateSandboxFromSnapshotParams,
                     CreateSnapshotParams, Image, ListSandboxesQuery, Resources, SessionExecuteRequest, FileUpload,
                     FileDownloadRequest)
from daytona.common.errors import DaytonaError, DaytonaNotFoundError
def out(v):
    print(json.dumps(v))
daytona = Daytona()
"""


@pytest.fixture(scope="session")
def daytona_python():
    with setup_venv_or_fresh("/opt/kiln/daytona-venv", PACKAGES, "kiln-daytona-venv-") as d:
        yield f"{d}/bin/python"


@pytest.fixture(scope="module")
def daytona_env(kilnd, api):
    key = api.ok("POST", "/v1/keys", json={"name": "daytona-tests"})["secret"]
    env = dict(os.environ, DAYTONA_API_URL=kilnd.url + "/daytona", DAYTONA_API_KEY=key)
    for name in ("DAYTONA_TARGET", "DAYTONA_JWT_TOKEN", "DAYTONA_USE_DEPRECATED_POLLING"):
        env.pop(name, None)
    return env


def run(python, env, script, timeout=300):
    """Runs `script` after PRELUDE; the JSON its last line printed."""
    p = subprocess.run([python, "-c", PRELUDE + textwrap.dedent(script)], env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_create_exec_code_run_and_delete(daytona_python, daytona_env):
    got = run(daytona_python, daytona_env, """
        sandbox = daytona.create(CreateSandboxFromSnapshotParams(env_vars={"GREETING": "hi"},
                                                                  labels={"suite": "sdk"}))
        r = sandbox.process.exec("echo $GREETING; echo oops >&2; exit 3")
        cwd = sandbox.process.exec("pwd", cwd="/tmp").result
        env = sandbox.process.exec("echo $A$B", env={"A": "x", "B": "y"}).result
        code = sandbox.process.code_run("import sys\\nprint(sum(range(10)), sys.argv[1:])")
        err = sandbox.process.code_run("raise ValueError('bad')")
        found = daytona.get(sandbox.id)
        listed = [s.id for s in daytona.list(ListSandboxesQuery(labels={"suite": "sdk"}))]
        sandbox.delete()
        try:
            daytona.get(sandbox.id).state
            gone = "still there"
        except DaytonaNotFoundError:
            gone = "not found"
        out({"state": found.state, "exit": r.exit_code, "result": r.result, "cwd": cwd,
             "env": env, "code": [code.exit_code, code.result], "err": [err.exit_code, err.result],
             "listed": sandbox.id in listed, "cpu": found.cpu, "memory": found.memory})
    """)
    assert got["state"] == "started", got
    assert got["exit"] == 3 and got["result"] == "hi\noops\n", got
    assert got["cwd"] == "/tmp\n" and got["env"] == "xy\n", got
    assert got["code"] == [0, "45 []\n"], got
    assert got["err"][0] == 1 and "ValueError: bad" in got["err"][1], got
    assert got["listed"] and got["cpu"] >= 1 and got["memory"] >= 1, got


def test_sessions_keep_folder_and_variables_and_run_async(daytona_python, daytona_env):
    got = run(daytona_python, daytona_env, """
        sandbox = daytona.create()
        p = sandbox.process
        p.create_session("s1")
        p.execute_session_command("s1", SessionExecuteRequest(command="export FOO=bar; cd /tmp"))
        same = p.execute_session_command("s1", SessionExecuteRequest(command="echo $FOO; pwd"))
        bg = p.execute_session_command("s1", SessionExecuteRequest(
            command="sleep 1; echo done; echo warn >&2; exit 4", run_async=True))
        running = p.get_session_command("s1", bg.cmd_id).exit_code
        while p.get_session_command("s1", bg.cmd_id).exit_code is None:
            time.sleep(0.2)
        logs = p.get_session_command_logs("s1", bg.cmd_id)
        session = p.get_session("s1")
        try:
            p.create_session("s1")
            again = "made twice"
        except DaytonaError as e:
            again = str(e)
        try:
            p.get_session("../etc")
            bad = "accepted"
        except DaytonaError as e:
            bad = type(e).__name__
        p.delete_session("s1")
        try:
            p.get_session("s1")
            deleted = "still there"
        except DaytonaNotFoundError:
            deleted = "not found"
        sandbox.delete()
        out({"same": same.output, "exit": same.exit_code, "running": running,
             "bg": [logs.stdout, logs.stderr],
             "bgExit": [c.exit_code for c in session.commands if c.id == bg.cmd_id],
             "commands": len(session.commands), "again": again, "bad": bad,
             "deleted": deleted})
    """)
    assert got["same"] == "bar\n/tmp\n" and got["exit"] == 0, got
    assert got["running"] is None, got
    assert got["bg"] == ["done\n", "warn\n"] and got["bgExit"] == [4], got
    assert got["commands"] == 3, got
    assert "already exists" in got["again"], got
    assert got["bad"] != "accepted", got
    assert got["deleted"] == "not found", got


def test_files_one_by_one_and_in_bulk(daytona_python, daytona_env):
    got = run(daytona_python, daytona_env, """
        sandbox = daytona.create()
        fs = sandbox.fs
        fs.upload_file(b"one\\n", "notes/one.txt")
        fs.upload_files([FileUpload(source=b"two", destination="/tmp/a/two.txt"),
                         FileUpload(source=bytes(range(256)) * 4096, destination="/tmp/a/big.bin")])
        one = fs.download_file("notes/one.txt").decode()
        many = fs.download_files([FileDownloadRequest(source="/tmp/a/two.txt"),
                                  FileDownloadRequest(source="/tmp/a/big.bin"),
                                  FileDownloadRequest(source="/tmp/a/none")])
        got = {r.source: (len(r.result) if r.result is not None else None, r.error) for r in many}
        info = fs.get_file_info("/tmp/a/big.bin")
        fs.create_folder("/tmp/a/sub", "755")
        names = sorted(f.name for f in fs.list_files("/tmp/a"))
        fs.move_files("/tmp/a/two.txt", "/tmp/a/sub/two.txt")
        fs.delete_file("/tmp/a/big.bin")
        after = sorted(f.name for f in fs.list_files("/tmp/a"))
        try:
            fs.upload_file(b"x" * (256 * 1024 * 1024 + 1), "/tmp/a/huge.bin")
            huge = "written"
        except DaytonaError as e:
            huge = str(e)
        try:
            fs.download_file("/tmp/a/none")
            missing = "found"
        except DaytonaError as e:
            missing = type(e).__name__
        sandbox.delete()
        out({"one": one, "two": got["/tmp/a/two.txt"][0], "big": got["/tmp/a/big.bin"][0],
             "none": got["/tmp/a/none"][1] is not None, "size": info.size, "dir": info.is_dir,
             "names": names, "after": after, "missing": missing, "huge": huge})
    """)
    assert got["one"] == "one\n" and got["two"] == 3 and got["big"] == 256 * 4096, got
    assert got["none"] and got["size"] == 256 * 4096 and not got["dir"], got
    assert got["names"] == ["big.bin", "sub", "two.txt"], got
    assert got["after"] == ["sub"], got
    assert got["missing"] == "DaytonaFileNotFoundError", got
    assert "413" in got["huge"] and "256 MiB" in got["huge"], got


def test_stop_start_keeps_processes_and_another_keys_sandbox_is_not_found(
        daytona_python, daytona_env, api, kilnd):
    other = api.ok("POST", "/v1/keys", json={"name": "daytona-other"})["secret"]
    got = run(daytona_python, daytona_env, """
        sandbox = daytona.create(CreateSandboxFromSnapshotParams(auto_stop_interval=0))
        sandbox.process.create_session("counter")
        sandbox.process.execute_session_command("counter", SessionExecuteRequest(
            command="i=0; while true; do i=$((i+1)); echo $i > /tmp/n; sleep 0.1; done",
            run_async=True))
        while sandbox.process.exec("test -s /tmp/n").exit_code != 0:
            time.sleep(0.1)
        sandbox.stop()
        stopped = daytona.get(sandbox.id).state
        sandbox.start()
        first = int(sandbox.process.exec("cat /tmp/n").result)
        time.sleep(0.5)
        later = int(sandbox.process.exec("cat /tmp/n").result)
        out({"id": sandbox.id, "stopped": stopped, "state": sandbox.state,
             "counting": later > first})
    """)
    assert got["stopped"] == "stopped" and got["state"] == "started", got
    assert got["counting"], got
    env = dict(daytona_env, DAYTONA_API_KEY=other)
    theirs = run(daytona_python, env, f"""
        try:
            daytona.get({got['id']!r})
            out("found")
        except DaytonaNotFoundError:
            out("not found")
    """)
    assert theirs == "not found"
    api.request("DELETE", f"/v1/sandboxes/{got['id']}")


def test_an_image_reference_and_a_dockerfile_are_booted_and_refusals_name_the_feature(
        daytona_python, daytona_env):
    got = run(daytona_python, daytona_env, """
        image = Image.base("base").run_commands("echo built > /tmp/stamp").env({"MODE": "x"})
        sandbox = daytona.create(CreateSandboxFromImageParams(image=image,
                                                              resources=Resources(cpu=1, memory=1)),
                                 timeout=600)
        stamp = sandbox.process.exec("cat /tmp/stamp; echo $MODE").result
        shape = [sandbox.cpu, sandbox.memory]
        sandbox.delete()
        refused = {}
        for name, params in [
            ("volumes", CreateSandboxFromSnapshotParams(volumes=[{"volume_id": "v",
                                                                  "mount_path": "/data"}])),
            ("gpu", CreateSandboxFromImageParams(image="base", resources=Resources(gpu=1))),
        ]:
            try:
                daytona.create(params)
                refused[name] = "created"
            except DaytonaError as e:
                refused[name] = [e.status_code, str(e)]
        out({"stamp": stamp, "shape": shape, "refused": refused})
    """, timeout=900)
    assert got["stamp"] == "built\nx\n" and got["shape"] == [1, 1], got
    assert got["refused"]["volumes"][0] == 501 and "volumes" in got["refused"]["volumes"][1], got
    assert got["refused"]["gpu"][0] == 501 and "gpu" in got["refused"]["gpu"][1], got


def test_a_snapshot_is_a_kiln_image_built_once_and_booted_by_name(daytona_python, daytona_env):
    got = run(daytona_python, daytona_env, """
        name = "dt-snap-" + str(int(time.time() * 1000))
        image = Image.base("base").run_commands("echo from-snapshot > /tmp/stamp")
        snap = daytona.snapshot.create(CreateSnapshotParams(name=name, image=image), timeout=600)
        found = daytona.snapshot.get(name)
        listed = [s.name for s in daytona.snapshot.list().items]
        sandbox = daytona.create(CreateSandboxFromSnapshotParams(snapshot=name))
        stamp = sandbox.process.exec("cat /tmp/stamp").result
        sandbox.delete()
        daytona.snapshot.delete(found)
        try:
            daytona.snapshot.get(name)
            gone = "still there"
        except DaytonaNotFoundError:
            gone = "not found"
        try:
            daytona.volume.list()
            volumes = "listed"
        except DaytonaError as e:
            volumes = [e.status_code, str(e)]
        out({"state": snap.state, "same": found.id == snap.id, "listed": name in listed,
             "stamp": stamp, "gone": gone, "volumes": volumes})
    """, timeout=900)
    assert got["state"] == "active" and got["same"] and got["listed"], got
    assert got["stamp"] == "from-snapshot\n", got
    assert got["gone"] == "not found", got
    assert got["volumes"][0] == 501 and "volumes" in got["volumes"][1], got


def test_a_preview_link_lets_its_token_in_and_not_into_the_sandbox(daytona_python, daytona_env,
                                                                    kilnd, api):
    got = run(daytona_python, daytona_env, """
        sandbox = daytona.create()
        sandbox.process.create_session("web")
        server = ("import http.server as h\\n"
                  "class E(h.BaseHTTPRequestHandler):\\n"
                  "  def do_GET(self):\\n"
                  "    b = str(self.headers).encode()\\n"
                  "    self.send_response(200); self.end_headers(); self.wfile.write(b)\\n"
                  "h.HTTPServer(('127.0.0.1', 8000), E).serve_forever()")
        sandbox.fs.upload_file(server.encode(), "/tmp/echo.py")
        sandbox.process.execute_session_command("web", SessionExecuteRequest(
            command="python3 /tmp/echo.py", run_async=True))
        while sandbox.process.exec("python3 -c 'import socket; socket.create_connection("
                                   "(\\"127.0.0.1\\", 8000))'").exit_code != 0:
            time.sleep(0.2)
        link = sandbox.get_preview_link(8000)
        out({"id": sandbox.id, "url": link.url, "token": link.token})
    """)
    host = urllib.parse.urlsplit(got["url"]).netloc
    assert host.startswith(f"8000-{got['id']}."), got

    def visit(headers):
        req = urllib.request.Request(kilnd.url + "/", headers={"Host": host, **headers})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    status, seen = visit({"X-Daytona-Preview-Token": got["token"], "X-App": "kept"})
    assert status == 200, (status, seen)
    assert "X-App: kept" in seen and got["token"] not in seen, seen
    assert "daytona-preview-token" not in seen.lower(), seen
    assert visit({})[0] == 401
    assert visit({"X-Daytona-Preview-Token": "wrong"})[0] == 401
    api.request("DELETE", f"/v1/sandboxes/{got['id']}")
