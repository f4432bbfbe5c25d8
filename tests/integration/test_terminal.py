"""Terminals: processes on a pty (spawn, :resize), the terminal WebSocket
(a minimal RFC 6455 client below, and Runtime's published Python client), and
`kiln sandbox shell` driven as a person would, inside tmux.

Nothing here sleeps to assert: every wait polls with a deadline."""
import base64
import json
import os
import shlex
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import pytest

from client import assert_error


def _path(sid, pid="", suffix=""):
    return f"/v1/sandboxes/{sid}/processes" + (f"/{pid}" if pid else "") + suffix


class Output:
    """A pty process's output read by cursor, waiting for what is expected."""

    def __init__(self, api, sid, pid):
        self.api, self.sid, self.pid, self.cursor, self.text = api, sid, pid, 0, ""

    def until(self, needle, timeout=20):
        deadline = time.monotonic() + timeout
        while needle not in self.text:
            left = deadline - time.monotonic()
            assert left > 0, f"{needle!r} not seen in {timeout}s; got {self.text[-800:]!r}"
            page = self.api.ok("GET", _path(self.sid, self.pid, "/output"),
                               query={"cursor": self.cursor, "waitMs": int(min(left, 5) * 1000)})
            for c in page["chunks"]:
                assert c["stream"] == "stdout", c
                self.text += c["data"]
            self.cursor = page["nextCursor"]
            if page["complete"] and needle not in self.text:
                raise AssertionError(f"ended without {needle!r}: {self.text[-800:]!r}")
        return self.text

    def mark(self):
        """Only what comes after this is searched by the next until()."""
        self.text = ""


def _type(api, sid, pid, text):
    api.ok("POST", _path(sid, pid, ":write"), json={"data": text})


def _shell(api, sid, **pty):
    info = api.spawn(sid, argv=["bash", "--norc", "--noprofile", "-i"], pty=pty or True,
                     env={"PS1": "$ "})
    return info, Output(api, sid, info["id"])


# ---- the API: spawn with a pty, :resize --------------------------------------------------------


def test_pty_process_is_on_a_terminal_of_its_size(api, sid):
    info, out = _shell(api, sid, cols=100, rows=30)
    assert info["pty"] == {"cols": 100, "rows": 30}, info
    assert info["stdinOpen"] is True, info
    pid = info["id"]
    _type(api, sid, pid, "stty size; tty; echo TERM=$TERM\r")
    out.until("TERM=xterm-256color")
    assert "30 100" in out.text, out.text
    assert "/dev/pts/" in out.text, out.text

    # Typed keys are echoed by the terminal itself (stdin is not a pipe).
    out.mark()
    _type(api, sid, pid, "echo hi\r")
    out.until("hi\r\n")
    assert "echo hi" in out.text, out.text

    # :resize reaches the shell (SIGWINCH and the new size).
    resized = api.ok("POST", _path(sid, pid, ":resize"), json={"cols": 132, "rows": 43})
    assert resized["pty"] == {"cols": 132, "rows": 43}, resized
    out.mark()
    _type(api, sid, pid, "stty size\r")
    out.until("43 132")
    assert api.process(sid, pid)["pty"] == {"cols": 132, "rows": 43}

    _type(api, sid, pid, "exit 7\r")
    done = api.wait_process(sid, pid)
    assert done["exitCode"] == 7, done
    # An ended terminal cannot be resized, and says so.
    r = api.post(_path(sid, pid, ":resize"), json={"cols": 80, "rows": 24})
    assert_error(r, 400, "invalid_request", mentions=["ended"])


def test_pty_true_is_80x24_and_env_term_wins(api, sid):
    info = api.spawn(sid, command="stty size; echo TERM=$TERM", pty=True, env={"TERM": "vt100"})
    assert info["pty"] == {"cols": 80, "rows": 24}, info
    out = Output(api, sid, info["id"])
    out.until("TERM=vt100")
    assert "24 80" in out.text, out.text
    # A process without a terminal shows pty null.
    plain = api.spawn(sid, command="true")
    assert plain["pty"] is None, plain


