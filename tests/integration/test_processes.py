"""Background processes: start, list/get, output ring and cursors, long-poll,
follow stream, stdin pipe, signals, timeouts."""
import base64
import time

from client import assert_error

MiB = 1 << 20


def _path(sid, pid="", suffix=""):
    return f"/v1/sandboxes/{sid}/processes" + (f"/{pid}" if pid else "") + suffix


def read_all(api, sid, pid, cursor=0, wait_ms=2000, limit_s=30):
    """Reads output pages until the process is complete and nothing is left."""
    data, pages, deadline = [], [], time.monotonic() + limit_s
    while time.monotonic() < deadline:
        page = api.ok("GET", _path(sid, pid, "/output"), query={"cursor": cursor, "waitMs": wait_ms})
        pages.append(page)
        for c in page["chunks"]:
            assert c["offset"] >= cursor, f"chunk before cursor {cursor}: {c['offset']}"
            data.append(c)
        assert page["nextCursor"] >= cursor
        if page["complete"] and page["nextCursor"] == cursor:
            return data, pages
        cursor = page["nextCursor"]
    raise AssertionError(f"output of {pid} not complete after {limit_s}s: {pages[-1]!r}")


def test_server_outlives_the_call(api, sid):
    api.write_file(sid, "/workspace/www/hello.txt", b"served by python\n")
    info = api.spawn(sid, argv=["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"],
                     cwd="/workspace/www")
    assert info["kind"] == "process" and info["state"] == "running", info
    assert isinstance(info["id"], str) and isinstance(info["pid"], int)
    assert info["argv"][:3] == ["python3", "-m", "http.server"] and info["cwd"] == "/workspace/www"
    fetch = ("import time, urllib.request\n"
             "for _ in range(100):\n"
             "    try:\n"
             "        print(urllib.request.urlopen('http://127.0.0.1:8000/hello.txt').read().decode(), end='')\n"
             "        break\n"
             "    except OSError:\n"
             "        time.sleep(0.1)\n")
    r = api.exec(sid, argv=["python3", "-c", fetch], timeoutMs=30000)
    assert r["stdout"] == "served by python\n", r
    listed = api.ok("GET", _path(sid))["data"]
    assert info["id"] in [p["id"] for p in listed]
    assert api.process(sid, info["id"])["state"] == "running", "the server died with the exec"
    sig = api.ok("POST", _path(sid, info["id"], ":signal"), json={"signal": "SIGTERM"})
    assert sig["id"] == info["id"]
    done = api.wait_process(sid, info["id"])
    assert done["state"] in ("killed", "exited"), done
    assert done["endedAt"] is not None


def test_signal_names_the_signal(api, sid):
    p = api.spawn(sid, argv=["sleep", "1000"])
    api.ok("POST", _path(sid, p["id"], ":signal"), json={"signal": "SIGTERM"})
    done = api.wait_process(sid, p["id"])
    assert (done["state"], done["signal"], done["exitCode"]) == ("killed", "SIGTERM", None), done


def test_output_by_cursor(api, sid):
    p = api.spawn(sid, command="for i in 1 2 3 4 5; do echo line$i; sleep 0.1; done; echo oops >&2; exit 2")
    chunks, pages = read_all(api, sid, p["id"])
    expect = "line1\nline2\nline3\nline4\nline5\noops\n"
    assert "".join(c["data"] for c in chunks) == expect, chunks
    offset = 0
    for c in chunks:
        assert c["offset"] == offset and c["stream"] in ("stdout", "stderr")
        offset += len(c["data"].encode())
    assert [c["stream"] for c in chunks if "oops" in c["data"]] == ["stderr"]
    assert pages[-1]["state"] == "exited" and pages[-1]["firstOffset"] == 0
    info = api.process(sid, p["id"])
    assert (info["exitCode"], info["outputBytes"]) == (2, len(expect)), info
    # reading again from the middle gives exactly the tail
    again, _ = read_all(api, sid, p["id"], cursor=12)
    assert "".join(c["data"] for c in again) == expect[12:]


