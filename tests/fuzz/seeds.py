#!/usr/bin/python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/).

The seeds are committed; this script is how they were made, so that a change
of format (the agent's frame header, a route) can be followed by running it
again. Usage: /usr/bin/python3 tests/fuzz/seeds.py"""
import ctypes
import gzip
import hashlib
import io
import json
import os
import struct
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- HTTP front ("KEY" and "SBX" are placeholders the target fills in) ----

def http(method, target, body=None, headers=(), chunked=False):
    lines = [f"{method} {target} HTTP/1.1", "Host: kiln", "Authorization: Bearer KEY"]
    lines += list(headers)
    data = b""
    if body is not None:
        data = (json.dumps(body) if not isinstance(body, (bytes, str)) else body)
        data = data.encode() if isinstance(data, str) else data
        lines.append("Content-Type: application/json")
        if chunked:
            lines.append("Transfer-Encoding: chunked")
            data = b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)
        else:
            lines.append(f"Content-Length: {len(data)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


HTTP_SEEDS = {
    "health": http("GET", "/v1/health"),
    "create": http("POST", "/v1/sandboxes", {
        "memoryMiB": 512, "vcpu": 1, "timeoutSeconds": 60, "labels": {"a": "b"},
        "env": {"X": "1"}, "network": {"internet": False, "allow": ["example.com", "10.0.0.0/8"]},
        "name": "n1", "idlePauseSeconds": 30, "onLeaseEnd": "pause", "maxCostMicros": 1000}),
    "create_chunked": http("POST", "/v1/sandboxes", {"snapshot": "snap_x", "waitForCapacity": False},
                           chunked=True),
    "list": http("GET", "/v1/sandboxes?state=running&label=a%3Db&name=n1&limit=5"),
    "get": http("GET", "/v1/sandboxes/SBX"),
    "exec": http("POST", "/v1/sandboxes/SBX:exec",
                 {"argv": ["echo", "hi"], "env": {"A": "1"}, "cwd": "/tmp", "timeoutMs": 1000,
                  "stdin": "x", "user": "root"}, headers=["Idempotency-Key: k1"]),
    "exec_stream": http("POST", "/v1/sandboxes/SBX:exec?stream=true", {"command": "ls -la"},
                        headers=["Accept: text/event-stream"]),
    "spawn": http("POST", "/v1/sandboxes/SBX/processes",
                  {"command": "sleep 1", "pty": {"cols": 80, "rows": 24}}),
    "signal": http("POST", "/v1/sandboxes/SBX/processes/p1:signal", {"signal": "SIGTERM"}),
    "files_put": http("PUT", "/v1/sandboxes/SBX/files/content?path=/tmp/a%20b.txt&mode=644", "hello",
                      headers=["Content-Type: application/octet-stream"]),
    "files_get": http("GET", "/v1/sandboxes/SBX/files/content?path=/etc/passwd"),
    "files_list": http("GET", "/v1/sandboxes/SBX/files/list?path=/&depth=2&glob=*.py&hidden=true&limit=5"),
    "archive": http("PUT", "/v1/sandboxes/SBX/files/archive?path=/workspace", "x" * 512,
                    headers=["Content-Type: application/x-tar"]),
    "snapshot": http("POST", "/v1/sandboxes/SBX:snapshot", {"labels": {"k": "v"}}),
    "fork": http("POST", "/v1/sandboxes/SBX:fork", {"count": 2, "name": "f"}),
    "extend": http("POST", "/v1/sandboxes/SBX:extend", {"timeoutSeconds": 10}),
    "update": http("POST", "/v1/sandboxes/SBX:update",
                   {"env": {"set": {"A": "1"}, "remove": ["B"]}, "autoWake": False}),
    "pause": http("POST", "/v1/sandboxes/SBX:pause", {}),
    "network": http("PUT", "/v1/sandboxes/SBX/network",
                    {"internet": True, "deny": ["*.example.com", "::1", "0x7f.1"]}),
    "keys": http("POST", "/v1/keys", {"name": "k", "admin": False, "dailyLimitMicros": 5}),
    "usage": http("GET", "/v1/usage?from=2026-01-01&to=2026-12-31&groupBy=day"),
    "metrics": http("GET", "/metrics"),
    "stop": http("DELETE", "/v1/sandboxes/SBX"),
    "bad_target": b"GET /v1/sandboxes/%zz HTTP/1.1\r\nHost: k\r\n\r\n",
    "pipelined": http("GET", "/v1/health") + http("GET", "/v1/sandboxes"),
}

# ---- The agent channel ----

def check_byte(h):
    c = 0xA5
    for b in h[:11]:
        c = ((c << 1 | c >> 7) & 0xFF) ^ b
    return c


def frame(ftype, stream, payload, flags=0, channel=0):
    if isinstance(payload, str):
        payload = payload.encode()
    h = struct.pack("<IIBBB", len(payload), stream, ftype, flags, channel)
    return h + bytes([check_byte(h)]) + payload


REQUEST, DATA, EVENT, RESPONSE, CANCEL, WINDOW, HELLO = range(1, 8)


def agent_seeds():
    req = lambda s, body: frame(REQUEST, s, json.dumps(body))
    exec_req = {"op": "exec", "argv": ["ls"], "env": {"A": "b"}, "cwd": "/", "timeoutMs": 100,
                "stdinData": True, "captureLimit": 10, "killPastLimit": True}
    big = json.dumps({"op": "file.write", "path": "/tmp/" + "a" * 5000, "mode": 420}).encode()
    half = len(big) // 2
    return {
        "hello_exec": frame(HELLO, 0, '{"nonce": 7}') + req(1, exec_req)
        + frame(DATA, 1, "input", flags=2, channel=0),
        "files": b"".join(req(i + 2, r) for i, r in enumerate([
            {"op": "file.read", "path": "/etc/hosts"}, {"op": "file.list", "path": "/", "depth": 2},
            {"op": "file.stat", "path": "/x"}, {"op": "file.mkdir", "path": "/d", "parents": True},
            {"op": "file.remove", "path": "/d", "recursive": True},
            {"op": "file.rename", "from": "/a", "to": "/b"},
            {"op": "archive.put", "path": "/w", "gzip": True}, {"op": "archive.get", "path": "/w"}])),
        "procs": b"".join(req(i + 20, r) for i, r in enumerate([
            {"op": "proc.start", "command": "sleep 9", "pty": {"cols": 80, "rows": 24}},
            {"op": "proc.list"}, {"op": "proc.get", "id": "p1"},
            {"op": "proc.output", "id": "p1", "cursor": 0, "waitMs": 10},
            {"op": "proc.write", "id": "p1", "base64": "aGVsbG8=", "close": True},
            {"op": "proc.signal", "id": "p1", "signal": "SIGKILL"},
            {"op": "proc.resize", "id": "p1", "cols": 10, "rows": 5},
            {"op": "agent.configure", "sudo": False}, {"op": "egress.attach", "conn": 3}])),
        "fragments": frame(REQUEST, 9, big[:half], flags=1) + frame(REQUEST, 9, big[half:])
        + frame(CANCEL, 9, "") + frame(WINDOW, 9, struct.pack("<I", 4096)),
    }


def daemon_seeds():
    nonce = struct.pack(">Q", 6)  # even: the target starts in sync
    marker = b"KILNSYNC" + struct.pack("<Q", 7)
    ev = lambda s, body: frame(EVENT, s, json.dumps(body))
    resp = lambda s, body: frame(RESPONSE, s, json.dumps(body))
    big = json.dumps({"entries": [{"name": "f%d" % i, "type": "file", "size": i}
                                  for i in range(3000)]}).encode()
    return {
        "exec": nonce + ev(1, {"pid": 42}) + frame(DATA, 1, "out", channel=1)
        + frame(DATA, 1, "", flags=2, channel=2)
        + resp(1, {"exitCode": 0, "stdoutBytes": 3, "durationMs": 5, "signal": None}),
        "error": nonce + resp(2, {"error": {"code": "file_not_found", "message": "no",
                                            "path": "/x"}}),
        "resync": struct.pack(">Q", 7) + b"garbage" + marker + resp(0, {"agent": "kiln-agent"}),
        "window_big": nonce + frame(WINDOW, 3, struct.pack("<I", 65536))
        + frame(RESPONSE, 4, big[:60000], flags=1) + frame(RESPONSE, 4, big[60000:]),
        "procs": nonce + resp(5, {"id": "p1", "pid": 9, "command": "x", "running": True})
        + resp(6, {"chunks": [{"stream": "stdout", "data": "aGk="}], "cursor": 2, "done": False}),
    }


# ---- Egress rules and proxy requests ----

RULES = '{"internet": true, "allow": ["example.com", "*.pypi.org", "203.0.113.0/24", "::1"],' \
        ' "deny": ["10.0.0.1", "[::ffff:127.0.0.1]"]}'
EGRESS_SEEDS = {h.replace("/", "_").replace(":", "_") or "empty": h + "\n" + RULES for h in [
    "example.com", "127.0.0.1", "2130706433", "0177.0.0.1", "0x7f.1", "[::1]",
    "[::ffff:169.254.169.254]", "fe80::1%eth0", "a.b.c.", "1.2.3.4.5", "10.0.0.0/8",
    "2001:db8::/32", "xn--nxasmq6b.example", "203.0.113.7"]}
PROXY_SEEDS = {
    "connect": "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    "connect_v6": "CONNECT [::1]:8443 HTTP/1.1\r\n\r\nearly tunnel bytes",
    "get": "GET http://example.com/a?b=c HTTP/1.1\r\nHost: example.com\r\n"
           "Proxy-Authorization: Basic eDp5\r\nProxy-Connection: keep-alive\r\n\r\n",
    "post": "POST http://203.0.113.5:8080/up HTTP/1.1\r\nHost: 203.0.113.5\r\n"
            "Content-Length: 5\r\n\r\nhello",
    "chunked": "PUT http://h/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
}

# ---- Archives ----

def tar_bytes(entries, compress=False):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            info = tarfile.TarInfo(e["name"])
            kind = e.get("type", "file")
            data = e.get("data", b"")
            if kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, e["target"]
            elif kind == "link":
                info.type, info.linkname = tarfile.LNKTYPE, e["target"]
            elif kind == "chr":
                info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 0, 0
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            info.mode = e.get("mode", 0o644)
            info.size = len(data) if kind == "file" else 0
            t.addfile(info, io.BytesIO(data) if kind == "file" else None)
    raw = buf.getvalue()
    return gzip.compress(raw, mtime=0) if compress else raw


TAR_SEEDS = {
    "plain": tar_bytes([{"name": "d", "type": "dir", "mode": 0o755},
                        {"name": "d/a.txt", "data": b"hello"},
                        {"name": "d/l", "type": "sym", "target": "a.txt"},
                        {"name": "d/h", "type": "link", "target": "d/a.txt"}]),
    "gzip": tar_bytes([{"name": "Dockerfile", "data": b"FROM base\n"},
                       {"name": ".dockerignore", "data": b"*.tmp\n"}], compress=True),
    "dotdot": tar_bytes([{"name": "../outside/marker", "data": b"pwned"}]),
    "absolute": tar_bytes([{"name": "/etc/passwd", "data": b"root::0:0::/:/bin/sh\n"}]),
    "symlink_out": tar_bytes([{"name": "out", "type": "sym", "target": "../outside"},
                              {"name": "out/marker", "data": b"pwned"}]),
    "hardlink_out": tar_bytes([{"name": "h", "type": "link", "target": "../outside/marker"}]),
    "whiteout": tar_bytes([{"name": "d", "type": "dir"}, {"name": "d/.wh.x"},
                           {"name": "d/.wh..wh..opq"}, {"name": "w", "type": "chr"},
                           {"name": "f", "type": "fifo"},
                           {"name": "s", "data": b"#!/bin/sh", "mode": 0o4755}]),
    "long_names": tar_bytes([{"name": "a/" * 60 + "x", "data": b"deep"}]),
}

# ---- Dockerfiles, OCI layouts, config JSON ----

DOCKERFILE_SEEDS = {
    "multi": "V=1;BASE=python\nARG BASE=debian\nFROM ${BASE}:3.12 AS build\n"
             "ENV A=1 B=\"two words\"\nWORKDIR /src\nCOPY --chown=1000:1000 . .\n"
             "RUN pip install -r req.txt && \\\n    echo ${A:-x} ${B:+y}\nUSER 1000\n"
             "FROM scratch\nCOPY --from=build /src /app\nADD https://x/y.tgz /opt/\n"
             "ENTRYPOINT [\"/app/run\", \"--flag\"]\nCMD [\"x\"]\nEXPOSE 8080/tcp\n"
             "LABEL a=b\nSTOPSIGNAL SIGTERM\nHEALTHCHECK NONE\nSHELL [\"/bin/bash\", \"-c\"]\n",
    "heredoc": "\n# syntax=docker/dockerfile:1\nFROM kiln-base@3\nRUN <<EOF\necho hi\nEOF\n",
    "refs": "\nFROM localhost:5000/team/img:v1@sha256:" + "a" * 64 + "\nFROM ghcr.io/o/r\n",
    "ignore": "*.tmp\n\nFROM x\n!keep.tmp\n**/node_modules\n[a-c]?.log\n\\#literal\n",
}


def oci_seeds():
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Env": ["PATH=/bin"], "Cmd": ["/bin/sh"], "User": "1000",
                                    "WorkingDir": "/w", "ExposedPorts": {"80/tcp": {}},
                                    "Labels": {"a": "b"}, "StopSignal": "SIGINT"},
                         "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "b" * 64]}})
    manifest = json.dumps({"schemaVersion": 2,
                           "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": "@CONFIG@", "size": 0},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                       "digest": "sha256:" + "c" * 64, "size": 10}]})
    manifest = manifest.replace('"size": 0', '"size": @CSIZE@')
    index = json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "@MANIFEST@",
         "size": 0, "annotations": {"org.opencontainers.image.ref.name": "latest"}}]})
    index = index.replace('"size": 0', '"size": @MSIZE@')
    docker_list = json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.docker.distribution.manifest.list.v2+json",
         "digest": "@MANIFEST@", "size": 1}]})
    sep = "\n----\n"
    return {"oci": index + sep + manifest + sep + config,
            "no_layers": index + sep + manifest.replace('"layers": [', '"layers": [] , "x": [') + sep
            + config,
            "list": docker_list + sep + json.dumps({"schemaVersion": 2, "manifests": [
                {"digest": "sha256:" + "d" * 64, "platform": {"os": "linux",
                                                             "architecture": "amd64"}}]}) + sep,
            "schema1": index + sep + '{"schemaVersion": 1, "fsLayers": []}' + sep + config}


CONFIG_SEEDS = {
    "prices": {"vcpuHourMicros": 10, "gibHourMicros": 20, "snapshotGbMonthMicros": 1,
               "cpuFloorMillis": 50},
    "sandbox_record": {"id": "sb_1", "state": "paused", "owner": "k1", "createdMs": 1,
                       "memoryMiB": 512, "vcpu": 1, "diskMiB": 1024, "expiresMs": 5,
                       "labels": {"a": "b"}, "env": {"A": "1"}, "checkpoint": "snap_1",
                       "pausedMs": 3, "pausedLeaseMs": 4, "name": "n", "autoWake": True,
                       "onLeaseEnd": "pause", "network": {"internet": False},
                       "meter": {"cpuNs": 1, "cpuSeconds": 0.5, "gibHours": 0.1, "micros": 3}},
    "snapshot_record": {"id": "snap_1", "owner": "k1", "sizeBytes": 10, "createdMs": 1,
                        "sourceSandboxId": "sb_1", "temporary": True, "sudoOff": True,
                        "pausedSandbox": "sb_1", "imageWarm": False, "retentionDays": 7,
                        "memoryMiB": 512, "vcpu": 1, "labels": {}},
    "recipe": {"base": "debian", "apt": ["curl"], "pip": ["numpy==2"], "npm": ["x"],
               "commands": ["echo hi"], "files": {"/a": "text"}, "env": {"A": "1"},
               "workdir": "/w"},
}


# ---- Snapshot import (the body of POST /v1/snapshots:import) ----

class _Xxh128(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]


def xxh3_128(data):
    """XXH3-128 as kiln writes it (canonical: high half first), from Debian's
    libxxhash, which kiln links: Python's stdlib has no XXH3."""
    fn = ctypes.CDLL("libxxhash.so.0").XXH3_128bits
    fn.restype, fn.argtypes = _Xxh128, [ctypes.c_char_p, ctypes.c_size_t]
    h = fn(data, len(data))
    return "%016x%016x" % (h.high64, h.low64)


def ustar(entries):
    """Plain ustar as kiln's writer makes it (src/store/snapshot_tar.cc)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 1700000000
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()  # ends with tarfile's record padding: zeros, as kiln allows


def snapshot_tar(files, host=("runsc-fuzz", "base-fuzz"), record=None, extra=(), layers=None):
    """A snapshot tar for fuzz_snapshot_import's host (tests/fuzz/fuzz_snapshot_import.cc).
    `layers`: [(sha256, bytes or None)], an image snapshot's layers (None: skipped)."""
    rec = {"id": "0b3c6f0e-9a4e-4d43-8a55-2f4c1b7e9d10", "name": "warm", "labels": {"team": "x"},
           "sourceSandboxId": "sb1", "vcpu": 1, "memoryMiB": 512, "diskMiB": 0,
           "retentionDays": 7, "createdMs": 1000, "sizeBytes": 0, "captureMs": 10,
           "network": None, "sudoOff": False}
    rec.update(record or {})
    manifest = {"format": "kiln-snapshot/1", "record": rec, "engine": host[0], "base": host[1],
                "files": {name: {"size": len(data), "xxh3_128": xxh3_128(data)}
                          for name, data in files}}
    sent = []
    if layers is not None:
        manifest["record"]["image"] = "img-fuzz"
        manifest["layers"] = [{"base": host[1]}]
        for sha, data in layers:
            size = len(data) if data is not None else 10
            manifest["layers"].append({"sha256": sha, "size": size, "included": data is not None})
            if data is not None:
                sent.append((f"layers/{sha}.tar", data))
    return ustar([("kiln-snapshot.json", json.dumps(manifest, indent=2).encode())]
                 + sent + list(files) + list(extra))


CHECKPOINT = [("checkpoint/checkpoint.img", b"state"),
              ("checkpoint/pages.img", bytes(range(256)) * 6 + b"tail"),
              ("checkpoint/sub/empty.img", b"")]
SNAPSHOT_SEEDS = {
    "whole": snapshot_tar(CHECKPOINT),
    "one_file": snapshot_tar(CHECKPOINT[:1]),
    "other_engine": snapshot_tar(CHECKPOINT[:1], host=("runsc-2", "base-fuzz")),
    "unlisted": snapshot_tar(CHECKPOINT[:1], extra=[("checkpoint/x.img", b"x")]),
    "bad_record": snapshot_tar(CHECKPOINT[:1], record={"vcpu": 0, "labels": {"a": 1}}),
}
SNAPSHOT_SEEDS["truncated"] = SNAPSHOT_SEEDS["whole"][:3000]
# An image snapshot: one layer sent, one skipped that the fuzz target's layer store holds
# (the sha256 of b"held layer", tests/fuzz/fuzz_snapshot_import.cc).
_LAYER = ustar([("srv/app.txt", b"built\n")])
SNAPSHOT_SEEDS["image_layers"] = snapshot_tar(CHECKPOINT[:2], layers=[
    (hashlib.sha256(_LAYER).hexdigest(), _LAYER),
    (hashlib.sha256(b"held layer").hexdigest(), None)])


# ---- Ids that become host paths (one candidate per line) ----
_HEX = hashlib.sha256(b"kiln").hexdigest()
PATH_ID_SEEDS = {
    "valid": "\n".join(["sha256:" + _HEX, _HEX, "base-0123456789abcdef",
                        "0f8fad5b-d9cb-469f-a165-70867728950e"]),
    "near_misses": "\n".join(["sha256:" + _HEX.upper(), "sha512:" + _HEX, "sha256:" + _HEX + "/..",
                              "sha256:../../etc/passwd", "base-0123456789abcdeg", "base-..",
                              _HEX[:63], _HEX + "0", "0F8FAD5B-D9CB-469F-A165-70867728950E",
                              "0f8fad5b-d9cb-469f-a165-70867728950", "../" + _HEX, ""]),
}


def main():
    for name, data in HTTP_SEEDS.items():
        write("fuzz_http_front", name, data)
    for name, data in agent_seeds().items():
        write("fuzz_agent_frames_agent", name, data)
    for name, data in daemon_seeds().items():
        write("fuzz_agent_frames_daemon", name, data)
    for name, data in EGRESS_SEEDS.items():
        write("fuzz_egress_rules", name, data)
    for name, data in PROXY_SEEDS.items():
        write("fuzz_proxy_request", name, data)
    for name, data in TAR_SEEDS.items():
        write("fuzz_tar", name, data)
    for name, data in DOCKERFILE_SEEDS.items():
        write("fuzz_dockerfile", name, data)
    for name, data in oci_seeds().items():
        write("fuzz_oci_layout", name, data)
    for name, data in CONFIG_SEEDS.items():
        write("fuzz_config_json", name, json.dumps(data, indent=1))
    for name, data in SNAPSHOT_SEEDS.items():
        write("fuzz_snapshot_import", name, data)
    for name, data in PATH_ID_SEEDS.items():
        write("fuzz_path_ids", name, data)


if __name__ == "__main__":
    main()
