"""The public runtime API's call shapes (issue 14): client construction, create fields,
pause/wake, get_or_create, limits, file listing filters, fork names. Against the fake server
of test_fake_server.py: no kilnd."""
import asyncio

import pytest

import kiln
from kiln import AsyncRuntime, Runtime, Sandbox
from test_fake_server import INFO, KEY, SID, FakeServer, err_body, sandbox  # noqa: F401

ENV = ("RUNTIME_API_URL", "RUNTIME_API_KEY", "KILN_API_URL", "KILN_API_KEY")


@pytest.fixture
def server(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    s = FakeServer()
    yield s
    s.stop()


@pytest.fixture
def rt(server):
    r = Runtime(KEY, server.url, wait_for_capacity=5, timeout=5)
    yield r
    r.close()


# --- construction ---------------------------------------------------------------


def test_runtime_takes_key_then_base_url(server):
    with Runtime(KEY, server.url) as r:
        server.answer(200, INFO)
        r.sandboxes.get(SID)
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"
    assert r.base_url == server.url and r.max_connections == 32


def test_runtime_keywords_and_defaults(server, monkeypatch):
    with Runtime(api_key=KEY, base_url=server.url, timeout=7, max_retries=1, max_connections=3,
                 wait_for_capacity=9) as r:
        assert (r.timeout, r.max_connections, r.wait_for_capacity) == (7, 3, 9)
    monkeypatch.setenv("RUNTIME_API_URL", server.url)
    with Runtime("only-a-key") as r:  # the URL from the environment
        server.answer(200, INFO)
        r.sandboxes.get(SID)
    assert server.requests[-1]["headers"]["authorization"] == "Bearer only-a-key"


def test_runtime_older_url_key_order_still_works(server):
    with Runtime(server.url, KEY) as r:
        server.answer(200, INFO)
        r.sandboxes.get(SID)
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"


def test_runtime_refuses_bad_arguments(server):
    with pytest.raises(ValueError):
        Runtime(KEY, "not-a-url")
    with pytest.raises(ValueError):
        Runtime(KEY, server.url, max_connections=0)
    with pytest.raises(TypeError):
        Runtime(KEY, server.url, 120)  # wait_for_capacity is keyword-only now


def test_max_connections_caps_calls_in_flight(server):
    import threading
    import time

    with Runtime(KEY, server.url, max_connections=1) as r:
        inflight, peak, lock = [0], [0], threading.Lock()
        real = r._transport._send

        def counting(*a, **kw):
            with lock:
                inflight[0] += 1
                peak[0] = max(peak[0], inflight[0])
            try:
                time.sleep(0.05)
                return real(*a, **kw)
            finally:
                with lock:
                    inflight[0] -= 1

        r._transport._send = counting
        for _ in range(4):
            server.answer(200, INFO)
        threads = [threading.Thread(target=r.sandboxes.get, args=(SID,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert peak[0] == 1 and len(server.requests) == 4


# --- create -----------------------------------------------------------------------


def test_create_fields_of_issue_14(server, rt):
    server.answer(200, INFO)
    rt.sandboxes.create(pausable=True, idle_pause_seconds=900, auto_wake=False, on_lease_end="pause",
                        persistent=True, max_total_cost_micros=5_000_000, sudo=False, funding="trial",
                        region="local")
    assert server.requests[0]["body"] == {
        "pausable": True, "idlePauseSeconds": 900, "autoWake": False, "onLeaseEnd": "pause",
        "persistent": True, "maxTotalCostMicros": 5_000_000, "sudo": False, "funding": "trial",
        "region": "local"}


def test_create_wait_false_answers_while_starting(server, rt):
    server.answer(200, {**INFO, "state": "starting"})
    sbx = rt.sandboxes.create(wait=False)
    assert sbx.state == "starting" and len(server.requests) == 1
    h = server.requests[0]["headers"]
    assert "prefer" not in h and h["idempotency-key"]


def test_create_waits_through_starting(server, rt):
    server.answer(200, {**INFO, "state": "starting"})
    server.answer(200, {**INFO, "state": "starting"})
    server.answer(200, INFO)
    sbx = rt.sandboxes.create()
    assert sbx.state == "running"
    assert [q["method"] for q in server.requests] == ["POST", "GET", "GET"]


def test_create_that_never_runs_is_start_failed(server, rt):
    server.answer(200, {**INFO, "state": "starting"})
    server.answer(200, {**INFO, "state": "stopped", "stopReason": "startup_failed"})
    with pytest.raises(kiln.KilnError) as ei:
        rt.sandboxes.create()
    assert ei.value.code == "start_failed" and ei.value.details["stopReason"] == "startup_failed"


def test_get_or_create(server, rt):
    server.answer(200, {**INFO, "name": "dev", "reused": True})
    sbx = rt.sandboxes.get_or_create("dev", idle_pause_seconds=900)
    assert sbx.info["reused"] is True
    assert server.requests[0]["body"] == {"name": "dev", "getOrCreate": True, "idlePauseSeconds": 900}
    server.answer(200, {**INFO, "name": "dev", "reused": False})
    Sandbox.get_or_create("dev", client=rt)
    assert server.requests[1]["body"] == {"name": "dev", "getOrCreate": True}
    with pytest.raises(ValueError):
        rt.sandboxes.get_or_create("")


def test_list_by_name(server, rt):
    server.answer(200, {"data": [{**INFO, "name": "dev"}], "nextCursor": None})
    page = rt.sandboxes.list(name="dev")
    assert [s.id for s in page] == [SID]
    assert server.requests[0]["query"]["name"] == ["dev"]


def test_limits(server, rt):
    answer = {"access": "full", "daily": {"limitMicros": None, "usedMicros": 0, "remainingMicros": None,
                                          "window": "24h"}, "trial": None}
    server.answer(200, answer)
    assert rt.limits.get() == answer
    assert (server.requests[0]["method"], server.requests[0]["path"]) == ("GET", "/v1/limits")


# --- lifecycle ------------------------------------------------------------------------


def test_pause_and_wake(server, rt):
    sbx = sandbox(rt)
    server.answer(200, {**INFO, "state": "paused", "pausedAt": "2030-01-01T00:00:00Z"})
    sbx.pause()
    assert sbx.state == "paused" and sbx.paused
    server.answer(200, INFO)
    sbx.wake(timeout_seconds=1200)
    assert sbx.state == "running"
    p, w = server.requests
    assert (p["method"], p["path"], p["body"]) == ("POST", f"/v1/sandboxes/{SID}:pause", {})
    assert (w["path"], w["body"]) == (f"/v1/sandboxes/{SID}:wake", {"timeoutSeconds": 1200})
    assert p["headers"]["idempotency-key"] != w["headers"]["idempotency-key"]


def test_wake_of_an_awake_sandbox_is_success_without_a_lease(server, rt):
    sbx = sandbox(rt)
    server.answer(409, err_body("not_paused", 409))
    server.answer(200, INFO)
    assert sbx.wake()["state"] == "running"
    assert [q["method"] for q in server.requests] == ["POST", "GET"]
    server.answer(409, err_body("not_paused", 409))
    with pytest.raises(kiln.ConflictError) as ei:
        sbx.wake(timeout_seconds=600)  # a new lease was asked for and not given
    assert ei.value.code == "not_paused"


def test_pause_refusals_are_conflicts(server, rt):
    server.answer(409, err_body("not_pausable", 409))
    with pytest.raises(kiln.ConflictError) as ei:
        sandbox(rt).pause()
    assert ei.value.code == "not_pausable"


def test_stop_wait_false_sends_no_prefer(server, rt):
    server.answer(200, {**INFO, "state": "stopped"})
    server.answer(200, {**INFO, "state": "stopped"})
    sandbox(rt).stop(wait=False)
    sandbox(rt).stop()
    assert "prefer" not in server.requests[0]["headers"]
    assert server.requests[1]["headers"]["prefer"] == "wait=60"


def test_fork_name(server, rt):
    server.answer(200, {"sandboxes": [{**INFO, "id": "c1", "name": "copy"}]})
    copy = sandbox(rt).fork(name="copy", funding="trial")
    assert copy.id == "c1"
    assert server.requests[0]["body"] == {"count": 1, "name": "copy"}


# --- files ------------------------------------------------------------------------------


def test_files_list_filters(server, rt):
    server.answer(200, {"data": [{"name": "a.csv", "path": "/workspace/d/a.csv", "type": "file"}]})
    out = sandbox(rt).files.list("/workspace", depth=3, glob="**/*.csv", hidden=False, limit=10)
    assert out[0]["name"] == "a.csv"
    q = server.requests[0]["query"]
    assert q == {"path": ["/workspace"], "depth": ["3"], "glob": ["**/*.csv"], "hidden": ["false"],
                 "limit": ["10"]}
    server.answer(200, {"data": []})
    sandbox(rt).files.glob("*.py", "/workspace/src")
    assert server.requests[1]["query"] == {"path": ["/workspace/src"], "glob": ["*.py"]}


# --- asyncio --------------------------------------------------------------------------


def test_async_shapes(server):
    async def go():
        async with AsyncRuntime(KEY, server.url, timeout=5, max_connections=4) as art:
            server.answer(200, {**INFO, "name": "dev", "reused": True})
            sbx = await art.sandboxes.get_or_create("dev")
            server.answer(200, {**INFO, "state": "paused"})
            await sbx.pause()
            paused = sbx.state
            server.answer(409, err_body("not_paused", 409))
            server.answer(200, INFO)
            await sbx.wake()
            server.answer(200, {"access": "full", "daily": {}, "trial": None})
            limits = await art.limits.get()
            return paused, sbx.state, limits

    paused, state, limits = asyncio.run(go())
    assert (paused, state, limits["access"]) == ("paused", "running", "full")
    assert server.requests[0]["body"] == {"name": "dev", "getOrCreate": True}
    assert [q["path"] for q in server.requests[1:]] == [
        f"/v1/sandboxes/{SID}:pause", f"/v1/sandboxes/{SID}:wake", f"/v1/sandboxes/{SID}", "/v1/limits"]
