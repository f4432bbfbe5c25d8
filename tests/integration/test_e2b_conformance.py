"""What E2B's own SDK tests expect of a sandbox, checked with E2B's Python SDK (e2b 2.63.0)
against a real kilnd (issue 45): each test here failed on kiln before, and names the E2B
behaviour it holds kiln to.

- is_running() is false for a paused sandbox and for a killed one (envd's /health answers 502
  then, as E2B's proxy does), and true again after connect();
- a files.write in a watched folder shows as a create and a write of that file, not of a
  temporary file renamed over it (E2B's envd writes in place);
- files.remove of a path that is not there is no error; get_info of a symlink gives the type
  of what it points to and that thing's absolute path;
- the sandbox user's home is /home/user, as in E2B's templates (kiln's base links it to
  /workspace): relative paths resolve there and commands start there;
- a lease that ends with autoPause and no autoResume leaves the sandbox paused until
  connect(), whatever the traffic.
"""
import textwrap

import pytest

from client import Client
from e2b_clients import e2b_env, e2b_key, e2b_python, run_python  # noqa: F401

pytestmark = pytest.mark.xdist_group("e2b_conformance")

PY = """
import time
from e2b import Sandbox, FileType, FilesystemEventType
"""


def py(e2b_python, env, script, timeout=300):  # noqa: F811
    return run_python(e2b_python, env, PY + textwrap.dedent(script), timeout=timeout)


def test_is_running_is_false_when_paused_or_killed(e2b_python, e2b_env):  # noqa: F811
    out = py(e2b_python, e2b_env, """
        s = Sandbox.create(timeout=300)
        first = s.is_running()
        s.pause()
        paused = s.is_running()
        s.connect()
        resumed = s.is_running()
        s.kill()
        out({"first": first, "paused": paused, "resumed": resumed, "killed": s.is_running()})
    """)
    assert out == {"first": True, "paused": False, "resumed": True, "killed": False}, out


def test_a_write_in_a_watched_folder_is_a_write_of_that_file(e2b_python, e2b_env):  # noqa: F811
    out = py(e2b_python, e2b_env, """
        s = Sandbox.create(timeout=300)
        s.files.make_dir("watched")
        s.files.write("watched/old.txt", "one")
        h = s.files.watch_dir("watched")
        s.files.write("watched/new.txt", "fresh")
        s.files.write("watched/old.txt", "two")
        time.sleep(1)
        events = [(e.type.name, e.name) for e in h.get_new_events()]
        h.stop()
        content = s.files.read("watched/old.txt")
        s.kill()
        out({"events": events, "content": content})
    """)
    events = [tuple(e) for e in out["events"]]
    assert all(name in ("new.txt", "old.txt") for _, name in events), events
    assert ("CREATE", "new.txt") in events and ("WRITE", "new.txt") in events, events
    assert ("WRITE", "old.txt") in events and ("CREATE", "old.txt") not in events, events
    assert not any(kind == "RENAME" for kind, _ in events), events
    assert out["content"] == "two", out


def test_remove_of_a_missing_path_and_info_of_a_symlink(e2b_python, e2b_env):  # noqa: F811
    out = py(e2b_python, e2b_env, """
        s = Sandbox.create(timeout=300)
        s.files.remove("no-such-file.txt")
        s.files.remove("/tmp/no/such/folder")
        s.files.write("links/target.txt", "hello")
        s.commands.run("ln -s target.txt links/rel && ln -s /home/user/links links/dir "
                       "&& ln -s gone.txt links/dangling")
        info = {n: s.files.get_info(f"links/{n}") for n in ("rel", "dir", "dangling")}
        s.kill()
        out({n: [i.type.name if i.type else None, i.symlink_target] for n, i in info.items()})
    """)
    assert out["rel"] == ["FILE", "/home/user/links/target.txt"], out
    assert out["dir"] == ["DIR", "/home/user/links"], out
    assert out["dangling"][0] == "SYMLINK" and out["dangling"][1] == "gone.txt", out


def test_the_users_home_is_home_user(kilnd, e2b_python, e2b_env, e2b_key):  # noqa: F811
    out = py(e2b_python, e2b_env, """
        s = Sandbox.create(timeout=300)
        w = s.files.write("notes.txt", "kept")
        r = s.commands.run("pwd; echo $HOME; cat ~/notes.txt")
        listed = [e.path for e in s.files.list(".")]
        out({"id": s.sandbox_id, "path": w.path, "run": r.stdout.split(), "listed": listed})
    """)
    assert out["path"] == "/home/user/notes.txt", out
    assert out["run"] == ["/home/user", "/home/user", "kept"], out
    assert "/home/user/notes.txt" in out["listed"], out
    # kiln's own API sees the same file where kiln keeps the user's home.
    owner = Client(kilnd.url, key=e2b_key[0])
    try:
        assert owner.sh(out["id"], "cat /workspace/notes.txt").strip() == "kept"
    finally:
        owner.request("DELETE", f"/v1/sandboxes/{out['id']}")


def test_auto_pause_without_auto_resume_waits_for_connect(e2b_python, e2b_env):  # noqa: F811
    out = py(e2b_python, e2b_env, """
        from e2b import SandboxState
        s = Sandbox.create(timeout=3, lifecycle={"on_timeout": "pause", "auto_resume": False})
        deadline = time.time() + 60
        while s.get_info().state != SandboxState.PAUSED and time.time() < deadline:
            time.sleep(0.5)
        state = s.get_info().state.name
        running = s.is_running()
        still = s.get_info().state.name  # the health check woke nothing
        s.connect()
        after = [s.get_info().state.name, s.is_running()]
        s.kill()
        out({"state": state, "running": running, "still": still, "after": after})
    """)
    assert out == {"state": "PAUSED", "running": False, "still": "PAUSED",
                   "after": ["RUNNING", True]}, out
