"""Agent exec: argv/command, stdin, env, cwd, user, timeouts, caps, signals,
cleanup of everything a command started, streaming, concurrency."""
import base64
import hashlib
import time
from concurrent.futures import ThreadPoolExecutor

from client import assert_error

CAP = 65536
RESULT_KEYS = {"exitCode", "signal", "stdout", "stderr", "timedOut", "stdoutTruncated",
               "stderrTruncated", "durationMs", "processId"}


def test_argv_runs_without_shell(api, sid):
    r = api.exec(sid, argv=["echo", "$HOME", "a b", "*"])
    assert RESULT_KEYS <= set(r), f"missing fields: {RESULT_KEYS - set(r)}"
    assert r["stdout"] == "$HOME a b *\n" and r["stderr"] == ""
    assert (r["exitCode"], r["signal"], r["timedOut"]) == (0, None, False)
    assert r["stdoutTruncated"] is False and r["stderrTruncated"] is False
    assert isinstance(r["durationMs"], int) and r["durationMs"] >= 0
    assert isinstance(r["processId"], str) and r["processId"]


def test_command_runs_with_bash(api, sid):
    r = api.exec(sid, command='echo "$HOME" ${BASH_VERSION:+bash}; echo oops >&2; exit 7')
    assert (r["stdout"], r["stderr"], r["exitCode"], r["signal"]) == ("/workspace bash\n", "oops\n", 7, None)


def test_default_environment_user_and_cwd(api, sid):
    out = api.sh(sid, 'id -u; id -un; echo "$HOME"; pwd; echo "$PATH"; echo "$LANG"')
    assert out.splitlines() == ["1000", "user", "/workspace", "/workspace",
                                "/workspace/.local/bin:/workspace/.npm-global/bin:/usr/local/bin:/usr/bin:/bin", "C.UTF-8"]
    assert api.exec(sid, argv=["pwd"], cwd="/tmp")["stdout"] == "/tmp\n"


def test_env_overlay(api, sid):
    r = api.exec(sid, argv=["sh", "-c", 'echo "$FOO|$BAR|$HOME"'], env={"FOO": "1", "BAR": "x y"})
    assert r["stdout"] == "1|x y|/workspace\n"


def test_stdin_text_then_closed(api, sid):
    r = api.exec(sid, argv=["cat"], stdin="héllo\nworld", timeoutMs=10000)
    assert (r["stdout"], r["timedOut"]) == ("héllo\nworld", False)
    r = api.exec(sid, argv=["cat"], timeoutMs=10000)  # no stdin: empty, not a hang
    assert (r["stdout"], r["exitCode"], r["timedOut"]) == ("", 0, False)


def test_stdin_base64_bytes(api, sid):
    data = bytes(range(256)) * 300
    prog = "import sys, hashlib; d = sys.stdin.buffer.read(); print(len(d), hashlib.sha256(d).hexdigest())"
    r = api.exec(sid, argv=["python3", "-c", prog], stdinBase64=base64.b64encode(data).decode())
    assert r["stdout"] == f"{len(data)} {hashlib.sha256(data).hexdigest()}\n", r


def test_timeout_kills_everything_and_keeps_output(api, sid):
    t0 = time.monotonic()
    r = api.exec(sid, command="echo before; sleep 1011 & setsid sleep 1012 & sleep 1013; echo after",
                 timeoutMs=1500)
    wall = time.monotonic() - t0
    assert r["timedOut"] is True and r["exitCode"] is None, r
    assert r["stdout"] == "before\n", r
    assert 1400 <= r["durationMs"] <= 6000 and wall < 10, (r, wall)
    ps = api.sh(sid, "ps -eo pid,args")
    for marker in ("sleep 1011", "sleep 1012", "sleep 1013"):
        assert marker not in ps, f"{marker} survived the timeout:\n{ps}"


def test_background_processes_die_when_command_returns(api, sid):
    r = api.exec(sid, command="sleep 1021 & setsid sleep 1022 & nohup sleep 1023 >/dev/null 2>&1 & "
                              "(setsid sh -c 'sleep 1024 &') ; echo started", timeoutMs=20000)
    assert (r["stdout"], r["exitCode"], r["timedOut"]) == ("started\n", 0, False), r
    assert r["durationMs"] < 5000, "the exec waited for its background children"
    ps = api.sh(sid, "ps -eo pid,args")
    for marker in ("sleep 1021", "sleep 1022", "sleep 1023", "sleep 1024"):
        assert marker not in ps, f"{marker} outlived its exec:\n{ps}"


