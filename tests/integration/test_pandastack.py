"""PandaStack's own Python client (pandastack 0.10.0 from PyPI) against
kilnd's PandaStack front (/pandastack/v1, src/api/routes_pandastack*.cc).

A venv gets the real client from the index; each test runs a small script
with it, PANDASTACK_API pointing at kilnd's /pandastack and
PANDASTACK_API_KEY a kiln key. Skipped (with the reason) only when pip cannot
reach the index.
"""
import json
import os
import subprocess
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from lib.venvs import venv_with

ROOT = Path(__file__).resolve().parents[2]
# Every script starts with this: the client, and `out` for its answer.
PRELUDE = """
import json, sys
import pandastack
from pandastack import (Sandbox, Client, NotFoundError, BadRequestError, ServerError,
                        SandboxTimeout, CommandFailed)
def out(v):
    print(json.dumps(v))
"""


@pytest.fixture(scope="module")
def python():
    """The python of a fresh venv holding pandastack==0.10.0."""
    with venv_with(["pandastack==0.10.0"], "kiln-pandastack-venv-", timeout=600) as d:
        yield f"{d}/bin/python"


@pytest.fixture(scope="module")
def env(kilnd, api):
    # A key of its own, as a PandaStack user has: it sees only its own images
    # (other tests leave images such as "code-interpreter" under the admin key).
    key = api.ok("POST", "/v1/keys", json={"name": "pandastack-tests"})["secret"]
    return dict(os.environ, PANDASTACK_API=kilnd.url + "/pandastack",
                PANDASTACK_API_KEY=key, PANDASTACK_MAX_CREATE_RETRY_SECONDS="30")


@pytest.fixture(scope="module")
def run(python, env):
    """Runs a script with the client; returns what its last line printed."""
    def run(script, timeout=240):
        p = subprocess.run([python, "-c", PRELUDE + textwrap.dedent(script)], env=env,
                           capture_output=True, text=True, timeout=timeout)
        assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
        return json.loads(p.stdout.strip().splitlines()[-1])
    return run


def test_create_get_list_kill(run):
    got = run("""
        s = Sandbox.create(template="base", ttl_seconds=600, metadata={"team": "rl"})
        g = Sandbox.get(s.id)
        listed = [x.id for x in Sandbox.list()]
        d = Sandbox.create()  # the client's default template, code-interpreter
        d.kill()
        s.kill()
        try:
            Sandbox.get(s.id)
            gone = "still there"
        except NotFoundError as e:
            gone = str(e)
        try:
            Sandbox.create(template="no-such-image")
            missing = "created"
        except NotFoundError as e:
            missing = str(e)
        try:
            Sandbox.create(template="base", ttl_seconds=5)
            short = "created"
        except BadRequestError as e:
            short = str(e)
        out({"s": [s.id, s.status, s.template, s.cpu, s.memory_mb, s.metadata, s.persistent],
             "g": [g.id, g.status, g.metadata, g.created_at], "listed": s.id in listed,
             "default": d.template, "gone": gone, "missing": missing, "short": short})
    """)
    sid, status, template, cpu, memory_mb, metadata, persistent = got["s"]
    assert status == "running" and template == "base" and metadata == {"team": "rl"}
    assert cpu >= 1 and memory_mb >= 128 and persistent is False
    assert got["g"][:3] == [sid, "running", {"team": "rl"}] and got["g"][3]
    assert got["listed"] is True
    assert got["default"] == "base"
    assert "not found" in got["gone"]
    assert "no-such-image" in got["missing"]
    assert "ttl_seconds" in got["short"]


def test_exec_and_stream(run):
    got = run("""
        with Sandbox.create(template="base") as s:
            r = s.exec("echo hi; echo oops >&2; exit 3")
            outs, errs = [], []
            code = s.exec_stream("for i in 1 2 3; do echo $i; sleep 0.2; done; echo e >&2; exit 4",
                                 on_stdout=outs.append, on_stderr=errs.append)
            try:
                s.exec("sleep 20", timeout_seconds=1)
                timeout = "finished"
            except SandboxTimeout as e:
                timeout = "SandboxTimeout: " + str(e)
            try:
                s.exec("exit 2", check=True)
                failed = None
            except CommandFailed as e:
                failed = e.exit_code
            code2 = s.exec_stream("printf 'caf\\\\303\\\\251'", on_stdout=outs.append)
        out({"r": [r.stdout, r.stderr, r.exit_code], "code": code, "outs": outs, "errs": errs,
             "timeout": timeout, "failed": failed, "code2": code2})
    """)
    assert got["r"] == ["hi\n", "oops\n", 3]
    assert got["code"] == 4 and "".join(got["outs"][:-1]) == "1\n2\n3\n", got
    assert "".join(got["errs"]) == "e\n"
    assert got["timeout"].startswith("SandboxTimeout"), got["timeout"]
    assert got["failed"] == 2
    assert got["code2"] == 0 and got["outs"][-1] == "café"


