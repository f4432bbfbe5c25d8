"""Daemon: routes, error shape, field validation, request ids, and bad or
hostile input that must get a clear 4xx and leave the daemon healthy."""
import json
import socket
import time

import pytest

from client import assert_error, issue_paths

MiB = 1 << 20


@pytest.fixture(autouse=True)
def daemon_stays_healthy(api, kilnd):
    yield
    assert kilnd.alive(), f"kilnd died:\n{kilnd.log_tail()}"
    r = api.health()
    assert r.status == 200 and r.json()["ok"] is True, r
    assert r.elapsed < 1.0, f"health took {r.elapsed:.2f} s"


def test_health(api):
    r = api.health()
    body = r.json()
    assert body["ok"] is True and isinstance(body["version"], str) and body["version"]
    assert r.request_id


def test_request_ids_are_unique_and_on_every_answer(api, sid):
    answers = [api.health(), api.get(f"/v1/sandboxes/{sid}"), api.get("/v1/nope"),
               api.post("/v1/sandboxes", data=b"{"),
               api.get(f"/v1/sandboxes/{sid}/files/content", query={"path": "/etc/hostname"}),
               api.get("/v1/sandboxes/sbx_missing")]
    ids = [a.request_id for a in answers]
    assert all(ids), ids
    assert len(set(ids)) == len(ids), ids
    s = api.exec_stream(sid, argv=["true"])
    assert s.headers.get("x-request-id") and s.headers.get("x-request-id") not in ids


@pytest.mark.parametrize("body,path", [
    ({"memoryMiB": "x"}, "body.memoryMiB"),
    ({"memoryMiB": 127}, "body.memoryMiB"),
    ({"memoryMiB": 65537}, "body.memoryMiB"),
    ({"vcpu": 0}, "body.vcpu"),
    ({"vcpu": 17}, "body.vcpu"),
    ({"vcpu": 1.5}, "body.vcpu"),
    ({"vcpu": True}, "body.vcpu"),
    ({"diskMiB": 63}, "body.diskMiB"),
    ({"timeoutSeconds": 59}, "body.timeoutSeconds"),
    ({"timeoutSeconds": 86401}, "body.timeoutSeconds"),
    ({"name": "bad name!"}, "body.name"),
    ({"name": "n" * 65}, "body.name"),
    ({"labels": ["a"]}, "body.labels"),
    ({"env": "FOO=1"}, "body.env"),
    ({"bogus": 1}, "body.bogus"),
])
def test_create_field_errors_name_the_field(api, body, path):
    err = assert_error(api.post("/v1/sandboxes", json=body), 400, "invalid_request", issue_path=path)
    field = path.split(".", 1)[1]
    assert field in err["message"], f"message does not name {field}: {err!r}"


@pytest.mark.parametrize("body,prefix", [
    ({"labels": {f"k{i}": "v" for i in range(33)}}, "body.labels"),
    ({"labels": {"k" * 64: "v"}}, "body.labels"),
    ({"labels": {"k": "v" * 257}}, "body.labels"),
    ({"labels": {"k": 5}}, "body.labels"),
    ({"env": {"1BAD": "x"}}, "body.env"),
    ({"env": {f"V{i}": "x" for i in range(33)}}, "body.env"),
])
def test_create_map_errors(api, body, prefix):
    err = assert_error(api.post("/v1/sandboxes", json=body), 400, "invalid_request")
    assert any(p.startswith(prefix) for p in issue_paths(err)), err


@pytest.mark.parametrize("raw", [b"{", b"not json", b"[]", b"42", b'{"vcpu": 1,}', b"\xff\xfe{}"])
def test_malformed_json(api, raw):
    assert_error(api.post("/v1/sandboxes", data=raw, headers={"Content-Type": "application/json"}),
                 400, "invalid_request", issue_path="body")


@pytest.mark.parametrize("body,path", [
    ({}, None),
    ({"argv": ["true"], "command": "true"}, None),
    ({"argv": "true"}, "body.argv"),
    ({"argv": []}, "body.argv"),
    ({"argv": ["echo", "a", 3]}, "body.argv[2]"),
    ({"command": 5}, "body.command"),
    ({"argv": ["true"], "timeoutMs": 0}, "body.timeoutMs"),
    ({"argv": ["true"], "timeoutMs": 86400001}, "body.timeoutMs"),
    ({"argv": ["true"], "timeoutMs": "100"}, "body.timeoutMs"),
    ({"argv": ["true"], "stream": "yes"}, "body.stream"),
    ({"argv": ["true"], "outputEncoding": "hex", "stream": True}, "body.outputEncoding"),
    ({"argv": ["true"], "stdinBase64": "***"}, "body.stdinBase64"),
    ({"argv": ["true"], "env": {"A": 1}}, None),
    ({"argv": ["true"], "nope": True}, "body.nope"),
])
def test_exec_field_errors(api, sid, body, path):
    err = assert_error(api.post(f"/v1/sandboxes/{sid}:exec", json=body), 400, "invalid_request")
    paths = issue_paths(err)
    if path:
        assert path in paths, err
        assert path.split(".", 1)[1].split("[")[0] in err["message"], err


