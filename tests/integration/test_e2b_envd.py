"""envd (port 49983) served by kilnd (src/api/e2b/envd): E2B's own SDKs and
raw Connect requests against real sandboxes.

The module's sandbox is made by E2B's control plane (POST /e2b/sandboxes);
each script reaches it with the SDK's own `Sandbox.connect(id)`, which
hands the SDK envd's access token. Raw requests come in with the kiln key
(`Authorization: Bearer`), which the sandbox plane takes for the sandbox's
owner.
"""
import http.client
import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
import urllib.parse

import pytest

from client import Client
from e2b_clients import (GROUP, e2b_env, e2b_key, e2b_node, e2b_python, run_node,  # noqa: F401
                         run_python)

pytestmark = GROUP
ENVD = 49983


@pytest.fixture(scope="module")
def owner(kilnd, e2b_key):  # noqa: F811
    return Client(kilnd.url, key=e2b_key[0])


@pytest.fixture(scope="module")
def box(kilnd, owner, e2b_key):  # noqa: F811
    """A sandbox of the E2B key's: (id, envd token or None)."""
    r = owner.request("POST", "/e2b/sandboxes", json={"templateID": "base", "timeout": 600},
                      headers={"X-API-Key": e2b_key[1]})
    assert r.status == 201, r.text
    body = r.json()
    yield body["sandboxID"], body["envdAccessToken"]
    owner.request("DELETE", f"/v1/sandboxes/{body['sandboxID']}")


@pytest.fixture(scope="module")
def env(e2b_env, box, e2b_key):  # noqa: F811
    return dict(e2b_env, KILN_SID=box[0], KILN_KEY=e2b_key[0])


PY = """
import os
from e2b import (Sandbox, CommandExitException, TimeoutException,
                 NotFoundException, PtySize)

def sandbox(sid=None):
    # E2B's own way back to a running sandbox: POST /sandboxes/{id}/connect
    # hands it envd's token, and the sandbox plane routes by E2b-Sandbox-Id.
    return Sandbox.connect(sid or os.environ["KILN_SID"])
sbx = sandbox()
"""


def py(e2b_python, env, script, timeout=300):  # noqa: F811
    return run_python(e2b_python, env, script, timeout, imports=PY)


# ---- raw Connect ----

def raw(kilnd, sid, key, method, path, body=b"", headers=None, timeout=60):
    u = urllib.parse.urlparse(kilnd.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    h = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": str(ENVD),
         "Authorization": f"Bearer {key}"}
    h.update(headers or {})
    conn.request(method, "/e2b/sandbox" + path, body=body, headers=h)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, r.getheader("Content-Type"), data


def envelopes(data):
    out = []
    while data:
        flags, n = struct.unpack(">BI", data[:5])
        out.append((flags, data[5:5 + n]))
        data = data[5 + n:]
    return out


def envelope(msg, flags=0):
    return struct.pack(">BI", flags, len(msg)) + msg