def test_files(run):
    got = run("""
        with Sandbox.create(template="base") as s:
            fs = s.filesystem
            fs.write("/workspace/deep/dir/a.txt", "hello\\n")
            fs.write("/workspace/deep/b.bin", bytes(range(256)))
            entries = sorted((e.name, e.is_dir, e.size) for e in fs.listdir("/workspace/deep"))
            st = fs.stat("/workspace/deep/b.bin")
            try:
                fs.read("/workspace/nope")
                missing = "read"
            except NotFoundError as e:
                missing = str(e)
            out({"a": fs.read("/workspace/deep/dir/a.txt").decode(),
                 "b": list(fs.read("/workspace/deep/b.bin")) == list(range(256)),
                 "entries": entries, "stat": [st.name, st.path, st.is_dir, st.size],
                 "exists": [fs.exists("/workspace/deep/dir"), fs.exists("/workspace/nope")],
                 "missing": missing, "cat": s.exec("cat /workspace/deep/dir/a.txt").stdout})
    """)
    assert got["a"] == "hello\n" and got["b"] is True and got["cat"] == "hello\n"
    assert got["entries"] == [["b.bin", False, 256], ["dir", True, got["entries"][1][2]]]
    assert got["stat"] == ["b.bin", "/workspace/deep/b.bin", False, 256]
    assert got["exists"] == [True, False]
    assert "/workspace/nope" in got["missing"]


def test_snapshot_and_create_from_it(run):
    got = run("""
        client = pandastack.get_default_client()
        with Sandbox.create(template="base") as s:
            s.filesystem.write("/workspace/state.txt", "before")
            snap = s.snapshot()
            s.filesystem.write("/workspace/state.txt", "after")
            listed = [x["id"] for x in client.snapshots.list(sandbox_id=s.id)]
            one = client.snapshots.get(snap)
        with Sandbox.create(template="base", from_snapshot=snap) as c:
            restored = c.filesystem.read("/workspace/state.txt").decode()
            from_snapshot = c.from_snapshot
        client.snapshots.delete(snap)
        try:
            client.snapshots.get(snap)
            deleted = "still there"
        except NotFoundError as e:
            deleted = str(e)
        out({"snap": snap, "listed": listed, "one": one, "restored": restored,
             "from_snapshot": from_snapshot, "deleted": deleted})
    """)
    snap = got["snap"]
    assert snap and got["listed"] == [snap]
    assert got["one"]["id"] == snap and got["one"]["template"] == "base"
    assert got["restored"] == "before" and got["from_snapshot"] == snap
    assert "not found" in got["deleted"]


def test_fork_and_fork_tree(run):
    got = run("""
        with Sandbox.create(template="base", metadata={"run": "7"}) as s:
            s.filesystem.write("/workspace/mid.txt", "episode")
            child = s.fork()
            kids = s.fork_tree(count=2)
            seen = []
            for i, k in enumerate([child] + kids):
                seen.append(k.filesystem.read("/workspace/mid.txt").decode())
                k.filesystem.write("/workspace/mid.txt", f"copy {i}")
            source = s.filesystem.read("/workspace/mid.txt").decode()
            ids = [child.id] + [k.id for k in kids]
            meta = [child.metadata] + [k.metadata for k in kids]
            for k in [child] + kids:
                k.kill()
        out({"source": s.id, "ids": ids, "seen": seen, "after": source, "meta": meta})
    """)
    assert len(set(got["ids"])) == 3 and got["source"] not in got["ids"]
    assert got["seen"] == ["episode"] * 3 and got["after"] == "episode"
    for m in got["meta"]:
        assert m["fork_parent_id"] == got["source"] and m["run"] == "7"


def test_hibernate_wake_pause_resume(run):
    got = run("""
        s = Sandbox.create(template="base")
        try:
            s.exec("echo kept > /workspace/f")
            s.hibernate()
            hibernated = Sandbox.get(s.id).status
            s.wake()
            woken = Sandbox.get(s.id).status
            s.wake()  # waking a running sandbox does nothing
            s.pause()
            paused = Sandbox.get(s.id).status
            auto = s.exec("cat /workspace/f").stdout  # a call wakes it
            s.pause()
            s.resume()
            resumed = Sandbox.get(s.id).status
        finally:
            s.kill()
        out([hibernated, woken, paused, auto, resumed])
    """)
    assert got == ["paused", "running", "paused", "kept\n", "running"]