def test_killed_by_signal(api, sid):
    r = api.exec(sid, command="echo hi; kill -KILL $$")
    assert (r["exitCode"], r["signal"], r["timedOut"], r["stdout"]) == (None, "SIGKILL", False, "hi\n"), r
    r = api.exec(sid, command="kill -TERM $$")
    assert (r["exitCode"], r["signal"]) == (None, "SIGTERM"), r


def test_output_caps(api, sid):
    r = api.exec(sid, command=f"head -c {CAP} /dev/zero | tr '\\0' a; head -c {CAP} /dev/zero | tr '\\0' b >&2")
    assert (len(r["stdout"]), len(r["stderr"])) == (CAP, CAP)
    assert (r["stdoutTruncated"], r["stderrTruncated"]) == (False, False), "exactly 64 KiB is not truncated"
    r = api.exec(sid, command="head -c 300000 /dev/zero | tr '\\0' a; head -c 70000 /dev/zero | tr '\\0' b >&2; exit 3")
    assert r["stdout"] == "a" * CAP and r["stderr"] == "b" * CAP, (len(r["stdout"]), len(r["stderr"]))
    assert (r["stdoutTruncated"], r["stderrTruncated"], r["exitCode"]) == (True, True, 3)


def test_stop_at_output_cap_kills_a_flood_at_once(api, sid):
    t0 = time.monotonic()
    r = api.exec(sid, command="echo started > /tmp/flood; yes flood; echo never > /tmp/after",
                 timeoutMs=20000, stopAtOutputCap=True)
    assert time.monotonic() - t0 < 5, r["durationMs"]
    assert r["stdoutTruncated"] is True and r["stdout"] == ("flood\n" * CAP)[:CAP]
    assert (r["exitCode"], r["signal"], r["timedOut"]) == (None, "SIGKILL", False), {k: r[k] for k in r if k != "stdout"}
    assert api.sh(sid, "cat /tmp/flood; test -e /tmp/after || echo no-after") == "started\nno-after\n"
    # Under the cap nothing changes; and streams have no cap to stop at.
    r = api.exec(sid, command="echo short", stopAtOutputCap=True)
    assert (r["stdout"], r["exitCode"], r["stdoutTruncated"]) == ("short\n", 0, False)
    assert_error(api.post(f"/v1/sandboxes/{sid}:exec", json={"command": "true", "stream": True, "stopAtOutputCap": True}),
                 400, "invalid_request")


def test_invalid_utf8_is_replaced(api, sid):
    r = api.exec(sid, command=r"printf 'ok\377\376end'")
    assert r["stdout"].startswith("ok\ufffd") and r["stdout"].endswith("end"), repr(r["stdout"])


def test_duration(api, sid):
    r = api.exec(sid, argv=["sleep", "0.5"])
    assert 450 <= r["durationMs"] <= 5000, r


def test_stream_events(api, sid):
    s = api.exec_stream(sid, command="echo out1; echo err1 >&2; sleep 1; printf out2; exit 3")
    assert s.status == 200, s
    assert s.headers.get("content-type", "").startswith("application/x-ndjson")
    assert s.headers.get("x-request-id")
    ev = s.events
    assert ev[0]["type"] == "start" and isinstance(ev[0]["processId"], str), ev
    assert ev[-1]["type"] == "exit", ev
    assert all(e["type"] in ("stdout", "stderr") for e in ev[1:-1]), ev
    total = 0
    for e in ev[1:-1]:
        assert e["offset"] == total, f"offset {e['offset']} != bytes so far {total}: {ev}"
        total += len(e["data"].encode())
    out = "".join(e["data"] for e in ev if e["type"] == "stdout")
    err = "".join(e["data"] for e in ev if e["type"] == "stderr")
    assert (out, err) == ("out1\nout2", "err1\n")
    x = ev[-1]
    assert (x["exitCode"], x["signal"], x["state"], x["timedOut"]) == (3, None, "exited", False), x
    assert x["durationMs"] >= 900
    # it really streams: out1 arrives well before the exit
    first = next(t for t, e in s.timed_events if e["type"] == "stdout")
    assert s.timed_events[-1][0] - first >= 0.7, s.timed_events


