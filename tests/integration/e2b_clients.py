"""E2B's own SDKs against kilnd's E2B front (src/api/e2b): fixtures shared
by the test_e2b_*.py modules.

`e2b_python` is a venv's python holding e2b==2.63.0 and
e2b-code-interpreter==2.11.5 from PyPI; `e2b_node` runs a script with
e2b@2.51.0 and @e2b/code-interpreter@2.8.0 from npm (tests/integration/e2b_js,
`npm ci` against its lockfile). `e2b_env` points them at kilnd:
E2B_API_URL=<kilnd>/e2b, E2B_SANDBOX_URL=<kilnd>/e2b/sandbox and a kiln key
of its own spelled e2b_<hex>. Skipped (with the reason) only when the index
is out of reach.

The Python clients are setup's /opt/kiln/e2b-venv when it holds the pinned
versions (make e2b-env), else installed once per pytest process; most
test_e2b_* modules share the xdist group "e2b" (GROUP), so one worker runs them.
"""
import json
import os
import shutil
import subprocess
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from client import Client
from lib.venvs import UNREACHABLE, setup_venv_or_fresh  # noqa: F401 (UNREACHABLE: other modules import it here)

HERE = Path(__file__).resolve().parent
PY_PACKAGES = ["e2b==2.63.0", "e2b-code-interpreter==2.11.5"]
GROUP = pytest.mark.xdist_group("e2b")
PY_PRELUDE = """
import json, sys, time
def out(v):
    print(json.dumps(v))
"""


@pytest.fixture(scope="session")
def e2b_python():
    """The python of a venv holding E2B's pinned Python SDKs (setup's, else a fresh one)."""
    with setup_venv_or_fresh("/opt/kiln/e2b-venv", PY_PACKAGES, "kiln-e2b-venv-") as d:
        yield f"{d}/bin/python"


@pytest.fixture(scope="session")
def e2b_node():
    """A directory with E2B's pinned JavaScript SDKs installed (npm ci)."""
    node = os.environ.get("KILN_NODE") or shutil.which("node")
    npm = shutil.which("npm", path=str(Path(node).parent) + os.pathsep + os.environ["PATH"]) \
        if node else None
    if not node or not npm:
        pytest.fail("node/npm not found (make setup installs them)", pytrace=False)
    d = Path(tempfile.mkdtemp(prefix="kiln-e2b-js-"))
    try:
        for f in ("package.json", "package-lock.json"):
            shutil.copy(HERE / "e2b_js" / f, d / f)
        p = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=d, capture_output=True,
                           text=True, timeout=900)
        if p.returncode != 0:
            words = p.stdout + p.stderr
            if any(u in words for u in UNREACHABLE):
                pytest.skip(f"npm cannot reach the registry for e2b: {words[-300:]}")
            pytest.fail(f"npm ci (e2b, @e2b/code-interpreter) failed:\n{words}")
        yield (node, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def e2b_key(api):
    """A kiln key of its own, and its E2B spelling."""
    secret = api.ok("POST", "/v1/keys", json={"name": "e2b-tests"})["secret"]
    assert secret.startswith("kiln_")
    return secret, "e2b_" + secret[len("kiln_"):]


@pytest.fixture(scope="module")
def e2b_env(kilnd, e2b_key):
    env = dict(os.environ, E2B_API_URL=kilnd.url + "/e2b",
               E2B_SANDBOX_URL=kilnd.url + "/e2b/sandbox", E2B_API_KEY=e2b_key[1])
    env.pop("E2B_DOMAIN", None)
    env.pop("E2B_DEBUG", None)
    return env


def e2b_http(kilnd, method, path, key=None, body=None, raw=None, headers=None):
    """(status, parsed JSON or None) of a raw call to the E2B front: `path` under /e2b, or a
    whole URL (an upload link); `body` sent as JSON, or `raw` bytes."""
    data = json.dumps(body).encode() if body is not None else raw
    h = {"Content-Type": "application/json", **(headers or {})}
    if key:
        h["X-API-Key"] = key
    url = path if path.startswith("http") else kilnd.url + "/e2b" + path
    req = urllib.request.Request(url, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            text = r.read()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        text = e.read()
        return e.code, json.loads(text) if text else None


def run_python(python, env, script, timeout=300, imports=""):
    """Runs `script` (after PY_PRELUDE and a test file's `imports`) with E2B's
    Python SDK; the JSON its last line printed."""
    code = PY_PRELUDE + textwrap.dedent(imports) + textwrap.dedent(script)
    p = subprocess.run([python, "-c", code], env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_node(e2b_node, env, script, timeout=300):
    """Runs `script` (an ES module body; `out(v)` prints JSON) with E2B's JS
    SDKs; the JSON its last line printed."""
    node, d = e2b_node
    body = "const out = (v) => console.log(JSON.stringify(v));\n" + textwrap.dedent(script)
    path = Path(d) / f"t{os.getpid()}_{abs(hash(script))}.mjs"
    path.write_text(body)
    try:
        p = subprocess.run([node, str(path)], env=env, cwd=d, capture_output=True, text=True,
                           timeout=timeout)
    finally:
        path.unlink(missing_ok=True)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def e2b_create_until_built(kilnd, key, template, within=900):
    """E2B's NewSandbox of `template`, again after the Retry-After of each 503 ("being built")
    while kilnd builds it on its first need; the 201's body."""
    deadline = time.monotonic() + within
    while True:
        status, body = e2b_http(kilnd, "POST", "/sandboxes", key=key,
                                body={"templateID": template, "timeout": 300})
        if status != 503:
            assert status == 201, (status, body)
            return body
        assert time.monotonic() < deadline, f"{template} was not built in {within} s"
        time.sleep(5)


@pytest.fixture(scope="module")
def interpreter_template(kilnd, api, e2b_key):
    """code-interpreter-v1 as kilnd builds it on the first create that needs it: once, the
    operator's, and every key's sandboxes boot it."""
    made = e2b_create_until_built(kilnd, e2b_key[1], "code-interpreter-v1")
    built = api.ok("GET", "/v1/images", query={"name": "code-interpreter-v1"})["data"]
    assert len(built) == 1 and built[0]["state"] == "ready", built
    assert built[0]["labels"].get("kiln.front-image") == "kilnd", built
    owner = Client(kilnd.url, key=e2b_key[0])
    assert owner.ok("GET", "/v1/images", query={"name": "code-interpreter-v1"})["data"] == []
    out = api.sh(made["sandboxID"], "python3 -c 'import numpy, pandas, matplotlib; "
                 "print(matplotlib.get_backend())'")
    assert out.strip() == "Agg", out  # the recipe's MPLBACKEND
    api.request("DELETE", f"/v1/sandboxes/{made['sandboxID']}")
    # Another key boots the same image at once: it is built once, for every key.
    other = api.ok("POST", "/v1/keys", json={"name": "e2b-second"})["secret"]
    again = e2b_create_until_built(kilnd, "e2b_" + other[len("kiln_"):], "code-interpreter-v1",
                                   within=60)
    api.request("DELETE", f"/v1/sandboxes/{again['sandboxID']}")
    assert len(api.ok("GET", "/v1/images", query={"name": "code-interpreter-v1"})["data"]) == 1
    return built[0]["id"]
