"""Pause, wake, get_or_create, names and limits from the clients (issue 14): the Python SDK
(sync and async), the TypeScript SDK (sdk/js/test/pause/pause.test.mjs) and the CLI, against
the contract of the server side (POST …:pause / …:wake, create's pausable, idlePauseSeconds,
autoWake, onLeaseEnd, persistent, maxTotalCostMicros, sudo, getOrCreate; 409 name_taken,
not_paused, not_pausable, sandbox_paused; GET /v1/sandboxes?name=; GET /v1/limits)."""
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from test_sdk_js import SDK, _node_test, built, node  # noqa: F401 -- fixtures of the JS SDK build

SDK_DIR = Path(__file__).resolve().parents[2] / "sdk" / "python"
sys.path.insert(0, str(SDK_DIR))
import kiln  # noqa: E402
from kiln import AsyncRuntime, Runtime, Sandbox  # noqa: E402

# These modules build sdk/js (npm ci, tsc) in place: one worker runs them all.
pytestmark = pytest.mark.xdist_group("sdk_js")

SMALL = {"vcpu": 1, "memory_mib": 256}
INFO_FIELDS = ("pausable", "idlePauseSeconds", "autoWake", "persistent", "onLeaseEnd", "pausedAt",
               "maxTotalCostMicros", "sudo")