def test_other_body_and_query_errors(api, sid):
    base = f"/v1/sandboxes/{sid}"
    cases = [
        (api.get(base + "/files/content", query={"path": "relative.txt"}), "query.path"),
        (api.get(base + "/files/content"), "query.path"),
        (api.get(base + "/files/list", query={"path": "/workspace", "depth": "abc"}), "query.depth"),
        (api.get("/v1/sandboxes", query={"limit": "many"}), "query.limit"),
        (api.post(base + "/files:mkdir", json={"path": 3}), "body.path"),
        (api.post(base + "/files:rename", json={"from": "/workspace/a"}), "body.to"),
        (api.post(base + "/processes", json={"argv": ["cat"], "stdin": "keep"}), "body.stdin"),
    ]
    for resp, path in cases:
        assert_error(resp, 400, "invalid_request", issue_path=path)
    p = api.spawn(sid, argv=["sleep", "30"])
    assert_error(api.post(base + f"/processes/{p['id']}:signal", json={"signal": "SIGSEGV"}),
                 400, "invalid_request", issue_path="body.signal")
    assert_error(api.get(base + f"/processes/{p['id']}/output", query={"waitMs": 30001}),
                 400, "invalid_request", issue_path="query.waitMs")
    api.ok("POST", base + f"/processes/{p['id']}:signal", json={"signal": "SIGKILL"})


def test_unknown_sandbox_is_404(api):
    s = "/v1/sandboxes/sbx_doesnotexist"
    for resp in [api.get(s), api.post(s + ":exec", json={"argv": ["true"]}), api.post(s + ":stop", json={}),
                 api.get(s + "/processes"), api.get(s + "/files/stat", query={"path": "/workspace"})]:
        assert_error(resp, 404, "not_found")


def test_routes_and_methods(api, sid):
    assert_error(api.get("/v1/nope"), 404, "route_not_found")
    assert_error(api.get("/nothing/at/all"), 404, "route_not_found")
    assert_error(api.post(f"/v1/sandboxes/{sid}:frobnicate", json={}), 404, "route_not_found")
    assert_error(api.request("DELETE", "/v1/health"), 405, "method_not_allowed")
    assert_error(api.request("PUT", "/v1/sandboxes", json={}), 405, "method_not_allowed")
    assert_error(api.request("GET", f"/v1/sandboxes/{sid}:exec"), 405, "method_not_allowed")


def test_huge_json_body_is_413(api, sid):
    huge = json.dumps({"name": "x", "labels": {"k": "v" * (20 * MiB)}}).encode()
    assert_error(api.post("/v1/sandboxes", data=huge), 413, "payload_too_large")
    huge = json.dumps({"argv": ["cat"], "stdin": "y" * (20 * MiB)}).encode()
    assert_error(api.post(f"/v1/sandboxes/{sid}:exec", data=huge), 413, "payload_too_large")


def test_deeply_nested_json(api):
    for raw in [b"[" * 200000 + b"]" * 200000, b'{"labels":' * 100000 + b"1" + b"}" * 100000]:
        r = api.post("/v1/sandboxes", data=raw, headers={"Content-Type": "application/json"})
        assert 400 <= r.status < 500, r


def test_oversized_url_and_headers(api):
    r = api.get("/v1/sandboxes/" + "a" * 100000)
    assert 400 <= r.status < 500, r
    r = api.get("/v1/health", headers={"X-Big": "b" * 200000})
    assert 400 <= r.status < 500, r


def _raw(api, payload, read=True):
    s = socket.create_connection((api.host, api.port), timeout=10)
    s.sendall(payload)
    if not read:
        return s
    try:
        return s.recv(4096)
    except OSError:
        return b""
    finally:
        s.close()


def test_garbage_and_stalled_connections(api):
    for junk in [b"GARBAGE\r\n\r\n", b"\x00\x01\x02" * 1000 + b"\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n"]:
        answer = _raw(api, junk)
        if answer:  # closing without an answer is fine too
            status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.") else 0
            assert 400 <= status < 500 or status == 505, answer[:200]
    stalled = [_raw(api, b"", read=False) for _ in range(20)]  # connected, silent
    stalled += [_raw(api, b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{", read=False)
                for _ in range(5)]  # body promised, never sent
    try:
        for _ in range(3):
            t0 = time.monotonic()
            assert api.health().status == 200
            assert time.monotonic() - t0 < 1.0, "stalled connections slow the daemon down"
    finally:
        for s in stalled:
            s.close()
