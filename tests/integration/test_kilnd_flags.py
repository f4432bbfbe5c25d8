"""kilnd's own command line: --help, --version, bad flags, and the runsc it runs."""
import os
import shutil
import subprocess
import tempfile

from client import Client
from conftest import BIN_DIR, start_kilnd, stop_kilnd
from host import runsc_of

KILND = str(BIN_DIR / "kilnd")


def run(*args):
    return subprocess.run([KILND, *args], capture_output=True, text=True, timeout=60)


def test_help_lists_the_flags_and_exits_0():
    r = run("--help")
    assert r.returncode == 0, r
    for flag in ("--listen", "--state-dir", "--runsc", "--pool-size", "--memory-overcommit", "--version"):
        assert flag in r.stdout, f"{flag} missing from --help:\n{r.stdout}"


def test_bad_flags_are_refused_with_the_flag_named():
    for args, named in ((["--pool-size", "lots"], "--pool-size"), (["--platform", "kvm"], "--platform"),
                        (["--memory-overcommit", "-1"], "--memory-overcommit"), (["--no-such-flag"], "--no-such-flag"),
                        (["--prices", "/nonexistent/prices.json"], "--prices")):
        r = run(*args)
        assert r.returncode == 2, (args, r)
        assert named in r.stderr, (args, r.stderr)


def test_version_names_the_pinned_runsc():
    r = run("--version")
    assert r.returncode == 0, r
    kiln_line, runsc_line = r.stdout.splitlines()[:2]
    assert kiln_line.startswith("kilnd ") and "VERSION_MISSING" not in r.stdout
    words = runsc_line.split()
    assert words[0] == "runsc" and words[3] == "(pinned)", runsc_line
    out = subprocess.run([words[2], "--version"], capture_output=True, text=True).stdout
    assert f"runsc version {words[1]}" in out, out


def test_another_runsc_is_named_at_start_and_in_health(tmp_path):
    real = runsc_of(KILND)
    # A runsc that reports another version and otherwise is the real one.
    fake = tmp_path / "runsc"
    fake.write_text(f'#!/bin/sh\n[ "$1" = --version ] && {{ echo "runsc version other-1.0"; exit 0; }}\n'
                    f'exec {real} "$@"\n')
    fake.chmod(0o755)
    state = tempfile.mkdtemp(prefix="kiln-flags-", dir="/tmp")
    d = start_kilnd(state, "--runsc", str(fake))
    try:
        engine = Client(d.url).health().json()["engine"]
        pinned = run("--version").stdout.splitlines()[1].split()[1]
        assert engine == {"name": "gvisor", "version": "other-1.0", "pinned": False, "pinnedVersion": pinned}
        log = d.log_path.read_text()
        assert "not the pinned version" in log and "other-1.0" in log and str(fake) in log
        api = Client(d.url, key=d.admin_key)
        metrics = api.get("/metrics").body.decode()
        assert 'engine_version="other-1.0"' in metrics and 'engine_pinned="false"' in metrics
    finally:
        assert stop_kilnd(d) == 0
        shutil.rmtree(state, ignore_errors=True)
        os.unlink(state + ".log")


def test_a_runsc_that_cannot_run_stops_kilnd(tmp_path):
    state = tempfile.mkdtemp(prefix="kiln-flags-", dir="/tmp")
    try:
        r = subprocess.run([KILND, "--listen", "127.0.0.1:0", "--state-dir", state, "--image-dir", "/nonexistent",
                            "--runsc", "/nonexistent/runsc"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1
        out = r.stdout + r.stderr
        # The start-up check names the path and what failed (test_faults_engine.py
        # covers the other ways a runsc can fail).
        assert "cannot start: runsc /nonexistent/runsc not found" in out, out
    finally:
        shutil.rmtree(state, ignore_errors=True)