def test_ttl_and_lifecycle(run):
    got = run("""
        s = Sandbox.create(template="base", ttl_seconds=300, persistent=True)
        try:
            before = s.lifecycle()
            after = s.set_ttl(1200)
            try:
                s.set_ttl(60)
                shorter = "accepted"
            except BadRequestError as e:
                shorter = str(e)
            same = s.set_persistent(True)
            change = s.set_persistent(False)
            persistent = Sandbox.get(s.id).persistent
        finally:
            s.kill()
        out({"before": before, "after": after, "shorter": shorter, "same": same,
             "change": change, "persistent": persistent})
    """)
    assert 290 <= got["before"]["ttl_seconds"] <= 300 and got["before"]["persistent"] is True
    assert 1190 <= got["after"]["ttl_seconds"] <= 1200
    assert "only lengthen" in got["shorter"]
    assert got["same"]["persistent"] is True
    assert got["change"]["persistent"] is False and got["persistent"] is False


def test_templates(run):
    got = run("""
        client = pandastack.get_default_client()
        names = [t.name for t in client.templates.list()]
        base = client.templates.get("base")
        out({"names": names, "base": [base.name, base.is_global]})
    """)
    assert "base" in got["names"] and got["base"] == ["base", True]


def test_unsupported_features_are_refused_in_pandastacks_shape(run, kilnd):
    got = run("""
        client = pandastack.get_default_client()
        said = {}
        for name, call in [("databases", lambda: client.databases.list()),
                           ("apps", lambda: client.apps.list()),
                           ("volumes", lambda: Sandbox.create(template="base", volumes=[{"name": "v"}]))]:
            try:
                call()
                said[name] = "served"
            except ServerError as e:
                said[name] = str(e)
        with Sandbox.create(template="base") as s:
            try:
                s.create_code_context()
                said["repl"] = "served"
            except ServerError as e:
                said["repl"] = str(e)
        out(said)
    """)
    assert "kiln does not offer PandaStack's databases" in got["databases"]
    assert "apps" in got["apps"] and "volumes" in got["volumes"]
    assert "code contexts" in got["repl"]
    # The wire shape, as PandaStack's client reads it.
    req = urllib.request.Request(kilnd.url + "/pandastack/v1/schedules",
                                 headers={"Authorization": f"Bearer {kilnd.admin_key}"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 501
    body = json.loads(e.value.read())
    assert body["code"] == "not_supported" and body["feature"] == "schedules"
    assert isinstance(body["error"], str) and "schedules" in body["error"]


def example(python, env, name, *args):
    p = subprocess.run([python, str(ROOT / "examples" / "pandastack" / name), *args], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stdout


def test_example_vm_env(python, env):
    summary, _ = example(python, env, "vm_env.py", "--episodes", "2")
    assert summary["example"] == "vm_env" and summary["ok"] is True
    assert [e["final"] for e in summary["episodes"]] == [21, 21]
    assert all(e["steps"] == 3 for e in summary["episodes"])


def test_example_best_of_n(python, env):
    summary, out = example(python, env, "best_of_n.py")
    assert summary["example"] == "best_of_n" and summary["winner"] == "correct"
    assert summary["scores"]["slow"] == 0.0 and "timed out" in out
    assert summary["scores"]["unsorted"] < 1.0


def test_preview_urls_lists_the_ports_shared_with_kiln(run, kilnd, env):
    """preview_urls reads kiln's previews; the client builds each URL itself from its
    preview_host (set to kilnd's preview domain)."""
    got = run("""
        import json, os, urllib.request
        s = Sandbox.create(template="base")
        before = s.preview_urls()
        req = urllib.request.Request(os.environ["PANDASTACK_API"].replace("/pandastack", "")
                                     + f"/v1/sandboxes/{s.id}/previews", data=b'{"port": 8080}',
                                     headers={"Authorization": "Bearer " + os.environ["PANDASTACK_API_KEY"],
                                              "Content-Type": "application/json"})
        preview = json.loads(urllib.request.urlopen(req).read())
        s._client.preview_host = "localhost"
        after = s.preview_urls()
        s.kill()
        out({"before": before, "after": {str(k): v for k, v in after.items()}, "id": s.id,
             "url": preview["url"]})
    """)
    assert got["before"] == {}
    assert got["after"] == {"8080": f"https://8080-{got['id']}.localhost"}, got
    assert got["url"].startswith(f"http://8080-{got['id']}.localhost:"), got
