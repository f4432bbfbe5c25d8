"""The kiln CLI's reference-shaped commands against the test daemon: spawn / ps / logs [-f] /
kill, cp (files and folders, both directions) and cat, run --timeout S, and the create/run
flags --trial, --paid, --no-internet and --max-cost."""
import json
import os
import stat
import subprocess
import time

import pytest


@pytest.fixture(scope="module")
def kiln_bytes(kilnd, bin_dir):
    """Runs kiln; stdout and stderr as bytes."""
    env = {**os.environ, "KILN_API_URL": kilnd.url, "KILN_API_KEY": kilnd.admin_key}

    def run(*args, timeout=120, text=False):
        return subprocess.run([str(bin_dir / "kiln"), *args], env=env, capture_output=True, text=text,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    return run


@pytest.fixture(scope="module")
def kiln(kiln_bytes):
    """Runs kiln; stdout and stderr as text."""
    def run(*args, timeout=120):
        return kiln_bytes(*args, timeout=timeout, text=True)
    return run


@pytest.fixture(scope="module")
def box(kiln, api):
    p = kiln("sandbox", "create", "--vcpu", "1", "--memory", "256", "--label", "suite=cli-processes")
    assert p.returncode == 0, p.stderr
    sid = p.stdout.strip()
    yield sid
    api.request("DELETE", f"/v1/sandboxes/{sid}")


def _ok(p):
    assert p.returncode == 0, f"exit {p.returncode}: {p.stdout!r} {p.stderr!r}"
    return p


def test_spawn_ps_logs_kill(kiln, box):
    pid = _ok(kiln("sandbox", "spawn", box, "--", "sh", "-c",
                   "echo started; echo warn >&2; while true; do sleep 0.1; done")).stdout.strip()
    assert pid and len(pid.split()) == 1, "spawn prints only the process id"
    table = _ok(kiln("sandbox", "ps", box)).stdout
    assert pid in table and "running" in table and "ID" in table.splitlines()[0]
    listed = json.loads(_ok(kiln("sandbox", "ps", box, "--json")).stdout)
    assert [p["state"] for p in listed["data"] if p["id"] == pid] == ["running"]

    deadline = time.time() + 10
    while True:
        logs = _ok(kiln("sandbox", "logs", box, pid))
        if "started" in logs.stdout or time.time() > deadline:
            break
        time.sleep(0.2)
    assert logs.stdout == "started\n" and logs.stderr == "warn\n", logs

    assert _ok(kiln("sandbox", "kill", box, pid, "--signal", "KILL")).stdout.strip() == pid
    deadline = time.time() + 10
    while True:
        info = [p for p in json.loads(kiln("sandbox", "ps", box, "--json").stdout)["data"] if p["id"] == pid][0]
        if info["state"] != "running" or time.time() > deadline:
            break
        time.sleep(0.2)
    assert info["state"] == "killed" and info["signal"] == "SIGKILL", info


def test_logs_follow_until_the_process_ends(kiln, box):
    pid = _ok(kiln("sandbox", "spawn", box, "--", "sh", "-c",
                   "for i in 1 2 3; do echo line $i; sleep 0.3; done; echo bye >&2")).stdout.strip()
    p = _ok(kiln("sandbox", "logs", box, pid, "-f", timeout=60))
    assert p.stdout == "line 1\nline 2\nline 3\n" and p.stderr == "bye\n", p


def test_kill_refuses_an_unknown_signal(kiln, box):
    p = kiln("sandbox", "kill", box, "p1", "--signal", "STOP")
    assert p.returncode == 1 and "--signal" in p.stderr, p


def test_cp_and_cat_files(kiln, kiln_bytes, box, tmp_path):
    src = tmp_path / "run.sh"
    src.write_bytes(b"#!/bin/sh\necho from a script\n" + bytes(range(256)))
    src.chmod(0o750)
    _ok(kiln("sandbox", "cp", str(src), f"{box}:/workspace/bin/run.sh"))
    assert _ok(kiln("sandbox", "exec", box, "--", "stat", "-c", "%a", "/workspace/bin/run.sh")).stdout == "750\n"
    cat = kiln_bytes("sandbox", "cat", box, "/workspace/bin/run.sh")
    assert cat.returncode == 0 and cat.stdout == src.read_bytes()

    # A file onto an existing folder goes inside it; back to a local folder likewise.
    _ok(kiln("sandbox", "cp", str(src), f"{box}:/workspace/bin"))
    out = tmp_path / "out"
    out.mkdir()
    _ok(kiln("sandbox", "cp", f"{box}:/workspace/bin/run.sh", str(out)))
    assert (out / "run.sh").read_bytes() == src.read_bytes()
    assert stat.S_IMODE((out / "run.sh").stat().st_mode) == 0o750
    assert not list(out.glob("*.kiln-partial"))

    p = kiln("sandbox", "cp", f"{box}:/workspace/nope", str(out / "x"))
    assert p.returncode != 0 and "file_not_found" in p.stderr + p.stdout, p
    p = kiln("sandbox", "cat", box, "/workspace/nope")
    assert p.returncode != 0 and "/workspace/nope" in p.stderr, p
    p = kiln("sandbox", "cp", str(src), str(out / "y"))
    assert p.returncode == 1 and "ID:/path" in p.stderr, p


def test_cp_folders_both_ways(kiln, box, tmp_path):
    tree = tmp_path / "project"
    (tree / "src" / "deep").mkdir(parents=True)
    (tree / "src" / "main.py").write_text("print('hi')\n")
    (tree / "src" / "deep" / "data.bin").write_bytes(os.urandom(300_000))
    (tree / ".hidden").write_text("h")
    (tree / "tool").write_text("#!/bin/sh\n")
    (tree / "tool").chmod(0o755)
    _ok(kiln("sandbox", "cp", str(tree), f"{box}:/workspace/project"))
    r = _ok(kiln("sandbox", "exec", box, "--", "sh", "-c",
                 "cd /workspace/project && find . -type f | sort && stat -c %a tool && "
                 "python3 src/main.py"))
    assert r.stdout == "./.hidden\n./src/deep/data.bin\n./src/main.py\n./tool\n755\nhi\n", r.stdout

    back = tmp_path / "copy"
    _ok(kiln("sandbox", "cp", f"{box}:/workspace/project", str(back)))
    for rel in (".hidden", "src/main.py", "src/deep/data.bin", "tool"):
        assert (back / rel).read_bytes() == (tree / rel).read_bytes(), rel
    assert stat.S_IMODE((back / "tool").stat().st_mode) == 0o755


def test_run_timeout_in_seconds_and_lifecycle_flags(kiln, api):
    p = kiln("sandbox", "run", "--timeout", "1", "--", "sleep", "30", timeout=60)
    assert p.returncode == 124, (p.returncode, p.stderr)
    # The proxy's verdict for an address of this machine (nothing could leave it).
    own = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()[0]
    p = kiln("sandbox", "run", "--no-internet", "--max-cost", "100000000", "--", "sh", "-c",
             f"curl -s -m 5 -D - -o /dev/null http://{own}/ | grep -i '^x-kiln-egress'")
    assert p.returncode == 0 and p.stdout.strip().lower() == "x-kiln-egress: internet-off", (p.stdout, p.stderr)
    p = kiln("sandbox", "run", "--trial", "--paid", "--", "true")
    assert p.returncode == 1 and "--trial or --paid" in p.stderr, p
    p = kiln("sandbox", "run", "--max-cost", "0", "--", "true")
    assert p.returncode != 0 and "budget_exceeded" in p.stderr, p
    help_text = kiln("sandbox", "run", "--help").stdout
    assert "--trial" in help_text and "no trial" in help_text and "--timeout S" in help_text