def test_stream_timeout_and_base64(api, sid):
    s = api.exec_stream(sid, command="printf '\\377\\000x'; sleep 30", timeoutMs=1000, outputEncoding="base64")
    ev = s.events
    assert ev[-1]["type"] == "exit", ev
    assert (ev[-1]["state"], ev[-1]["timedOut"], ev[-1]["exitCode"]) == ("timed_out", True, None), ev[-1]
    chunks = [e for e in ev if e["type"] == "stdout"]
    assert all(e.get("base64") is True for e in chunks), chunks
    assert b"".join(base64.b64decode(e["data"]) for e in chunks) == b"\xff\x00x"
    at = 0  # offsets count the bytes before each chunk
    for e in chunks:
        assert e["offset"] == at, chunks
        at += len(base64.b64decode(e["data"]))


def test_stream_killed_by_signal(api, sid):
    ev = api.exec_stream(sid, command="kill -KILL $$").events
    assert ev[-1]["type"] == "exit", ev
    assert (ev[-1]["state"], ev[-1]["signal"], ev[-1]["exitCode"]) == ("killed", "SIGKILL", None), ev[-1]


def test_64_concurrent_execs_on_one_sandbox(api, sid):
    def one(i):
        return api.exec(sid, command='sleep 1; echo "job-$N"', env={"N": str(i)}, timeoutMs=60000)

    t0 = time.monotonic()
    with ThreadPoolExecutor(64) as ex:
        results = list(ex.map(one, range(64)))
    wall = time.monotonic() - t0
    bad = [(i, r["stdout"], r["stderr"], r["exitCode"], r["durationMs"]) for i, r in enumerate(results)
           if (r["stdout"], r["exitCode"]) != (f"job-{i}\n", 0)]
    assert not bad, bad[:5]
    assert wall < 15, f"64 execs of 'sleep 1' took {wall:.1f} s: not run concurrently"
    assert len({r["processId"] for r in results}) == 64


def test_slow_exec_blocks_nobody(api, sid, sandboxes):
    other = sandboxes.create(vcpu=1)["id"]
    with ThreadPoolExecutor(1) as ex:
        slow = ex.submit(api.exec, sid, command="sleep 5; echo slow")
        time.sleep(0.5)
        checks = [
            ("exec on another sandbox", lambda: api.exec(other, argv=["echo", "quick"])["stdout"] == "quick\n"),
            ("exec on the same sandbox", lambda: api.exec(sid, argv=["echo", "quick"])["stdout"] == "quick\n"),
            ("GET sandbox", lambda: api.get(f"/v1/sandboxes/{sid}").status == 200),
            ("GET list", lambda: api.get("/v1/sandboxes").status == 200),
            ("health", lambda: api.health().status == 200),
        ]
        for _ in range(3):
            for name, check in checks:
                t0 = time.monotonic()
                assert check(), name
                took = time.monotonic() - t0
                assert took < 1.0, f"{name} took {took:.2f} s while a slow exec was in flight"
        assert not slow.done(), "the slow exec finished early: the test proved nothing"
        assert slow.result()["stdout"] == "slow\n"


def _client_leaves(api, sid, body):
    """Sends an exec and closes the connection without reading the answer."""
    import http.client
    import json as _json
    conn = http.client.HTTPConnection(api.host, api.port, timeout=10)
    conn.request("POST", f"/v1/sandboxes/{sid}:exec", body=_json.dumps(body),
                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {api.key}"})
    time.sleep(1.5)  # the command is running now
    conn.close()


def _gone(api, sid, marker, within=10):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if marker not in api.sh(sid, "ps -eo args"):
            return True
        time.sleep(0.3)
    return False


def test_exec_is_stopped_when_its_client_leaves(api, sid):
    _client_leaves(api, sid, {"command": "sleep 301; echo never", "timeoutMs": 600000})
    assert _gone(api, sid, "sleep 301"), "the command outlived its client"


def test_stream_exec_is_stopped_when_its_client_leaves(api, sid):
    _client_leaves(api, sid, {"command": "sleep 302", "timeoutMs": 600000, "stream": True})
    assert _gone(api, sid, "sleep 302"), "the streamed command outlived its client"


def test_stream_never_splits_a_character_and_offsets_stay_exact(api, sid):
    # The euro sign (3 bytes) is written in two parts, 0.3 s apart.
    s = api.exec_stream(sid, command=r"printf 'a\xe2\x82'; sleep 0.3; printf '\xacb'; sleep 0.3; printf 'c'")
    data = [e for e in s.events if e["type"] == "stdout"]
    assert "".join(e["data"] for e in data) == "a\u20acbc", data
    total = 0
    for e in data:
        assert e["offset"] == total, data
        total += len(e["data"].encode())
    assert total == 6
