"""--allow-registry as an operator spells it (issue 42, item 9): HOST matches any port,
HOST:PORT ([V6]:PORT) that port only, anything else is refused at start naming the flag.
Pulls from real loopback `docker-registry`s through a real kilnd started without the tests'
default loopback allowances."""
import http.client
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from client import Client
from conftest import BIN_DIR, IMAGE_DIR, start_kilnd, stop_kilnd
from lib.net import free_port
from oci import Registry, image_config, layer
from test_images import build


# ---- item 9: --allow-registry ---------------------------------------------------------------------


BAD_REGISTRIES = ["127.0.0.1:", "127.0.0.1:port", "127.0.0.1:99999", "http://127.0.0.1:5000",
                  "127.0.0.1:5000/v2", "[::1]:x", "a b"]


@pytest.mark.parametrize("value", BAD_REGISTRIES)
def test_kilnd_refuses_a_bad_allow_registry(tmp_path, value):
    """Attack (item 9, an operator's mistake that opens or silently closes a hole):
    `--allow-registry` spelled as something that is neither HOST, HOST:PORT nor [v6]:PORT.
    Checks: kilnd does not start: it exits non-zero, naming --allow-registry (a kilnd that
    answers /v1/health took the value and fails the test at once)."""
    port = free_port()
    log = tmp_path / "kilnd.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(BIN_DIR / "kilnd"), "--listen", f"127.0.0.1:{port}", "--state-dir",
                                 str(tmp_path / "state"), "--image-dir", str(IMAGE_DIR),
                                 "--allow-registry", value],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    probe = Client(f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + 60
    started = False
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if probe.health(timeout=1).status == 200:
                    started = True
                    break
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    text = log.read_text(errors="replace")
    assert not started, f"kilnd started with --allow-registry {value!r}"
    assert proc.returncode not in (None, 0), f"--allow-registry {value!r}: exit {proc.returncode}: {text[-800:]}"
    assert "--allow-registry" in text, f"--allow-registry {value!r}: the message does not name the flag: {text[-800:]}"


@pytest.fixture(scope="module")
def registries():
    root = Path(tempfile.mkdtemp(prefix="kiln-reach-registry-"))
    try:
        with Registry(root / "allowed") as allowed, Registry(root / "other") as other:
            yield allowed, other
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _push(reg, name):
    gz, diff = layer({"hello": f"from {name}\n".encode()})
    return reg.push_raw(name, "1", image_config([diff]), [gz])


def _asked(reg, name):
    return (reg.root / "registry.log").read_text(errors="replace").count(f"/v2/{name}/")


def test_allow_registry_with_a_port_matches_that_port_only(registries, tmp_path):
    """Item 9: `--allow-registry 127.0.0.1:PORT` (with `[::1]:PORT`, a v6 spelling that must
    be taken) lets kilnd pull from the loopback registry on PORT, and not from another
    loopback registry on OTHERPORT: that pull fails naming loopback, and the other registry
    never hears of it."""
    allowed, other = registries
    d = start_kilnd(tmp_path / "state", "--allow-registry", allowed.host, "--allow-registry",
                    f"[::1]:{allowed.port}", loopback_registries=False)
    try:
        admin = Client(d.url, key=d.admin_key)
        ref = _push(allowed, "portok")
        image, lines = build(admin, image=ref, name="portok")
        assert image["state"] == "ready", (image, [x.get("text") for x in lines[-10:]])
        ref = _push(other, "portno")
        before = _asked(other, "portno")
        image, _ = build(admin, image=ref, name="portno")
        assert image["state"] == "failed", image
        assert "loopback" in image["error"]["message"], image["error"]
        assert _asked(other, "portno") == before, "kilnd reached a registry on a port it was not allowed"
    finally:
        stop_kilnd(d)


def test_allow_registry_without_a_port_matches_any_port(api, registries):
    """Item 9, the other side: `--allow-registry 127.0.0.1` (the session kilnd's) still
    matches that host on any port: a pull from the registry on a port of its own works."""
    _, other = registries
    ref = _push(other, "anyport")
    image, lines = build(api, image=ref, name="anyport")
    assert image["state"] == "ready", (image, [x.get("text") for x in lines[-10:]])
