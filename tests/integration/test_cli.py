"""The kiln CLI against the test daemon (found through KILN_API_URL)."""
import json
import os
import subprocess

import pytest


@pytest.fixture(scope="module")
def kiln(kilnd, bin_dir):
    env = {**os.environ, "KILN_API_URL": kilnd.url, "KILN_API_KEY": kilnd.admin_key}

    def run(*args, timeout=120, api_url=None):
        e = env if api_url is None else {**env, "KILN_API_URL": api_url}
        return subprocess.run([str(bin_dir / "kiln"), *args], env=e, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    return run


def _json(p):
    assert p.returncode == 0, f"exit {p.returncode}: {p.stderr}"
    try:
        return json.loads(p.stdout)
    except ValueError:
        raise AssertionError(f"--json printed no single JSON value: {p.stdout!r}")


def _running_ids(api):
    return {s["id"] for s in api.ok("GET", "/v1/sandboxes", query={"limit": 500})["data"]}


def test_run_prints_output_and_cleans_up(kiln, api):
    before = _running_ids(api)
    p = kiln("sandbox", "run", "--", "sh", "-c", "echo out; echo err >&2")
    assert p.returncode == 0, p.stderr
    assert "out" in p.stdout.split() and "err" in p.stderr.split(), (p.stdout, p.stderr)
    assert _running_ids(api) <= before, "sandbox run left its sandbox running"


def test_run_exit_code_passes_through(kiln):
    p = kiln("sandbox", "run", "--", "sh", "-c", "exit 3")
    assert p.returncode == 3, (p.returncode, p.stderr)


def test_run_timeout_is_124(kiln):
    p = kiln("sandbox", "run", "--timeout-ms", "1000", "--", "sleep", "30", timeout=60)
    assert p.returncode == 124, (p.returncode, p.stderr)


def test_sandbox_commands(kiln, api):
    p = kiln("sandbox", "create")
    assert p.returncode == 0, p.stderr
    sid = p.stdout.strip()
    assert len(sid) == 36 and sid.count("-") == 4 and len(sid.split()) == 1, f"create should print only the id: {p.stdout!r}"
    try:
        assert api.sandbox(sid)["state"] == "running"
        info = _json(kiln("sandbox", "create", "--json"))
        assert info["state"] == "running" and len(info["id"]) == 36 and info["id"] != sid
        api.delete(info["id"])

        assert sid in kiln("sandbox", "ls").stdout
        listed = _json(kiln("sandbox", "ls", "--json"))
        rows = listed["data"] if isinstance(listed, dict) else listed
        assert sid in [s["id"] for s in rows]

        got = _json(kiln("sandbox", "get", sid, "--json"))
        assert (got["id"], got["state"], got["vcpu"]) == (sid, "running", 2)

        p = kiln("sandbox", "exec", sid, "--", "sh", "-c", "echo hi; echo oops >&2; exit 5")
        assert (p.returncode, p.stdout, p.stderr.strip().splitlines()[-1:]) == (5, "hi\n", ["oops"]), p
        p = kiln("sandbox", "exec", sid, "--", "echo", "$HOME")
        assert (p.returncode, p.stdout) == (0, "$HOME\n"), "argv must not go through a shell"
        r = _json_any(kiln("sandbox", "exec", sid, "--json", "--", "sh", "-c", "printf hi; exit 5"))
        assert (r["exitCode"], r["stdout"], r["timedOut"]) == (5, "hi", False), r

        stopped = _json(kiln("sandbox", "stop", sid, "--json"))
        assert (stopped["id"], stopped["state"]) == (sid, "stopped")
        assert api.sandbox(sid)["state"] == "stopped"
    finally:
        api.request("DELETE", f"/v1/sandboxes/{sid}")


def _json_any(p):
    """exec --json exits with the command's code but still prints one JSON value."""
    try:
        return json.loads(p.stdout)
    except ValueError:
        raise AssertionError(f"exit {p.returncode}, no JSON on stdout: {p.stdout!r} {p.stderr!r}")


def test_errors(kiln):
    p = kiln("sandbox", "get", "sbx_doesnotexist", "--json")
    assert p.returncode != 0 and "not_found" in p.stderr, (p.returncode, p.stdout, p.stderr)
    p = kiln("sandbox", "ls", api_url="http://127.0.0.1:9", timeout=60)
    assert p.returncode != 0 and p.stderr.strip(), "no daemon must be an error on stderr"