def test_bad_pty_and_resize_values_name_the_field(api, sid):
    for pty, field in [({"cols": 0, "rows": 24}, "body.pty.cols"), ({"cols": 80, "rows": 1001}, "body.pty.rows"),
                       ("big", "body.pty"), ({"cols": 80, "width": 3}, "body.pty.width")]:
        r = api.post(_path(sid), json={"command": "true", "pty": pty})
        assert_error(r, 400, "invalid_request", issue_path=field)
    info, _ = _shell(api, sid)
    pid = info["id"]
    for body, field in [({"cols": 0, "rows": 10}, "body.cols"), ({"cols": 10, "rows": 5000}, "body.rows"),
                        ({"cols": "80", "rows": 10}, "body.cols"), ({"cols": 80}, "body.rows"),
                        ({"cols": 80, "rows": 24, "x": 1}, "body.x")]:
        r = api.post(_path(sid, pid, ":resize"), json=body)
        assert_error(r, 400, "invalid_request", issue_path=field)
    api.ok("POST", _path(sid, pid, ":signal"), json={"signal": "SIGKILL"})


def test_resize_of_a_process_without_terminal_is_refused(api, sid):
    info = api.spawn(sid, argv=["sleep", "30"])
    r = api.post(_path(sid, info["id"], ":resize"), json={"cols": 80, "rows": 24})
    assert_error(r, 400, "invalid_request", mentions=["no terminal"])
    r = api.post(_path(sid, "p999999", ":resize"), json={"cols": 80, "rows": 24})
    assert r.status == 404, r
    api.ok("POST", _path(sid, info["id"], ":signal"), json={"signal": "SIGKILL"})


# ---- the WebSocket -----------------------------------------------------------------------------


class MiniWebSocket:
    """Just enough RFC 6455 for the tests: masked client frames, no fragmentation out."""

    def __init__(self, url, target, key, headers=()):
        u = urllib.parse.urlsplit(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=30)
        nonce = base64.b64encode(os.urandom(16)).decode()
        host = [] if any(h.lower().startswith("host:") for h in headers) else [f"Host: {u.netloc}"]
        lines = [f"GET {target} HTTP/1.1", *host, "Upgrade: websocket", "Connection: Upgrade",
                 f"Sec-WebSocket-Key: {nonce}", "Sec-WebSocket-Version: 13", *headers]
        if key:
            lines.append(f"Authorization: Bearer {key}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                break
            head += chunk
        head, _, self.buf = head.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ")[1]) if head else 0
        self.head = head.decode("latin-1")
        self.body = self.buf
        self.closed = False

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, data):
        opcode, payload = (1, data.encode()) if isinstance(data, str) else (2, data)
        self._frame(opcode, payload)

    def _frame(self, opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | (n if n < 126 else 126 if n < 65536 else 127))
        if 126 <= n < 65536:
            head += struct.pack("!H", n)
        elif n >= 65536:
            head += struct.pack("!Q", n)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def recv(self, timeout=30):
        """bytes, str, or None once closed (the close is answered)."""
        self.sock.settimeout(timeout)
        message, kind = b"", None
        while True:
            first, second = self._read(2)
            n = second & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            assert not second & 0x80, "server frames must not be masked"
            payload = self._read(n)
            opcode = first & 0x0F
            if opcode == 8:
                self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                if not self.closed:
                    self._frame(8, payload[:2])
                self.closed = True
                return None
            if opcode == 9:
                self._frame(10, payload)
                continue
            if opcode in (1, 2):
                kind = opcode
            message += payload
            if first & 0x80:
                return message.decode() if kind == 1 else message

    def close(self):
        if not self.closed:
            try:
                self._frame(8, struct.pack("!H", 1000))
            except OSError:
                pass
        self.closed = True
        self.sock.close()