def test_health_and_unknown_paths(kilnd, box, e2b_key):  # noqa: F811
    status, _, _ = raw(kilnd, box[0], e2b_key[0], "GET", "/health")
    assert status == 204
    status, ctype, data = raw(kilnd, box[0], e2b_key[0], "GET", "/no/such/route")
    assert status == 404 and ctype.startswith("application/json")
    assert json.loads(data)["code"] == 404
    # The host-name form, {port}-{id}.{domain}, reaches the same envd.
    u = urllib.parse.urlparse(kilnd.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("POST", "/filesystem.Filesystem/Stat", body=json.dumps({"path": "/tmp"}),
                 headers={"Host": f"{ENVD}-{box[0]}.localhost",
                          "Authorization": f"Bearer {e2b_key[0]}",
                          "Content-Type": "application/json"})
    r = conn.getresponse()
    body = json.loads(r.read())
    conn.close()
    assert r.status == 200 and body["entry"]["type"] == "FILE_TYPE_DIRECTORY", body


def test_malformed_connect_requests(kilnd, box, e2b_key):  # noqa: F811
    sid, key = box[0], e2b_key[0]
    stream = {"Content-Type": "application/connect+json"}
    # A streaming call's errors come in the end-stream envelope of a 200.
    status, ctype, data = raw(kilnd, sid, key, "POST", "/process.Process/Start", b"\x00\x00\x00",
                              stream)
    assert status == 200 and ctype == "application/connect+json"
    [(flags, end)] = envelopes(data)
    assert flags == 2
    err = json.loads(end)["error"]
    assert err["code"] == "invalid_argument" and "cut short" in err["message"], err
    # A length far over the cap is refused from the header alone.
    status, _, data = raw(kilnd, sid, key, "POST", "/filesystem.Filesystem/WatchDir",
                          struct.pack(">BI", 0, 1 << 30) + b"{}", stream)
    assert json.loads(envelopes(data)[0][1])["error"]["code"] == "resource_exhausted"
    # Compressed envelopes are not taken.
    status, _, data = raw(kilnd, sid, key, "POST", "/process.Process/Start",
                          envelope(b"{}", flags=1), stream)
    assert "compressed" in json.loads(envelopes(data)[0][1])["error"]["message"]
    # Unary: the HTTP status and {"code","message"}.
    status, ctype, data = raw(kilnd, sid, key, "POST", "/filesystem.Filesystem/Stat", b"{nope",
                              {"Content-Type": "application/json"})
    assert status == 400 and json.loads(data)["code"] == "invalid_argument"
    assert "filesystem.StatRequest" in json.loads(data)["message"]
    status, _, data = raw(kilnd, sid, key, "POST", "/filesystem.Filesystem/Stat",
                          json.dumps({"path": "/nonexistent/x"}).encode(),
                          {"Content-Type": "application/json"})
    assert status == 404 and json.loads(data)["code"] == "not_found"
    status, _, data = raw(kilnd, sid, key, "POST", "/filesystem.Filesystem/Stat", b"{}",
                          {"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert status == 501 and json.loads(data)["code"] == "unimplemented"
    status, _, data = raw(kilnd, sid, key, "POST", "/filesystem.Filesystem/Nope", b"{}",
                          {"Content-Type": "application/json"})
    assert json.loads(data)["code"] == "unimplemented"
    status, _, data = raw(kilnd, sid, key, "POST", "/process.Process/List", b"{}",
                          {"Content-Type": "application/json",
                           "Authorization": "Basic " + "bm9ib2R5Og=="})  # "nobody:"
    # (the Basic header took the Bearer's place: the sandbox plane refuses first)
    assert status == 401
    # A binary (application/proto) unary call works too.
    status, ctype, data = raw(kilnd, sid, key, "POST", "/process.Process/List", b"",
                              {"Content-Type": "application/proto"})
    assert status == 200 and ctype == "application/proto"


def test_commands_python(e2b_python, env):  # noqa: F811
    res = py(e2b_python, env, """
    res = {}
    outs, errs = [], []
    r = sbx.commands.run("echo hello; echo oops >&2; echo $FOO; pwd", envs={"FOO": "bar"},
                         cwd="/tmp", on_stdout=outs.append, on_stderr=errs.append)
    res["run"] = [r.exit_code, r.stdout, r.stderr, "".join(outs), "".join(errs)]
    try:
        sbx.commands.run("echo before; exit 3")
    except CommandExitException as e:
        res["exit"] = [e.exit_code, e.stdout]
    res["whoami"] = sbx.commands.run("id -un; pwd").stdout.split()
    t0 = time.time()
    try:
        sbx.commands.run("sleep 30", timeout=2)
        res["timeout"] = "none"
    except (TimeoutException, CommandExitException) as e:
        res["timeout"] = type(e).__name__
    res["timeout_s"] = time.time() - t0
    time.sleep(1)
    res["timed_out_gone"] = not any("sleep 30" in " ".join(p.args) for p in sbx.commands.list())

    h = sbx.commands.run("sleep 300", background=True)
    listed = [p for p in sbx.commands.list() if p.pid == h.pid]
    res["listed"] = [listed[0].cmd, listed[0].args] if listed else None
    res["killed"] = sbx.commands.kill(h.pid)
    try:
        h.wait()
        res["wait"] = "ok"
    except CommandExitException as e:
        res["wait"] = e.exit_code
    res["kill_again"] = sbx.commands.kill(h.pid)

    h = sbx.commands.run("read line; echo got:$line", background=True, stdin=True)
    sbx.commands.send_stdin(h.pid, "abc\\n")
    res["stdin"] = h.wait().stdout

    h = sbx.commands.run("cat", background=True, stdin=True)
    sbx.commands.send_stdin(h.pid, "one,")
    sbx.commands.stream_input(h.pid, ["two,", b"three"])
    sbx.commands.close_stdin(h.pid)
    res["streamed"] = h.wait().stdout

    h = sbx.commands.run("for i in 1 2 3 4; do echo tick$i; sleep 1; done", background=True)
    time.sleep(1.5)
    h.disconnect()
    c = sbx.commands.connect(h.pid)
    res["connect"] = c.wait().stdout
    out(res)
    """)
    assert res["run"] == [0, "hello\nbar\n/tmp\n", "oops\n", "hello\nbar\n/tmp\n", "oops\n"]
    assert res["exit"] == [3, "before\n"]
    assert res["whoami"] == ["user", "/home/user"]  # E2B's home (kiln's /workspace, bound there)
    assert res["timeout"] != "none" and res["timeout_s"] < 15, res
    assert res["timed_out_gone"], "the command outlived its timeout"
    assert res["listed"] == ["/bin/bash", ["-l", "-c", "sleep 300"]]
    assert res["killed"] is True and res["kill_again"] is False
    assert res["wait"] == -1
    assert res["stdin"] == "got:abc\n"
    assert res["streamed"] == "one,two,three"
    # Connected mid-way: what came after, to the end.
    assert res["connect"].endswith("tick4\n") and "tick1" not in res["connect"], res["connect"]


def test_pty_python(e2b_python, env):  # noqa: F811
    res = py(e2b_python, env, """
    h = sbx.pty.create(PtySize(rows=24, cols=80), timeout=60)
    sbx.pty.send_stdin(h.pid, b"stty size; echo pty-$((40+2))\\n")
    time.sleep(1)
    sbx.pty.resize(h.pid, PtySize(rows=30, cols=100))
    sbx.pty.send_stdin(h.pid, b"stty size; exit\\n")
    data = []
    try:
        r = h.wait(on_pty=lambda d: data.append(bytes(d)))
        code = r.exit_code
    except CommandExitException as e:
        code = e.exit_code
    out({"code": code, "out": b"".join(data).decode("utf-8", "replace")})
    """)
    assert "pty-42" in res["out"]
    assert "24 80" in res["out"] and "30 100" in res["out"], res["out"]


def test_files_python(e2b_python, env):  # noqa: F811
    res = py(e2b_python, env, """
    res = {}
    base = "/tmp/e2b-files"
    w = sbx.files.write(base + "/a.txt", "hello")
    res["write"] = [w.name, w.path]
    res["read"] = sbx.files.read(base + "/a.txt")
    infos = sbx.files.write_files([{"path": base + "/many/1.txt", "data": "one"},
                                   {"path": base + "/many/sub/2.txt", "data": b"two"},
                                   {"path": base + "/many/3.txt", "data": "three"}])
    res["many"] = sorted(i.path for i in infos)
    res["list"] = sorted(e.name for e in sbx.files.list(base + "/many"))
    res["list2"] = sorted(e.path for e in sbx.files.list(base + "/many", depth=2))
    res["exists"] = [sbx.files.exists(base + "/a.txt"), sbx.files.exists(base + "/none")]
    res["mkdir"] = [sbx.files.make_dir(base + "/d"), sbx.files.make_dir(base + "/d")]
    res["rename"] = sbx.files.rename(base + "/a.txt", base + "/b.txt").path
    i = sbx.files.get_info(base + "/b.txt")
    res["info"] = [i.name, i.type.value, i.path, i.size, i.permissions, i.owner,
                   i.modified_time.year > 2000]
    d = sbx.files.get_info(base + "/d")
    res["dirinfo"] = [d.type.value, d.permissions[0]]
    sbx.files.remove(base + "/b.txt")
    res["removed"] = sbx.files.exists(base + "/b.txt")
    try:
        sbx.files.read(base + "/none")
    except Exception as e:
        res["read_missing"] = type(e).__name__
    try:
        sbx.files.list(base + "/none")
    except Exception as e:
        res["list_missing"] = type(e).__name__

    w = sbx.files.watch_dir(base + "/d")
    sbx.files.write(base + "/d/new.txt", "x")
    sbx.files.make_dir(base + "/d/sub")
    time.sleep(1.5)
    res["events"] = sorted({(e.name, e.type.value) for e in w.get_new_events()})
    sbx.files.remove(base + "/d/new.txt")
    time.sleep(1.5)
    res["events2"] = sorted({(e.name, e.type.value) for e in w.get_new_events()})
    w.stop()
    out(res)
    """)
    base = "/tmp/e2b-files"
    assert res["write"] == ["a.txt", base + "/a.txt"]
    assert res["read"] == "hello"
    assert res["many"] == [base + "/many/1.txt", base + "/many/3.txt", base + "/many/sub/2.txt"]
    assert res["list"] == ["1.txt", "3.txt", "sub"]
    assert base + "/many/sub/2.txt" in res["list2"]
    assert res["exists"] == [True, False]
    assert res["mkdir"] == [True, False]
    assert res["rename"] == base + "/b.txt"
    assert res["info"] == ["b.txt", "file", base + "/b.txt", 5, "-rw-r--r--", "user", True]
    assert res["dirinfo"] == ["dir", "d"]
    assert res["removed"] is False
    assert res["read_missing"] in ("NotFoundException", "FileNotFoundException")
    assert res["list_missing"] in ("NotFoundException", "FileNotFoundException")
    assert ["new.txt", "create"] in [list(e) for e in res["events"]], res["events"]
    assert ["sub", "create"] in [list(e) for e in res["events"]], res["events"]
    assert ["new.txt", "remove"] in [list(e) for e in res["events2"]], res["events2"]


def test_big_file_both_ways(e2b_python, env):  # noqa: F811
    res = py(e2b_python, env, """
    import hashlib, io
    data = os.urandom(50 << 20)
    sbx.files.write("/tmp/big.bin", io.BytesIO(data))
    remote = sbx.commands.run("sha256sum /tmp/big.bin").stdout.split()[0]
    got = sbx.files.read("/tmp/big.bin", format="bytes")
    h = hashlib.sha256()
    for chunk in sbx.files.read("/tmp/big.bin", format="stream"):
        h.update(chunk)
    out([hashlib.sha256(data).hexdigest(), remote, hashlib.sha256(bytes(got)).hexdigest(),
         h.hexdigest()])
    """, timeout=600)
    assert res[0] == res[1] == res[2] == res[3]


def test_unknown_sandbox_is_not_found(e2b_python, env):  # noqa: F811
    res = py(e2b_python, env, """
    res = {}
    # A sandbox the SDK holds that is gone (killed by another client): envd's
    # requests name an id kilnd no longer knows.
    other = Sandbox.create(template="base")
    Sandbox.kill(other.sandbox_id)
    for name, call in [("run", lambda: other.commands.run("true")),
                       ("stat", lambda: other.files.get_info("/tmp")),
                       ("read", lambda: other.files.read("/etc/hostname"))]:
        try:
            call()
            res[name] = "ok"
        except Exception as e:
            res[name] = [type(e).__name__, str(e)[:200]]
    out(res)
    """)
    for name, got in res.items():
        assert got != "ok" and "NotFound" in got[0], (name, got)


def test_root_user_python(e2b_python, env, box):  # noqa: F811
    res = py(e2b_python, env, """
    r = sbx.commands.run("id -un; pwd", user="root")
    w = sbx.files.write("/root/e2b-root.txt", "r", user="root")
    out([r.stdout, sbx.files.read("/root/e2b-root.txt", user="root")])
    """)
    assert res == ["root\n/root\n", "r"]


def test_files_as_root_by_query(kilnd, box, e2b_key):  # noqa: F811
    # /files names its user in the query: root may write where the user may not.
    sid, key = box[0], e2b_key[0]
    boundary = "kilnboundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"/root/by-query.txt\"\r\n\r\nroot's\r\n--{boundary}--\r\n").encode()
    status, _, data = raw(kilnd, sid, key, "POST", "/files?username=root", body,
                          {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert status == 200, data
    assert json.loads(data) == [{"name": "by-query.txt", "type": "file",
                                 "path": "/root/by-query.txt"}]
    status, _, data = raw(kilnd, sid, key, "GET", "/files?path=/root/by-query.txt&username=root")
    assert status == 200 and data == b"root's"
    status, _, data = raw(kilnd, sid, key, "GET", "/files?path=/x&username=nobody")
    assert status == 400 and "nobody" in json.loads(data)["message"]
    status, _, data = raw(kilnd, sid, key, "GET", "/files?path=/tmp/none-such")
    assert status == 404 and json.loads(data)["code"] == 404
    # application/octet-stream, as envd 0.5.7 takes it.
    status, _, data = raw(kilnd, sid, key, "POST", "/files?path=/tmp/octet.bin", b"\x00\x01\x02",
                          {"Content-Type": "application/octet-stream"})
    assert status == 200 and json.loads(data)[0]["path"] == "/tmp/octet.bin"
    status, _, data = raw(kilnd, sid, key, "POST", "/files?path=/tmp/x", b"--x\r\nbroken",
                          {"Content-Type": "multipart/form-data; boundary=x"})
    assert status == 400 and "multipart" in json.loads(data)["message"]


# ---- streams cut mid-way ----

CLIENT = r"""
import http.client, json, struct, sys, time
host, port, sid, key, path, body = sys.argv[1:7]
c = http.client.HTTPConnection(host, int(port))
msg = body.encode()
c.request("POST", "/e2b/sandbox" + path, body=struct.pack(">BI", 0, len(msg)) + msg,
          headers={"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983",
                   "Authorization": "Bearer " + key,
                   "Content-Type": "application/connect+json"})
r = c.getresponse()
head = r.read(5)
flags, n = struct.unpack(">BI", head)
print(r.read(n).decode(), flush=True)
time.sleep(600)
"""


def threads_of(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def cut_stream(kilnd, sid, key, path, body):
    u = urllib.parse.urlparse(kilnd.url)
    p = subprocess.Popen([sys.executable, "-c", CLIENT, u.hostname, str(u.port), sid, key, path,
                          json.dumps(body)], stdout=subprocess.PIPE, text=True)
    first = p.stdout.readline()
    time.sleep(1)
    p.send_signal(signal.SIGKILL)
    p.wait()
    return json.loads(first)


def settle(check, seconds=20):
    end = time.monotonic() + seconds
    while True:
        got = check()
        if got or time.monotonic() > end:
            return got
        time.sleep(0.5)


def test_cut_streams_leave_nothing_of_kilnd(kilnd, box, owner, e2b_key):  # noqa: F811
    sid, key = box[0], e2b_key[0]
    pid = kilnd.proc.pid
    base = threads_of(pid)
    raw(kilnd, sid, key, "POST", "/filesystem.Filesystem/MakeDir",
        json.dumps({"path": "/tmp/cutwatch"}).encode(), {"Content-Type": "application/json"})

    first = cut_stream(kilnd, sid, key, "/filesystem.Filesystem/WatchDir",
                       {"path": "/tmp/cutwatch", "recursive": True})
    assert "start" in first, first

    def no_stream_watch():
        watches = owner.ok("GET", f"/v1/sandboxes/{sid}/files/watches")["data"]
        return not [w for w in watches if w["id"].startswith("e2b-stream-")
                    and w.get("running", True) and w.get("state", "running") == "running"]
    assert settle(no_stream_watch), owner.ok("GET", f"/v1/sandboxes/{sid}/files/watches")

    first = cut_stream(kilnd, sid, key, "/process.Process/Start",
                       {"process": {"cmd": "/bin/sleep", "args": ["600"], "envs": {"K": "v"}},
                        "tag": "cut-tag"})
    started = first["event"]["start"]["pid"]
    # E2B's processes outlive the stream that started them ...
    procs = owner.ok("GET", f"/v1/sandboxes/{sid}/processes")["data"]
    assert [p for p in procs if p["pid"] == started and p["state"] == "running"], procs
    # ... and kilnd's threads for the two streams are gone.
    assert settle(lambda: threads_of(pid) <= base + 2), (base, threads_of(pid))
    # The tag and the variables are listed, and the tag names the process.
    unary = {"Content-Type": "application/json"}
    _, _, data = raw(kilnd, sid, key, "POST", "/process.Process/List", b"{}", unary)
    [info] = [p for p in json.loads(data)["processes"] if p["pid"] == started]
    assert info["tag"] == "cut-tag" and info["config"]["envs"] == {"K": "v"}, info
    assert info["config"]["cmd"] == "/bin/sleep" and info["config"]["args"] == ["600"], info
    status, _, data = raw(kilnd, sid, key, "POST", "/process.Process/SendSignal",
                          json.dumps({"process": {"tag": "cut-tag"},
                                      "signal": "SIGNAL_SIGKILL"}).encode(), unary)
    assert status == 200, data
    # Once it is gone, its pid names nothing.
    def gone():
        status, _, data = raw(kilnd, sid, key, "POST", "/process.Process/SendSignal",
                              json.dumps({"process": {"pid": started},
                                          "signal": "SIGNAL_SIGTERM"}).encode(), unary)
        return status == 404 and json.loads(data)["code"] == "not_found"
    assert settle(gone, 10)


# ---- the JS SDK ----

JS = """
import { Sandbox } from 'e2b'
const sbx = await Sandbox.connect(process.env.KILN_SID)
"""


def test_js_sdk(e2b_node, env):  # noqa: F811
    res = run_node(e2b_node, env, JS + textwrap.dedent("""
    const res = {}
    const outs = [], errs = []
    const r = await sbx.commands.run('echo hi; echo $A >&2; pwd', {envs: {A: 'b'}, cwd: '/tmp',
        onStdout: (d) => outs.push(d), onStderr: (d) => errs.push(d)})
    res.run = [r.exitCode, r.stdout, r.stderr, outs.join(''), errs.join('')]
    try {
      await sbx.commands.run('exit 4')
    } catch (e) {
      res.exit = [e.constructor.name, e.exitCode]
    }
    res.made = [await sbx.files.makeDir('/tmp/jsw'), await sbx.files.makeDir('/tmp/jsw')]
    const events = []
    const w = await sbx.files.watchDir('/tmp/jsw', (e) => events.push([e.name, e.type]))
    await sbx.files.write('/tmp/jsw/f.txt', 'js')
    await sbx.files.write([{path: '/tmp/jsw/g.txt', data: 'g'}, {path: '/tmp/jsw/h.txt', data: 'h'}])
    res.read = await sbx.files.read('/tmp/jsw/f.txt')
    res.list = (await sbx.files.list('/tmp/jsw')).map((e) => e.name).sort()
    res.exists = [await sbx.files.exists('/tmp/jsw/f.txt'), await sbx.files.exists('/tmp/jsw/no')]
    res.info = (({name, type, size}) => [name, type, size])(await sbx.files.getInfo('/tmp/jsw/f.txt'))
    await sbx.files.rename('/tmp/jsw/g.txt', '/tmp/jsw/g2.txt')
    await sbx.files.remove('/tmp/jsw/h.txt')
    await new Promise((r) => setTimeout(r, 1500))
    await w.stop()
    res.events = events
    const h = await sbx.commands.run('sleep 100', {background: true})
    res.listed = (await sbx.commands.list()).some((p) => p.pid === h.pid)
    res.killed = await h.kill()
    try { await h.wait() } catch (e) { res.waited = [e.constructor.name, e.exitCode] }
    const data = []
    const t = await sbx.pty.create({cols: 80, rows: 24, onData: (d) => data.push(Buffer.from(d))})
    await sbx.pty.sendInput(t.pid, new TextEncoder().encode('echo js-$((6*7)); exit\\n'))
    try { await t.wait() } catch (e) {}
    res.pty = Buffer.concat(data).toString()
    out(res)
    """))
    assert res["run"] == [0, "hi\n/tmp\n", "b\n", "hi\n/tmp\n", "b\n"]
    assert res["exit"] == ["CommandExitError", 4]
    assert res["made"] == [True, False]
    assert res["read"] == "js" and res["list"] == ["f.txt", "g.txt", "h.txt"]
    assert res["exists"] == [True, False]
    assert res["info"] == ["f.txt", "file", 2]
    names = {tuple(e) for e in res["events"]}
    for want in [("f.txt", "create"), ("g2.txt", "create"), ("g.txt", "rename"),
                 ("h.txt", "remove")]:
        assert want in names, res["events"]
    assert res["listed"] is True and res["killed"] is True
    assert res["waited"] == ["CommandExitError", -1]
    assert "js-42" in res["pty"], res["pty"]


def test_js_sdk_root(e2b_node, env, box):  # noqa: F811
    res = run_node(e2b_node, env, JS + textwrap.dedent("""
    out((await sbx.commands.run('id -un', {user: 'root'})).stdout)
    """))
    assert res == "root\n"
