"""The kiln CLI against the test daemon (found through KILN_API_URL)."""
import json
import os
import subprocess
from pathlib import Path

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


def _lines(p):
    assert p.returncode == 0, f"exit {p.returncode}: {p.stderr}"
    return p.stdout.splitlines()


def test_snapshot_round_trip(kiln, api, sandboxes):
    sid = sandboxes.create()["id"]
    p = kiln("sandbox", "snapshot", sid, "--name", "cli-snap", "--retention-days", "1")
    assert p.returncode == 0, p.stderr
    assert p.stderr == "", "no progress line when stderr is not a terminal"
    snap_id = p.stdout.strip()
    assert snap_id and len(p.stdout.split()) == 1, f"snapshot should print only the id: {p.stdout!r}"
    other = _json(kiln("sandbox", "snapshot", sid, "--json", "--label", "t=cli", "--disk"))
    try:
        assert (other["kind"], other["sourceSandboxId"], other["labels"]) == ("snapshot", sid, {"t": "cli"})
        assert other["mode"] == "disk" and _json(kiln("snapshot", "get", snap_id, "--json"))["mode"] == "memory"
        assert other["id"] != snap_id

        table = _lines(kiln("snapshot", "ls"))
        assert table[0].split()[:3] == ["ID", "NAME", "SANDBOX"], table
        assert any(line.split()[:3] == [snap_id, "cli-snap", sid] for line in table), table
        listed = _json(kiln("snapshot", "ls", "--json", "--sandbox", sid))
        assert {s["id"] for s in listed["data"]} == {snap_id, other["id"]}
        assert [s["id"] for s in _json(kiln("snapshot", "ls", "--json", "--name", "cli-snap"))["data"]] == [snap_id]

        got = _json(kiln("snapshot", "get", snap_id, "--json"))
        assert (got["id"], got["name"], got["retentionDays"], got["state"]) == (snap_id, "cli-snap", 1, "ready")
        text = kiln("snapshot", "get", snap_id).stdout
        assert text.startswith("id:") and snap_id in text and "sourceSandboxId:" in text, text

        p = kiln("snapshot", "rm", snap_id)
        assert (p.returncode, p.stdout) == (0, snap_id + "\n"), p
        gone = _json(kiln("snapshot", "delete", other["id"], "--json"))
        assert (gone["id"], gone["state"]) == (other["id"], "deleted")
        p = kiln("snapshot", "get", snap_id, "--json")
        assert p.returncode == 1 and json.loads(p.stderr)["error"]["code"] == "snapshot_not_found", p
        assert snap_id not in kiln("snapshot", "ls").stdout
        assert api.sandbox(sid)["state"] == "running", "the source keeps running"
    finally:
        for s in (snap_id, other["id"]):
            api.request("POST", f"/v1/snapshots/{s}:delete", json={})


def test_fork_count_2(kiln, api, sandboxes):
    sid = sandboxes.create()["id"]
    copies = []
    try:
        p = kiln("sandbox", "fork", sid, "--count", "2", timeout=300)
        rows = _lines(p)
        assert p.stderr == "", "no progress line when stderr is not a terminal"
        assert rows[0].split()[:2] == ["ID", "STATE"], rows
        copies = [r.split()[0] for r in rows[1:]]
        assert len(copies) == 2 and sid not in copies, rows
        for c in copies:
            assert api.sandbox(c)["state"] == "running"
        # The fork's own snapshot is gone (no --keep-snapshot).
        assert not _json(kiln("snapshot", "ls", "--json", "--sandbox", sid))["data"]

        answer = _json(kiln("sandbox", "fork", sid, "--json", "--keep-snapshot", "--label", "via=cli", timeout=300))
        copies += [s["id"] for s in answer["sandboxes"]]
        assert len(answer["sandboxes"]) == 1 and answer["sandboxes"][0]["labels"] == {"via": "cli"}
        kept = _json(kiln("snapshot", "ls", "--json", "--sandbox", sid))["data"]
        assert len(kept) == 1, kept
        api.request("POST", f"/v1/snapshots/{kept[0]['id']}:delete", json={})
    finally:
        for c in copies:
            api.request("DELETE", f"/v1/sandboxes/{c}")


def test_extend(kiln, api, sandboxes):
    info = sandboxes.create(timeoutSeconds=120)
    sid = info["id"]
    lines = _lines(kiln("sandbox", "extend", sid, "--seconds", "600"))
    assert lines[0].split() == ["id:", sid], lines
    assert lines[1].split()[0] == "expiresAt:", lines
    expires = lines[1].split()[1]
    assert expires > info["expiresAt"] and expires == api.sandbox(sid)["expiresAt"]
    again = _json(kiln("sandbox", "extend", sid, "--seconds", "60", "--json"))
    assert again["id"] == sid and again["expiresAt"] >= expires
    p = kiln("sandbox", "extend", sid)
    assert p.returncode == 1 and "missing --seconds" in p.stderr, p
    p = kiln("sandbox", "extend", sid, "--seconds", "86401", "--json")
    assert p.returncode == 1 and json.loads(p.stderr)["error"]["code"] == "invalid_request", p