def _ws(kilnd, sid, key=None, **query):
    target = f"/v1/sandboxes/{sid}/terminal"
    if query:
        target += "?" + urllib.parse.urlencode(query)
    return MiniWebSocket(kilnd.url, target, kilnd.admin_key if key is None else key)


class Screen:
    """A WebSocket terminal's output and events, read until something shows."""

    def __init__(self, ws):
        self.ws, self.text, self.events = ws, "", []

    def until(self, needle, timeout=20):
        deadline = time.monotonic() + timeout
        while needle not in self.text:
            left = deadline - time.monotonic()
            assert left > 0, f"{needle!r} not seen; got {self.text[-800:]!r} events {self.events}"
            m = self.ws.recv(timeout=left)
            if m is None:
                raise AssertionError(f"closed before {needle!r}: {self.text[-800:]!r} {self.events}")
            if isinstance(m, str):
                self.events.append(json.loads(m))
            else:
                self.text += m.decode("utf-8", "replace")
        return self.text

    def until_closed(self, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"not closed; events {self.events}"
            m = self.ws.recv(timeout=left)
            if m is None:
                return self.events
            if isinstance(m, str):
                self.events.append(json.loads(m))
            else:
                self.text += m.decode("utf-8", "replace")


def test_websocket_terminal_round_trip(kilnd, api, sid):
    ws = _ws(kilnd, sid, cols=90, rows=33, command="bash --norc --noprofile -i")
    assert ws.status == 101, ws.head
    ready = json.loads(ws.recv())
    assert ready["type"] == "ready" and ready["processId"].startswith("p"), ready
    info = api.process(sid, ready["processId"])
    assert info["pty"] == {"cols": 90, "rows": 33} and info["state"] == "running", info
    screen = Screen(ws)
    ws.send(b"stty size\r")
    screen.until("33 90")
    ws.send(json.dumps({"type": "resize", "cols": 101, "rows": 41}))
    ws.send(b"stty size\r")
    screen.until("41 101")
    # A bad control frame is reported, and the session goes on.
    ws.send(json.dumps({"type": "resize", "cols": 0, "rows": 41}))
    ws.send(b"echo still-here\r")
    screen.until("still-here\r\n")
    assert any(e["type"] == "error" and "cols" in e["error"]["message"] for e in screen.events), screen.events
    # Interactive feel: keystroke to echo, the median of 20.
    samples = []
    for ch in "abcdefghijklmnopqrst":
        t0 = time.monotonic()
        ws.send(ch.encode())
        screen.until(ch)
        samples.append(time.monotonic() - t0)
        screen.text = ""
    samples.sort()
    median_ms = samples[len(samples) // 2] * 1000
    print(f"terminal echo latency: median {median_ms:.1f} ms, max {samples[-1] * 1000:.1f} ms")
    assert median_ms < 100, samples
    ws.send(b"\x15exit 5\r")  # ^U clears the typed letters first
    events = screen.until_closed()
    assert events[-1] == {"type": "exit", "exitCode": 5, "signal": None, "state": "exited"}, events
    assert ws.close_code == 1000
    ws.close()


def test_websocket_default_shell_attach_and_hangup(kilnd, api, sid):
    ws = _ws(kilnd, sid)  # no size: 80x24; no command: the login shell
    ready = json.loads(ws.recv())
    pid = ready["processId"]
    info = api.process(sid, pid)
    assert info["pty"] == {"cols": 80, "rows": 24} and info["argv"][-1] == "-l", info
    screen = Screen(ws)
    ws.send(b"echo in-$((6*7))-sh\r")
    screen.until("in-42-sh")

    # A second client attaches by processId (resizing it) and sees new output.
    other = _ws(kilnd, sid, processId=pid, cols=120, rows=40)
    assert json.loads(other.recv()) == {"type": "ready", "processId": pid}
    assert api.process(sid, pid)["pty"] == {"cols": 120, "rows": 40}
    seen = Screen(other)
    ws.send(b"echo from-first\r")
    seen.until("from-first\r\n")
    other.close()
    assert api.process(sid, pid)["state"] == "running", "closing an attached terminal ended its shell"

    # Closing the terminal that started the shell hangs it up.
    ws.close()
    deadline = time.monotonic() + 20
    while api.process(sid, pid)["state"] == "running":
        assert time.monotonic() < deadline, "the shell outlived its closed terminal"
        time.sleep(0.1)
    assert api.process(sid, pid)["signal"] == "SIGHUP" or api.process(sid, pid)["exitCode"] is not None


def test_websocket_refusals(kilnd, api, sid):
    # No key: refused before the upgrade, as every route.
    ws = _ws(kilnd, sid, key="")
    assert ws.status == 401, ws.head
    # Not a WebSocket request: a plain 400.
    r = api.get(f"/v1/sandboxes/{sid}/terminal")
    assert_error(r, 400, "invalid_request", mentions=["WebSocket"])
    # After the upgrade, errors are an error frame and a close.
    for query, code, words in [({"cols": 0}, "invalid_request", "query.cols"),
                               ({"processId": "p999999"}, "not_found", "p999999"),
                               ({"user": "root"}, "invalid_request", "query.user")]:
        ws = _ws(kilnd, sid, **query)
        assert ws.status == 101, ws.head
        event = json.loads(ws.recv())
        assert event["type"] == "error" and event["error"]["code"] == code, event
        assert words in event["error"]["message"], event
        assert ws.recv() is None and ws.close_code == 1008
        ws.close()
    plain = api.spawn(sid, argv=["sleep", "30"])
    ws = _ws(kilnd, sid, processId=plain["id"])
    event = json.loads(ws.recv())
    assert event["type"] == "error" and "no terminal" in event["error"]["message"], event
    ws.close()
    ws = _ws(kilnd, "sbx_nope")
    event = json.loads(ws.recv())
    assert event["type"] == "error" and event["error"]["code"] == "not_found", event
    ws.close()
    api.ok("POST", _path(sid, plain["id"], ":signal"), json={"signal": "SIGKILL"})


WHEEL = "withruntime==0.35.0"


@pytest.fixture(scope="module")
def withruntime_python():
    """A venv with Runtime's published client, made with pip from PyPI."""
    venv = Path(tempfile.mkdtemp(prefix="kiln-withruntime-"))
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120)
        py = venv / "bin" / "python"
        r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", WHEEL],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            pytest.skip(f"pip could not install {WHEEL}: {r.stderr.strip()[-300:]}")
        yield py
    finally:
        shutil.rmtree(venv, ignore_errors=True)


def test_withruntime_client_terminal(kilnd, sid, withruntime_python):
    script = r"""
import sys, time
from withruntime import Runtime
url, key, sid = sys.argv[1:4]
sbx = Runtime(api_key=key, base_url=url).sandboxes.get(sid)
term = sbx.terminal(cols=77, rows=21, command="bash --norc --noprofile -i")
assert term.process_id, term.process_id
term.write("stty size\r")
seen = b""
while b"21 77" not in seen:
    seen += term.recv()
term.resize(66, 19)
term.write("stty size; exit 4\r")
while True:
    chunk = term.recv()
    if chunk is None:
        break
    seen += chunk
assert b"19 66" in seen, seen
print("exit", term.exit_code)
"""
    r = subprocess.run([str(withruntime_python), "-c", script, kilnd.url, kilnd.admin_key, sid],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "exit 4", r.stdout


# ---- kiln sandbox shell, as a person at a terminal (tmux) ---------------------------------------


class Tmux:
    def __init__(self, env):
        # A server of its own on a socket in a directory of its own, removed after.
        self.dir = tempfile.mkdtemp(prefix="kiln-tmux-")
        self.sock = os.path.join(self.dir, "sock")
        self.env = env

    def run(self, *args, check=True):
        return subprocess.run(["tmux", "-S", self.sock, "-f", "/dev/null", *args], env=self.env, capture_output=True, text=True,
                              timeout=30, check=check)

    def screen(self):
        return self.run("capture-pane", "-p", "-t", "t").stdout

    def keys(self, *keys):
        self.run("send-keys", "-t", "t", *keys)

    def until(self, predicate, what, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if predicate(text):
                return text
            assert time.monotonic() < deadline, f"{what} not on screen:\n{text}"
            time.sleep(0.05)

    def kill(self):
        self.run("kill-server", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def tmux(kilnd):
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed")
    env = {**os.environ, "KILN_API_URL": kilnd.url, "KILN_API_KEY": kilnd.admin_key, "TERM": "xterm-256color"}
    env.pop("TMUX", None)
    t = Tmux(env)
    yield t
    t.kill()


def test_kiln_sandbox_shell_in_tmux(tmux, bin_dir, sid):
    kiln = shlex.quote(str(bin_dir / "kiln"))
    # A local shell in the pane, so what the CLI leaves behind can be seen.
    tmux.run("new-session", "-d", "-s", "t", "-x", "100", "-y", "30", "bash --norc --noprofile")
    tmux.run("set-option", "-t", "t", "status", "off")  # all 30 rows are the pane's
    tmux.keys(f"PS1='local$ '; {kiln} sandbox shell {sid} -- bash --norc --noprofile -i; echo rc=$?", "Enter")
    tmux.keys("PS1='remote$ '", "Enter")
    tmux.until(lambda s: "remote$" in s, "the remote prompt")
    tmux.keys("stty size; tty", "Enter")
    tmux.until(lambda s: "30 100" in s and "/dev/pts/" in s, "stty size 30 100")

    # A full-screen program, then quit it.
    tmux.keys("clear; top -d 1", "Enter")
    tmux.until(lambda s: "load average" in s and "PID" in s, "top's screen")
    tmux.keys("q")
    tmux.until(lambda s: "remote$" in s.strip().splitlines()[-1] if s.strip() else False, "the prompt after top")

    # The window changes size: the remote terminal follows (SIGWINCH).
    tmux.run("resize-window", "-t", "t", "-x", "120", "-y", "40")
    tmux.keys("clear; stty size", "Enter")
    tmux.until(lambda s: "40 120" in s, "stty size 40 120")

    # ^C reaches the remote foreground program, not the CLI.
    # (Once it runs: a ^C typed ahead would reach the shell's line editor instead.)
    tmux.keys("echo sleep-$((1+2)); sleep 1000", "Enter")
    tmux.until(lambda s: "sleep-3" in s, "the marker before sleep")
    tmux.keys("C-c")
    tmux.keys("echo after-$((1+1))", "Enter")
    tmux.until(lambda s: "after-2" in s, "the shell after ^C")

    # exit 3 ends the session; the CLI exits 3 and the local terminal is sane again.
    tmux.keys("exit 3", "Enter")
    tmux.until(lambda s: "rc=3" in s, "rc=3")
    tmux.keys("clear; stty -a", "Enter")
    screen = tmux.until(lambda s: "icanon" in s, "stty -a")
    words = screen.split()
    assert "icanon" in words and "echo" in words and "-icanon" not in words and "-echo" not in words, screen


def test_kiln_sandbox_shell_piped(kilnd, bin_dir, sid):
    env = {**os.environ, "KILN_API_URL": kilnd.url, "KILN_API_KEY": kilnd.admin_key}
    r = subprocess.run([str(bin_dir / "kiln"), "sandbox", "shell", sid, "--", "bash", "--norc", "-i"],
                       input="echo piped-$((2*21))\nexit 9\n", env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 9, (r.returncode, r.stdout, r.stderr)
    assert "piped-42" in r.stdout, r.stdout
    r = subprocess.run([str(bin_dir / "kiln"), "sandbox", "shell", "sbx_nope"], input="", env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "not_found" in r.stderr, (r.returncode, r.stderr)
