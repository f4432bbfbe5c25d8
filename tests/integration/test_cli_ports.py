"""The kiln CLI's port, preview, interpreter and watch verbs against the test daemon:
`sandbox port-forward` (HTTP with urllib and a raw TCP echo through the local port),
`preview`/`previews`/`preview-rotate`/`unshare`, `run-code` and `watch`. The server in
the sandbox is tests/integration/port_server.py, as in test_ports.py."""
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

from test_ports import ECHO_PORT, HTTP_PORT, _raw, _serve


@pytest.fixture(scope="module")
def env(kilnd):
    return {**os.environ, "KILN_API_URL": kilnd.url, "KILN_API_KEY": kilnd.admin_key}


@pytest.fixture(scope="module")
def kiln(env, bin_dir):
    def run(*args, timeout=120, stdin=None):
        return subprocess.run([str(bin_dir / "kiln"), *args], env=env, capture_output=True, text=True,
                              timeout=timeout, input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)
    return run


@pytest.fixture(scope="module")
def served(api, sid):
    _serve(api, sid)
    return sid


def _start(env, bin_dir, *args):
    """A long-running kiln; its first stdout line."""
    p = subprocess.Popen([str(bin_dir / "kiln"), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    return p


def _stop(p):
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"kiln did not end on SIGINT: {err}")
    return p.returncode, out, err


def test_port_forward_http_and_echo(env, bin_dir, served):
    p = _start(env, bin_dir, "sandbox", "port-forward", served, f"0:{HTTP_PORT}")
    try:
        line = p.stdout.readline()
        assert line.startswith("Forwarding from 127.0.0.1:") and line.rstrip().endswith(f"-> {HTTP_PORT}"), \
            (line, p.stderr.read() if p.poll() is not None else "")
        local = int(line.split(":")[1].split(" ")[0])
        for i in range(3):
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/echo?i={i}", timeout=30) as r:
                assert json.loads(r.read())["path"] == f"/echo?i={i}"
        with urllib.request.urlopen(f"http://127.0.0.1:{local}/big?n=4000000", timeout=60) as r:
            assert len(r.read()) == 4_000_000
    finally:
        code, _, err = _stop(p)
    assert code == 0, err

    p = _start(env, bin_dir, "sandbox", "port-forward", served, f"0:{ECHO_PORT}", "--address", "127.0.0.1")
    try:
        local = int(p.stdout.readline().split(":")[1].split(" ")[0])
        data = os.urandom(3 << 20)  # past the 1 MiB credit window
        with socket.create_connection(("127.0.0.1", local), timeout=60) as s:
            t = threading.Thread(target=lambda: (s.sendall(data), s.shutdown(socket.SHUT_WR)))
            t.start()
            got = bytearray()
            while (chunk := s.recv(1 << 16)):
                got += chunk
            t.join()
        assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest() and len(got) == len(data)
    finally:
        code, _, err = _stop(p)
    assert code == 0, err


def test_port_forward_refusals(kiln):
    p = kiln("sandbox", "port-forward", "x", "80:0")
    assert p.returncode != 0 and "bad port" in p.stderr
    p = kiln("sandbox", "port-forward", "00000000-0000-4000-8000-000000000000", "8000")
    assert p.returncode != 0 and "not_found" in p.stderr, p.stderr


def test_previews(kiln, kilnd, served):
    p = kiln("sandbox", "preview", served, str(HTTP_PORT), "--ttl", "600", "--json")
    assert p.returncode == 0, p.stderr
    preview = json.loads(p.stdout)
    host = f"{HTTP_PORT}-{served}.localhost"
    assert _raw(kilnd, "GET", "/echo", [f"x-kiln-preview-token: {preview['token']}"], host=host)[0] == 200
    text = kiln("sandbox", "preview", served, str(HTTP_PORT))
    assert text.returncode == 0 and "urlWithToken" in text.stdout and preview["url"] in text.stdout, text
    listed = kiln("sandbox", "previews", served)
    assert listed.returncode == 0 and preview["url"] in listed.stdout and "PORT" in listed.stdout
    rotated = json.loads(kiln("sandbox", "preview-rotate", served, str(HTTP_PORT), "--json").stdout)
    assert _raw(kilnd, "GET", "/echo", [f"x-kiln-preview-token: {preview['token']}"], host=host)[0] == 401
    assert _raw(kilnd, "GET", "/echo", [f"x-kiln-preview-token: {rotated['token']}"], host=host)[0] == 200
    p = kiln("sandbox", "unshare", served, str(HTTP_PORT))
    assert p.returncode == 0 and p.stdout == f"{HTTP_PORT}\n", p
    assert _raw(kilnd, "GET", "/echo", [f"x-kiln-preview-token: {rotated['token']}"], host=host)[0] == 404
    p = kiln("sandbox", "preview", served, str(HTTP_PORT), "--public")
    assert p.returncode == 1 and "forbidden" in p.stderr


def test_run_code(kiln, sid, tmp_path):
    cell = tmp_path / "cell.py"
    cell.write_text("import sys\nn = 6\nprint('out')\nprint('err', file=sys.stderr)\nn * 7\n")
    p = kiln("sandbox", "run-code", sid, str(cell))
    assert (p.returncode, p.stdout, p.stderr) == (0, "out\n42\n", "err\n"), p
    p = kiln("sandbox", "run-code", sid, "-", stdin="n + 1\n")  # state kept
    assert (p.returncode, p.stdout) == (0, "7\n"), p
    p = kiln("sandbox", "run-code", sid, "-", stdin="raise ValueError('bad')\n")
    assert p.returncode == 1 and "ValueError" in p.stderr and "bad" in p.stderr, p
    p = kiln("sandbox", "run-code", sid, "-", "--timeout-ms", "300", stdin="import time\ntime.sleep(20)\n")
    assert p.returncode == 124, p
    p = kiln("sandbox", "run-code", sid, "-", "--lang", "javascript", stdin="[1, 2].map(x => x * 2)\n")
    assert p.returncode == 0 and "2" in p.stdout and "4" in p.stdout, p
    p = kiln("sandbox", "run-code", sid, "-", "--context", "nope", stdin="1\n")
    assert p.returncode == 1 and "context_not_found" in p.stderr, p


def test_watch(env, bin_dir, api, sid):
    api.ok("POST", f"/v1/sandboxes/{sid}/files:mkdir", json={"path": "/workspace/cw", "parents": True})
    p = _start(env, bin_dir, "sandbox", "watch", sid, "/workspace/cw", "--recursive")
    try:
        deadline = time.monotonic() + 30
        while not api.ok("GET", f"/v1/sandboxes/{sid}/files/watches")["data"]:
            assert time.monotonic() < deadline and p.poll() is None, p.stderr.read() if p.poll() is not None else ""
            time.sleep(0.1)
        # A write is a temporary file renamed into place: `rename NEW <- OLD`.
        api.write_file(sid, "/workspace/cw/one.txt", "1")
        lines = [p.stdout.readline()]
        while "<-" not in lines[-1] and len(lines) < 5:
            lines.append(p.stdout.readline())
        assert re.fullmatch(r"create /workspace/cw/\.one\.txt\.kiln-\w+\n", lines[0]), lines
        assert re.fullmatch(r"rename /workspace/cw/one\.txt <- /workspace/cw/\.one\.txt\.kiln-\w+\n", lines[-1]), lines
        api.ok("POST", f"/v1/sandboxes/{sid}/files:mkdir", json={"path": "/workspace/cw/sub", "parents": True})
        assert p.stdout.readline() == "create /workspace/cw/sub/\n", "a folder ends in /"
    finally:
        code, _, err = _stop(p)
    assert code == 0, err
    watches = api.ok("GET", f"/v1/sandboxes/{sid}/files/watches")["data"]
    assert all(w["state"] == "ended" for w in watches), "Ctrl-C stops the watch"