@pytest.fixture
def rt(kilnd, monkeypatch):
    for name in ("RUNTIME_API_URL", "RUNTIME_API_KEY", "KILN_API_URL", "KILN_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    made = []
    runtime = Runtime(kilnd.admin_key, kilnd.url)
    real_create = runtime.sandboxes.create

    def create(**fields):
        sbx = real_create(**{**SMALL, "labels": {"suite": "pause-clients"}, **fields})
        made.append(sbx)
        return sbx
    runtime.sandboxes.create = create
    yield runtime
    for sbx in made:
        try:
            sbx.delete()
        except kiln.KilnError:
            pass
    runtime.close()


def _name():
    return f"pc-{uuid.uuid4().hex[:8]}"


def test_pause_then_wake_keeps_the_id_and_the_processes(rt):
    sbx = rt.sandboxes.create()
    for field in INFO_FIELDS:
        assert field in sbx.info, field
    assert (sbx.info["pausable"], sbx.info["autoWake"], sbx.info["pausedAt"]) == (True, True, None)
    sbx.spawn("i=0; while true; do i=$((i+1)); echo $i > /tmp/n.t; mv /tmp/n.t /tmp/n; sleep 0.05; done")
    sbx.exec("sleep 0.3")
    info = sbx.pause()
    assert info["state"] == "paused" and info["pausedAt"] and sbx.paused
    assert rt.sandboxes.get(sbx.id).state == "paused"
    assert [s.id for s in rt.sandboxes.list(state="paused", labels={"suite": "pause-clients"})].count(sbx.id) == 1
    sbx.wake(timeout_seconds=600)
    assert sbx.state == "running" and rt.sandboxes.get(sbx.id).state == "running"
    n1 = int(sbx.exec("cat /tmp/n").stdout)
    time.sleep(0.3)
    n2 = int(sbx.exec("cat /tmp/n").stdout)
    assert 0 < n1 < n2, "the process went on counting after the wake"
    assert sbx.wake()["state"] == "running"  # already awake: success
    with pytest.raises(kiln.ConflictError) as ei:
        sbx.wake(timeout_seconds=600)
    assert ei.value.code == "not_paused"


def test_a_files_only_pause_and_metrics_from_python(rt):
    sbx = rt.sandboxes.create(pause_memory=False)
    assert sbx.info["pauseMemory"] is False
    sbx.exec("echo kept > /workspace/f; timeout 3 sh -c 'while :; do :; done'; true")
    boot = sbx.exec("cat /proc/sys/kernel/random/boot_id").stdout
    sbx.pause()
    assert sbx.paused
    sbx.wake()
    assert sbx.exec("cat /workspace/f").stdout == "kept\n"
    assert sbx.exec("cat /proc/sys/kernel/random/boot_id").stdout != boot
    deadline = time.monotonic() + 30
    while not (m := sbx.metrics(range="1h"))["latest"]:
        assert time.monotonic() < deadline, m
        time.sleep(1)
    assert m["latest"]["cpuCores"] == 1 and m["points"], m
    # The readings of before the pause are kept beside those after it.
    assert max(p["cpuPeakPercent"] for p in m["points"]) > 0, m
    with pytest.raises(kiln.KilnError):
        sbx.metrics(range="2h")


def test_auto_wake_and_refusals(rt):
    sbx = rt.sandboxes.create()
    sbx.pause()
    assert sbx.exec("echo up").stdout == "up\n"  # auto_wake (default) wakes it first
    assert sbx.refresh()["state"] == "running"
    sbx.pause()
    assert sbx.files.read_text("/etc/hostname")  # a file call wakes it too
    assert sbx.refresh()["state"] == "running"

    stiff = rt.sandboxes.create(auto_wake=False)
    assert stiff.info["autoWake"] is False
    stiff.pause()
    with pytest.raises(kiln.ConflictError) as ei:
        stiff.exec("true")
    assert ei.value.code == "sandbox_paused"
    stiff.wake()
    assert stiff.exec("echo ok").stdout == "ok\n"

    rigid = rt.sandboxes.create(pausable=False)
    with pytest.raises(kiln.ConflictError) as ei:
        rigid.pause()
    assert ei.value.code == "not_pausable"
    rigid.stop()
    with pytest.raises(kiln.ConflictError) as ei:
        rigid.pause()
    assert ei.value.code == "not_running"


def test_get_or_create_and_unique_names(rt):
    name = _name()
    first = rt.sandboxes.get_or_create(name, idle_pause_seconds=900)
    try:
        assert (first.info["name"], first.info["reused"], first.info["idlePauseSeconds"]) == (name, False, 900)
        again = Sandbox.get_or_create(name, client=rt)
        assert again.id == first.id and again.info["reused"] is True
        first.pause()
        woken = rt.sandboxes.get_or_create(name)
        assert (woken.id, woken.state, woken.info["reused"]) == (first.id, "running", True)
        with pytest.raises(kiln.ConflictError) as ei:
            rt.sandboxes.create(name=name)
        assert ei.value.code == "name_taken" and ei.value.details["sandboxId"] == first.id
        assert [s.id for s in rt.sandboxes.list(name=name)] == [first.id]
        first.stop()
        # A stopped sandbox frees its name.
        fresh = rt.sandboxes.get_or_create(name)
        assert fresh.id != first.id and fresh.info["reused"] is False
        fresh.delete()
    finally:
        first.delete()


def test_create_fields_validation_and_limits(rt):
    sbx = rt.sandboxes.create(idle_pause_seconds=0, on_lease_end="pause", persistent=False, sudo=False,
                              max_total_cost_micros=9_000_000, funding="paid", region="anywhere")
    i = sbx.info
    assert (i["idlePauseSeconds"], i["onLeaseEnd"], i["persistent"], i["sudo"], i["maxTotalCostMicros"]) == \
        (0, "pause", False, False, 9_000_000)
    with pytest.raises(kiln.InvalidRequestError) as ei:
        rt.sandboxes.create(idle_pause_seconds=5)
    assert "idlePauseSeconds" in str(ei.value)
    with pytest.raises(kiln.InvalidRequestError) as ei:
        rt.sandboxes.create(volumes=[{"volume_id": "v1", "path": "/data"}])
    assert ei.value.code == "not_supported"
    limits = rt.limits.get()
    assert limits["access"] == "full" and limits["trial"] is None
    assert limits["daily"]["window"] == "24h" and "usedMicros" in limits["daily"]


def test_async_pause_wake_get_or_create(kilnd):
    name = _name()

    async def go():
        async with AsyncRuntime(kilnd.admin_key, kilnd.url) as art:
            sbx = await art.sandboxes.get_or_create(name, **SMALL)
            try:
                await sbx.pause()
                paused = sbx.state
                again = await art.sandboxes.get_or_create(name)
                await sbx.refresh()
                await sbx.pause()
                await sbx.wake()
                limits = await art.limits.get()
                return paused, again.id == sbx.id, again.info["reused"], sbx.state, limits["access"]
            finally:
                await sbx.delete()

    assert asyncio.run(go()) == ("paused", True, True, "running", "full")


# --- the CLI ------------------------------------------------------------------


@pytest.fixture(scope="module")
def kiln_cli(kilnd, bin_dir):
    env = {**os.environ, "KILN_API_URL": kilnd.url, "KILN_API_KEY": kilnd.admin_key}

    def run(*args, timeout=120):
        return subprocess.run([str(bin_dir / "kiln"), *args], env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    return run


def test_cli_get_or_create_pause_wake(kiln_cli, api):
    name = _name()
    p = kiln_cli("sandbox", "create", "--vcpu", "1", "--memory", "256", "--name", name, "--get-or-create",
                 "--idle-pause", "900", "--on-lease-end", "pause", "--no-sudo", "--max-total-cost", "9000000")
    assert p.returncode == 0, p.stderr
    sid = p.stdout.strip()
    try:
        info = api.sandbox(sid)
        assert (info["name"], info["idlePauseSeconds"], info["onLeaseEnd"], info["sudo"],
                info["maxTotalCostMicros"]) == (name, 900, "pause", False, 9000000)
        p = kiln_cli("sandbox", "create", "--name", name, "--get-or-create")
        assert (p.returncode, p.stdout.strip()) == (0, sid), p.stderr
        assert kiln_cli("sandbox", "pause", sid).stdout.strip() == sid
        got = json.loads(kiln_cli("sandbox", "get", sid, "--json").stdout)
        assert got["state"] == "paused" and got["pausedAt"]
        assert "paused" in kiln_cli("sandbox", "get", sid).stdout
        p = kiln_cli("sandbox", "wake", sid)
        assert (p.returncode, p.stdout.strip()) == (0, sid), p.stderr
        assert api.sandbox(sid)["state"] == "running"
        assert kiln_cli("sandbox", "wake", sid).returncode == 0  # awake already: fine
        p = kiln_cli("sandbox", "wake", sid, "--timeout", "600")
        assert p.returncode != 0 and "not_paused" in p.stderr, p
        p = kiln_cli("sandbox", "create", "--name", name)
        assert p.returncode != 0 and "name_taken" in p.stderr, p
        # A files-only pause, and the metrics the meter read meanwhile.
        boot = api.sh(sid, "cat /proc/sys/kernel/random/boot_id")
        assert kiln_cli("sandbox", "pause", sid, "--files-only").returncode == 0
        assert kiln_cli("sandbox", "wake", sid).returncode == 0
        assert api.sh(sid, "cat /proc/sys/kernel/random/boot_id") != boot
        m = json.loads(kiln_cli("sandbox", "metrics", sid, "--range", "1h", "--json").stdout)
        assert m["latest"] and m["points"], m
        table = kiln_cli("sandbox", "metrics", sid).stdout
        assert table.startswith("AT") and "CPU%" in table, table
        p = kiln_cli("sandbox", "metrics", sid, "--range", "2h")
        assert p.returncode != 0 and "range" in p.stderr, p
        p = kiln_cli("sandbox", "create", "--vcpu", "1", "--memory", "256", "--pause-files-only")
        other = p.stdout.strip()
        assert p.returncode == 0 and api.sandbox(other)["pauseMemory"] is False, p.stderr
        api.request("DELETE", f"/v1/sandboxes/{other}")
    finally:
        api.request("DELETE", f"/v1/sandboxes/{sid}")


def test_cli_trial_and_paid_are_accepted(kiln_cli):
    # funding is accepted and ignored by the server: a local daemon has no trial.
    p = kiln_cli("sandbox", "run", "--trial", "--vcpu", "1", "--memory", "256", "--", "echo", "ok")
    assert (p.returncode, p.stdout) == (0, "ok\n"), p.stderr
    p = kiln_cli("sandbox", "run", "--paid", "--vcpu", "1", "--memory", "256", "--", "true")
    assert p.returncode == 0, p.stderr


def test_cli_auto_wake_off(kiln_cli, api):
    p = kiln_cli("sandbox", "create", "--vcpu", "1", "--memory", "256", "--auto-wake", "off", "--persistent")
    assert p.returncode == 0, p.stderr
    sid = p.stdout.strip()
    try:
        assert (api.sandbox(sid)["autoWake"], api.sandbox(sid)["persistent"]) == (False, True)
        assert kiln_cli("sandbox", "pause", sid).returncode == 0
        p = kiln_cli("sandbox", "exec", sid, "--", "true")
        assert p.returncode != 0 and "sandbox_paused" in p.stderr, p
    finally:
        api.request("DELETE", f"/v1/sandboxes/{sid}")


# --- the TypeScript SDK ----------------------------------------------------------


def test_typescript_sdk_pause_wake_get_or_create(node, built, kilnd):  # noqa: F811
    _node_test(node, built, kilnd, SDK / "test" / "pause" / "pause.test.mjs", timeout=300)


def test_update_and_a_pty_process_from_python(rt):
    sbx = rt.sandboxes.create(env={"A": "1", "B": "2"})
    info = sbx.update(env={"A": "9", "B": None}, auto_wake=False, max_total_cost_micros=10_000_000)
    assert info["envNames"] == ["A"] and info["autoWake"] is False and info["maxTotalCostMicros"] == 10_000_000
    assert sbx.exec("echo $A-${B:-unset}").stdout == "9-unset\n"
    with pytest.raises(TypeError):
        sbx.update(vcpu=4)
    p = sbx.spawn("stty size; read x; stty size", pty={"cols": 100, "rows": 30}, stdin="pipe")
    deadline = time.monotonic() + 10
    while (p.refresh().get("outputBytes") or 0) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)  # the first size is printed before the resize
    p.resize(120, 40)
    p.write("\n")
    out = p.wait().stdout
    assert "30 100" in out and "40 120" in out, out
    root = sbx.spawn("id -u", user="root")
    assert root.wait().stdout.strip() == "0"