def test_usage(kiln, sandboxes):
    sandboxes.create(labels={"team": "cli"})
    table = _lines(kiln("usage"))
    assert table[0].split() == ["GROUP", "SANDBOXES", "CPU_SECONDS", "GIB_HOURS", "GB_MONTHS", "COST_MICROS"], table
    usage = _json(kiln("usage", "--json"))
    assert usage["unit"] == "micros" and usage["groupBy"] is None and "total" in usage
    by_key = _json(kiln("usage", "--json", "--group-by", "key", "--from", "1d"))
    assert by_key["groupBy"] == "key" and by_key["data"], by_key
    by_label = _json(kiln("usage", "--json", "--group-by", "label:team"))
    assert "cli" in [g["group"] for g in by_label["data"]], by_label
    table = _lines(kiln("usage", "--group-by", "label:team", "--from", "2020-01-01T00:00:00Z"))
    assert any(line.split()[0] == "cli" for line in table[1:]) and table[-1].split()[0] == "TOTAL", table
    p = kiln("usage", "--from", "yesterday", "--json")
    assert p.returncode == 1 and json.loads(p.stderr)["error"]["code"] == "invalid_request", p


def test_create_waits_quietly(kiln, api):
    p = kiln("sandbox", "create", "--wait", "5")
    assert p.returncode == 0 and p.stderr == "", p
    sid = p.stdout.strip()
    try:
        assert api.sandbox(sid)["state"] == "running"
        p = kiln("sandbox", "create", "--wait", "500")
        assert p.returncode == 1 and "--wait" in p.stderr, p
    finally:
        api.request("DELETE", f"/v1/sandboxes/{sid}")


def test_completion_script(kiln, bin_dir, tmp_path):
    p = kiln("completion", "bash")
    assert p.returncode == 0, p.stderr
    committed = Path(__file__).resolve().parents[2] / "scripts" / "kiln-completion.bash"
    assert p.stdout == committed.read_text(), "scripts/kiln-completion.bash is stale: regenerate it"
    assert _json(kiln("completion", "bash", "--json"))["script"] == p.stdout
    script = tmp_path / "kiln.bash"
    script.write_text(p.stdout)
    probe = ('t() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _kiln; '
             'echo "${COMPREPLY[*]}"; }\n'
             't kiln sn\nt kiln sandbox f\nt kiln sandbox fork s --c\nt kiln usage --group-by ""\n')
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", f"source {script}\n{probe}"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["snapshot", "fork", "--count", "key label:"], out.stdout
    p = kiln("completion", "zsh")
    assert p.returncode == 1 and "bash" in p.stderr, p


def test_network_policy_and_log(kiln, api):
    p = kiln("sandbox", "create", "--allow", "pkgs.test")
    assert p.returncode == 0, p.stderr
    sid = p.stdout.strip()
    try:
        assert api.sandbox(sid)["network"] == {"internet": True, "allow": ["pkgs.test"], "deny": []}
        shown = dict(line.split(":", 1) for line in _lines(kiln("sandbox", "network", sid)))
        assert {k: v.strip() for k, v in shown.items() if k in ("internet", "allow", "deny", "version")} == \
            {"internet": "on", "allow": "pkgs.test", "deny": "-", "version": "1"}, shown
        policy = _json(kiln("sandbox", "network", sid, "--json"))
        assert (policy["sandboxId"], policy["internet"], policy["allow"], policy["version"]) == \
            (sid, True, ["pkgs.test"], 1), policy

        # A usage error sends nothing: the policy is unchanged.
        p = kiln("sandbox", "network", sid, "--internet", "off", "--allow", "pkgs.test")
        assert p.returncode == 1 and "--allow implies --internet on" in p.stderr, p
        p = kiln("sandbox", "network", sid, "--deny", "x.test")
        assert p.returncode == 1 and "--internet on or off" in p.stderr, p
        assert api.ok("GET", f"/v1/sandboxes/{sid}/network")["version"] == 1

        lines = _lines(kiln("sandbox", "network", sid, "--internet", "off"))
        assert lines[0].split() == ["internet:", "off"] and lines[1].split() == ["allow:", "-"], lines
        off = _json(kiln("sandbox", "network", sid, "--json"))
        assert (off["internet"], off["allow"], off["deny"], off["version"]) == (False, [], [], 2), off

        p = kiln("sandbox", "exec", sid, "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                 "http://example.test/")
        assert (p.returncode, p.stdout) == (0, "403"), p
        log = _json(kiln("sandbox", "network", sid, "--log", "--json"))
        assert log["nextCursor"] is None, log
        assert [(e["host"], e["verdict"]) for e in log["data"]] == [("example.test", "internet-off")], log
        table = _lines(kiln("sandbox", "network", sid, "--log", "--limit", "1"))
        assert table[0].split() == ["TIME", "METHOD", "HOST", "ADDRESS", "PORT", "VERDICT", "OUT", "IN", "MS"]
        assert len(table) == 2 and table[1].split()[2:6] == ["example.test", "-", "80", "internet-off"], table
        p = kiln("sandbox", "network", sid, "--log", "--allow", "pkgs.test")
        assert p.returncode == 1 and "--log" in p.stderr, p
    finally:
        api.request("DELETE", f"/v1/sandboxes/{sid}")


def test_fork_with_a_network_policy(kiln, api, sandboxes):
    sid = sandboxes.create(network={"internet": True})["id"]
    copies = []
    try:
        answer = _json(kiln("sandbox", "fork", sid, "--json", "--allow", "pkgs.test,*.pkgs.test",
                            "--deny", "bad.pkgs.test", timeout=300))
        copies = [s["id"] for s in answer["sandboxes"]]
        assert len(copies) == 1, answer
        assert api.sandbox(copies[0])["network"] == \
            {"internet": True, "allow": ["pkgs.test", "*.pkgs.test"], "deny": ["bad.pkgs.test"]}
        assert api.sandbox(sid)["network"] == {"internet": True, "allow": [], "deny": []}
    finally:
        for c in copies:
            api.request("DELETE", f"/v1/sandboxes/{c}")