def test_wait_ms_long_polls(api, sid):
    p = api.spawn(sid, command="sleep 1; echo late; sleep 1000")
    t0 = time.monotonic()
    page = api.ok("GET", _path(sid, p["id"], "/output"), query={"cursor": 0, "waitMs": 10000})
    took = time.monotonic() - t0
    assert "".join(c["data"] for c in page["chunks"]) == "late\n", page
    assert 0.5 <= took <= 8, f"long-poll answered after {took:.2f} s"
    t0 = time.monotonic()
    page = api.ok("GET", _path(sid, p["id"], "/output"), query={"cursor": page["nextCursor"], "waitMs": 700})
    took = time.monotonic() - t0
    assert page["chunks"] == [] and page["complete"] is False and page["state"] == "running", page
    assert 0.6 <= took <= 5, f"waitMs=700 with no output answered after {took:.2f} s"
    api.ok("POST", _path(sid, p["id"], ":signal"), json={"signal": "SIGKILL"})


def test_follow_stream(api, sid):
    p = api.spawn(sid, command="echo a; sleep 0.5; echo b >&2; exit 4")
    s = api.stream("GET", _path(sid, p["id"], "/output"), query={"follow": True, "cursor": 0})
    assert s.status == 200, s
    assert s.headers.get("content-type", "").startswith("application/x-ndjson")
    ev = s.events
    assert ev[-1]["type"] == "exit" and ev[-1]["exitCode"] == 4, ev
    out = [(e["type"], e["data"]) for e in ev if e["type"] in ("stdout", "stderr")]
    assert out == [("stdout", "a\n"), ("stderr", "b\n")], ev


def test_output_ring_keeps_latest_mib(api, sid):
    total = 3 * MiB
    p = api.spawn(sid, command=f"head -c {total} /dev/zero | tr '\\0' x; echo -n END")
    done = api.wait_process(sid, p["id"], timeout=30)
    assert done["state"] == "exited" and done["outputBytes"] == total + 3, done
    first = api.ok("GET", _path(sid, p["id"], "/output"), query={"cursor": 0})
    assert first["firstOffset"] >= total + 3 - MiB, f"more than 1 MiB kept: {first['firstOffset']}"
    assert first["firstOffset"] <= total + 3 - MiB + 64 * 1024, f"much less than 1 MiB kept: {first['firstOffset']}"
    assert first["droppedBytes"] > 0
    chunks, _ = read_all(api, sid, p["id"], cursor=0)
    assert chunks[0]["offset"] == first["firstOffset"]
    data = "".join(c["data"] for c in chunks)
    assert len(data) == total + 3 - first["firstOffset"] and data.endswith("xxxEND")


def test_stdin_pipe(api, sid):
    p = api.spawn(sid, argv=["cat"], stdinMode="pipe")
    assert p["stdinOpen"] is True, p
    w = api.ok("POST", _path(sid, p["id"], ":write"), json={"data": "hello\n"})
    assert w["offset"] == 6
    w = api.ok("POST", _path(sid, p["id"], ":write"),
               json={"base64": base64.b64encode(b"w\xc3\xb6rld\n").decode(), "eof": True})
    assert w["offset"] == 13
    done = api.wait_process(sid, p["id"])
    assert (done["state"], done["exitCode"], done["stdinOpen"]) == ("exited", 0, False), done
    chunks, _ = read_all(api, sid, p["id"])
    assert "".join(c["data"] for c in chunks) == "hello\nwörld\n"


def test_env_cwd_and_timeout(api, sid):
    p = api.spawn(sid, command='pwd; echo "$FOO"; id -u', cwd="/tmp", env={"FOO": "bar"})
    chunks, _ = read_all(api, sid, p["id"])
    assert "".join(c["data"] for c in chunks) == "/tmp\nbar\n1000\n"
    p = api.spawn(sid, argv=["sleep", "1000"], timeoutMs=500)
    done = api.wait_process(sid, p["id"], timeout=10)
    assert done["state"] == "timed_out", done


def test_unknown_process(api, sid):
    assert_error(api.get(_path(sid, "p999999")), 404, "not_found")
    assert_error(api.post(_path(sid, "p999999", ":signal"), json={"signal": "SIGTERM"}), 404, "not_found")
