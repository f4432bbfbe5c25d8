"""What E2B's own SDK tests expect of a sandbox, checked with E2B's Python SDK (e2b 2.63.0)
against a real kilnd (issue 45): each test here failed on kiln before, and names the E2B
behaviour it holds kiln to.

- is_running() is false for a paused sandbox and for a killed one (envd's /health answers 502
  then, as E2B's proxy does), and true again after connect();
- a files.write in a watched folder shows as a create and a write of that file, not of a
  temporary file renamed over it (E2B's envd writes in place);
- files.remove of a path that is not there is no error; get_info of a symlink gives the type
  of what it points to and that thing's absolute path;
- the sandbox user's home is /home/user, as in E2B's templates (kiln's base's
  /workspace bound there): relative paths resolve there and commands start there;
- a lease that ends with autoPause and no autoResume leaves the sandbox paused until
  connect(), whatever the traffic; set_timeout(0) ends the lease at once;
- get_metrics gives the meter's readings, one per 5 s, in the window asked.
"""

import pytest

from client import Client
from e2b_clients import e2b_env, e2b_key, e2b_python, run_python  # noqa: F401

pytestmark = pytest.mark.xdist_group("e2b_conformance")

PY = """
import time
from e2b import Sandbox, FileType, FilesystemEventType
"""


def py(e2b_python, env, script, timeout=300):  # noqa: F811
    return run_python(e2b_python, env, script, timeout, imports=PY)


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


def test_get_metrics_gives_the_meters_readings(e2b_python, e2b_env):  # noqa: F811
    out = py(e2b_python, e2b_env, """
        import datetime
        start = datetime.datetime.now(datetime.timezone.utc)
        s = Sandbox.create(timeout=120)
        s.commands.run("dd if=/dev/urandom of=/tmp/blob bs=1M count=48 status=none; "
                       "timeout 6 sh -c 'while :; do :; done'; true", timeout=60)
        metrics = []
        for _ in range(60):
            metrics = s.get_metrics(start=start, end=datetime.datetime.now(datetime.timezone.utc))
            if len(metrics) >= 2:
                break
            time.sleep(0.5)
        old = s.get_metrics(start=start - datetime.timedelta(hours=1),
                            end=start - datetime.timedelta(minutes=30))
        s.kill()
        out({"n": len(metrics), "start": start.timestamp(), "old": len(old),
             "points": [[m.timestamp.timestamp(), m.cpu_count, m.cpu_used_pct, m.mem_used, m.mem_total,
                         m.disk_used, m.disk_total] for m in metrics]})
    """)
    assert out["n"] >= 2 and out["old"] == 0, out
    for at, cores, cpu, mem, mem_total, disk, disk_total in out["points"]:
        assert at >= out["start"] - 10, out
        assert cores >= 1 and 0 <= cpu <= 100 and 0 < mem <= mem_total and 0 <= disk <= disk_total
    # The busy loop and the 48 MiB written show.
    assert max(p[2] for p in out["points"]) > 5, out  # idle reads ~0.002
    assert max(p[5] for p in out["points"]) >= 40 << 20, out


def test_set_timeout_zero_ends_the_lease_now(e2b_python, e2b_env):  # noqa: F811
    out = py(e2b_python, e2b_env, """
        s = Sandbox.create(timeout=300, lifecycle={"on_timeout": "pause"})
        boot = s.files.read("/proc/sys/kernel/random/boot_id").strip()
        t0 = time.time()
        s.set_timeout(0)
        while s.is_running() and time.time() - t0 < 30:
            time.sleep(0.2)
        paused_after = time.time() - t0
        state = s.get_info().state.name
        s.connect()
        same = s.files.read("/proc/sys/kernel/random/boot_id").strip() == boot
        k = Sandbox.create(timeout=300)
        k.set_timeout(0)
        t0 = time.time()
        while k.is_running() and time.time() - t0 < 30:
            time.sleep(0.2)
        killed = Sandbox.list().next_items()  # the killed one is gone
        s.kill()
        out({"paused_after": paused_after, "state": state, "same": same,
             "killed_listed": k.sandbox_id in [x.sandbox_id for x in killed]})
    """)
    assert out["paused_after"] < 15 and out["state"] == "PAUSED" and out["same"], out
    assert not out["killed_listed"], out


def test_a_filesystem_pause_keeps_the_files_and_boots_afresh(e2b_python, e2b_env):  # noqa: F811
    out = py(e2b_python, e2b_env, """
        from e2b import SandboxState
        boot = lambda s: s.files.read("/proc/sys/kernel/random/boot_id").strip()
        # The lease's end, mode "filesystem" (E2B's auto-pause test).
        a = Sandbox.create(timeout=3, lifecycle={"on_timeout": {"action": "pause", "keep_memory": False}})
        a.files.write("/home/user/auto-pause-marker.txt", "kept")
        a_boot = boot(a)
        deadline = time.time() + 60
        while a.get_info().state != SandboxState.PAUSED and time.time() < deadline:
            time.sleep(0.5)
        a_state = a.get_info().state.name
        a.connect()
        a_after = [a.files.read("/home/user/auto-pause-marker.txt"), boot(a) != a_boot]
        # pause(mode="filesystem"): a background process does not survive it.
        b = Sandbox.create(timeout=300)
        b.commands.run("sleep 1000", background=True)
        b.files.write("kept.txt", "yes")
        b_boot = boot(b)
        b.pause(mode="filesystem")
        paused = b.is_running()
        b.connect()
        b_after = [b.files.read("kept.txt"), boot(b) != b_boot,
                   b.commands.run("pgrep -x sleep || true").stdout.strip()]
        # A full pause keeps memory; on_resume="reboot" of it is refused by name.
        c = Sandbox.create(timeout=300)
        c.pause()
        try:
            c.connect(on_resume="reboot")
            reboot = "connected"
        except Exception as e:
            reboot = str(e)
        for s in (a, b, c):
            s.kill()
        out({"a_state": a_state, "a_after": a_after, "paused": paused, "b_after": b_after,
             "reboot": reboot})
    """)
    assert out["a_state"] == "PAUSED" and out["a_after"] == ["kept", True], out
    assert out["paused"] is False and out["b_after"] == ["yes", True, ""], out
    assert "reboot" in out["reboot"] and "memory" in out["reboot"], out


def test_a_commands_timeout_and_a_kill_mid_command_as_the_async_sdk_reads_them(
        e2b_python, e2b_env):  # noqa: F811
    """E2B's async tests: a command past its timeout is a TimeoutException (envd ends the
    call deadline_exceeded, not with an end event), and a command cut by a kill says the
    sandbox was killed (the health probe's 502 carries the proxy's words)."""
    out = py(e2b_python, e2b_env, """
        import asyncio
        from e2b import AsyncSandbox, TimeoutException

        async def main():
            s = await AsyncSandbox.create(timeout=300)
            try:
                await s.commands.run("sleep 10", timeout=2)
                timed = "none"
            except TimeoutException as e:
                timed = type(e).__name__
            cmd = await s.commands.run("sleep 60", background=True)
            await s.kill()
            try:
                await cmd.wait()
                killed = "none"
            except TimeoutException as e:
                killed = str(e)
            return {"timed": timed, "killed": killed}

        out(asyncio.run(main()))
    """)
    assert out["timed"] == "TimeoutException", out
    assert "killed or reached its end of life" in out["killed"], out
