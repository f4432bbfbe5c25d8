"""Images through the clients against a real kilnd: the Python SDK
(runtime.images), the TypeScript SDK (sdk/js, built here with tsc and run
with node) and the CLI (`kiln image ...`). Everything builds FROM the
built-in image "base", so no registry is needed.

The three clients pack a context folder to the same bytes, so one tree has
one digest and is uploaded once, whichever client sends it: each client
here packs a fresh folder, and POST /v1/images/context/missing answers
whether the daemon has the digest the Python SDK computes for it.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "sdk" / "python"))
import kiln  # noqa: E402
from kiln import Runtime  # noqa: E402
from kiln.images import pack_context  # noqa: E402

# These modules build sdk/js (npm ci, tsc) in place: one worker runs them all.
pytestmark = pytest.mark.xdist_group("sdk_js")

JS = REPO / "sdk" / "js"
SMALL = {"vcpu": 1, "memory_mib": 512}
BUILD_TIMEOUT = 300


def _unique():
    return uuid.uuid4().hex[:12]


def make_context(root, marker, dockerfile=None):
    """A context folder: files kept, files .dockerignore leaves out, a
    re-included one, a subfolder and a symlink; `marker` makes it unique."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    files = {
        "hello.txt": f"hello {marker}\n",
        "app/run.sh": "#!/bin/sh\necho ran \"$@\"\n",
        "junk.log": "left out\n",
        "keep.log": "kept\n",
        "secret/token": "never sent\n",
        ".dockerignore": "# build context rules\n*.log\n!keep.log\nsecret/\n",
    }
    if dockerfile is not None:
        files["Dockerfile"] = dockerfile
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    os.chmod(root / "app" / "run.sh", 0o755)
    os.symlink("hello.txt", root / "link.txt")
    return root


def missing(api, digest):
    return api.ok("POST", "/v1/images/context/missing", json={"digests": [digest]})["missing"]


@pytest.fixture(scope="module")
def rt(kilnd):
    runtime = Runtime(kilnd.url, kilnd.admin_key)
    yield runtime
    runtime.close()


@pytest.fixture
def tmp(tmp_path):
    return tmp_path


@pytest.fixture
def made(rt):
    """Sandboxes made by a test (Python SDK objects), deleted after it."""
    out = []
    yield out
    for s in out:
        try:
            s.delete()
        except kiln.KilnError:
            pass


# --- Python SDK ------------------------------------------------------------------

# base's user is not root and COPY'd files belong to root, as under docker.
PY_DOCKERFILE = ("FROM base\n"
                 "USER root\n"
                 "COPY . /app\n"
                 "RUN cat /app/hello.txt > /app/copied.txt && /app/app/run.sh x > /app/ran.txt\n")


def test_python_dockerfile_build_runs_and_rebuild_is_cached_without_upload(rt, api, tmp, made):
    marker = _unique()
    ctx = make_context(tmp / "ctx", marker)
    _, digest = pack_context(str(ctx))
    assert missing(api, digest) == [digest], "a fresh context should not be on the daemon yet"
    lines = []
    name = f"clients-py-{marker}"
    image = rt.images.build(name=name, dockerfile=PY_DOCKERFILE, context_dir=str(ctx), on_log=lines.append,
                            timeout=BUILD_TIMEOUT)
    assert image.state == "ready" and image.name == name and image.version == 1, image
    texts = [line["text"] for line in lines]
    assert texts and all(isinstance(line.get("n"), int) for line in lines), lines
    assert any("RUN" in t for t in texts), texts
    assert missing(api, digest) == [], "the SDK's upload should be stored under its digest"

    sbx = rt.sandboxes.create(image=name, **SMALL)
    made.append(sbx)
    r = sbx.exec("cat /app/copied.txt /app/ran.txt; cat /app/keep.log; readlink /app/link.txt; "
                 "ls -A /app; test -e /app/junk.log || echo no-junk; test -e /app/secret || echo no-secret")
    assert r.exit_code == 0, r
    out = r.stdout.splitlines()
    assert out[:4] == [f"hello {marker}", "ran x", "kept", "hello.txt"], r.stdout
    assert out[-2:] == ["no-junk", "no-secret"], r.stdout
    assert "Dockerfile" not in out and ".dockerignore" in out, r.stdout

    # Unchanged: every step from the cache, and the context is not sent again.
    calls = []
    real = rt.images._t.request

    def spy(method, path, *a, **kw):
        calls.append((method, path))
        return real(method, path, *a, **kw)

    rt.images._t.request = spy
    try:
        again = rt.images.build(name=name, dockerfile=PY_DOCKERFILE, context_dir=str(ctx), timeout=BUILD_TIMEOUT)
    finally:
        rt.images._t.request = real
    assert again.state == "ready" and again["stepsRun"] == 0 and again.version == 2, again
    assert ("POST", "/v1/images/context/missing") in calls, calls
    assert not [c for c in calls if c[0] == "PUT"], f"an unchanged context was uploaded again: {calls}"


def test_python_recipe_versions_tags_and_start(rt, made):
    name = f"clients-rcp-{_unique()}"
    server = ("import http.server as h\n"
              "h.HTTPServer(('127.0.0.1', 8000), h.SimpleHTTPRequestHandler).serve_forever()\n")
    recipe = {"files": [{"path": "/srv/server.py", "content": server}]}
    start = {"command": "cd /srv && python3 server.py", "ready_port": 8000, "ready_timeout_seconds": 30}
    v1 = rt.images.build(name=name, recipe=recipe, start=start, tags=["first"], timeout=BUILD_TIMEOUT)
    assert v1.state == "ready" and v1.version == 1 and "first" in v1.tags, v1
    assert v1["start"]["command"] == start["command"] and v1["start"]["readyPort"] == 8000, v1["start"]
    v2 = rt.images.build(name=name, recipe=recipe, start=start, timeout=BUILD_TIMEOUT)
    assert v2.state == "ready" and v2.version == 2, v2

    assert [i.version for i in rt.images.versions(name)] == [2, 1]
    assert rt.images.resolve(name).id == v2.id
    assert rt.images.resolve(f"{name}@1").id == v1.id
    assert rt.images.get(f"{name}:first").id == v1.id
    assert rt.images.get(v1.id).version == 1
    assert any(i.id == v2.id for i in rt.images.list(name=name))

    tagged = rt.images.tag(f"{name}@2", "prod")
    assert tagged.id == v2.id and "prod" in tagged.tags, tagged
    assert rt.images.resolve(f"{name}:prod").id == v2.id
    # A tag moves: giving v1 "prod" takes it from v2.
    rt.images.tag(v1.id, "prod")
    assert rt.images.resolve(f"{name}:prod").id == v1.id
    assert "prod" not in rt.images.get(v2.id).tags
    untagged = rt.images.untag(f"{name}:prod", "prod")
    assert "prod" not in untagged.tags, untagged
    with pytest.raises(kiln.NotFoundError):
        rt.images.resolve(f"{name}:prod")

    # A sandbox from the image runs its start command and waits for the port.
    sbx = rt.sandboxes.create(image=f"{name}@2", **SMALL)
    made.append(sbx)
    assert sbx.start and sbx.start["state"] == "ready", sbx.start
    assert "server.py" in sbx.exec("curl -s --noproxy '*' http://127.0.0.1:8000/").stdout

    deleted = rt.images.delete(f"{name}@1")
    assert deleted.id == v1.id
    # A deleted version leaves the list (state=deleted still finds it, without its tags).
    assert [(i.version, i.state) for i in rt.images.versions(name)] == [(2, "ready")]
    gone = rt.images.list(name=name, state="deleted")
    assert [(i.version, i.tags) for i in gone] == [(1, [])]
    with pytest.raises(kiln.NotFoundError):
        rt.sandboxes.create(image=f"{name}@1", **SMALL)
    assert rt.images.delete(v2.id).state == "deleted"
    assert rt.images.versions(name) == []  # deleted versions are listed only with state=deleted
    assert {i.state for i in rt.images.list(name=name, state="deleted")} == {"deleted"}
    with pytest.raises(kiln.NotFoundError):
        rt.images.resolve(name)


def test_python_resolve_of_a_deleted_version_is_not_found(rt):
    name = f"clients-del-{_unique()}"
    image = rt.images.build(name=name, recipe={"files": [{"path": "/x", "content": "x"}]}, timeout=BUILD_TIMEOUT)
    rt.images.delete(image.id)
    with pytest.raises(kiln.NotFoundError):
        rt.images.resolve(f"{name}@1")


def test_python_failing_run_raises_image_build_error(rt):
    name = f"clients-bad-{_unique()}"
    lines = []
    with pytest.raises(kiln.ImageBuildError) as info:
        rt.images.build(name=name, dockerfile="FROM base\nRUN echo first-line\n"
                                              "RUN echo about to fail >&2; exit 7\nRUN echo never\n",
                        on_log=lines.append, timeout=BUILD_TIMEOUT)
    e = info.value
    assert (e.step, e.exit_code, e.line) == (3, 7, 3), (e, e.image)
    assert any("about to fail" in t for t in e.log_tail), e.log_tail
    assert "step 3" in str(e) and name in str(e), str(e)
    assert e.image["state"] == "failed"
    assert any("about to fail" in line["text"] for line in lines)
    assert not any("never" == line["text"].strip() for line in lines)


# --- TypeScript SDK ---------------------------------------------------------------

JS_SCRIPT = r"""
import { Runtime, packContext } from %(index)s;
const [dir, name] = process.argv.slice(2);
const rt = new Runtime();
const { digest } = await packContext(dir);
const lines = [];
const image = await rt.images.build({ name, contextDir: dir }, { onLog: (l) => lines.push(l.text) });
const sbx = await rt.sandboxes.create({ image: name, vcpu: 1, memoryMiB: 512 });
let out;
try {
  out = await sbx.exec("cat /ctx/hello.txt /ctx/keep.log; test -e /ctx/junk.log || echo no-junk");
} finally {
  await sbx.delete();
}
console.log(JSON.stringify({ digest, image, lines, stdout: out.stdout, exitCode: out.exitCode }));
"""


@pytest.fixture(scope="module")
def node_env(kilnd):
    node = os.environ.get("KILN_NODE") or shutil.which("node")
    if not node:
        pytest.fail("node not found (Node >= 20 on PATH or KILN_NODE; sdk/js/README.md)", pytrace=False)
    env = {k: v for k, v in os.environ.items()
           if k not in ("RUNTIME_API_URL", "RUNTIME_API_KEY", "KILN_ADMIN_KEY_FILE", "NODE_OPTIONS")}
    env["PATH"] = str(Path(node).resolve().parent) + os.pathsep + env.get("PATH", "")
    npx = shutil.which("npx", path=env["PATH"])
    if not (JS / "node_modules" / "typescript").exists():
        r = subprocess.run([shutil.which("npm", path=env["PATH"]), "ci", "--no-audit", "--no-fund"], cwd=JS,
                           env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-4000:]
    r = subprocess.run([npx, "--no-install", "tsc"], cwd=JS, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"tsc failed\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    env.update(KILN_API_URL=kilnd.url, KILN_API_KEY=kilnd.admin_key)
    return node, env


def test_typescript_sdk_builds_and_starts_from_a_context(node_env, api, tmp):
    node, env = node_env
    marker = _unique()
    ctx = make_context(tmp / "ctx", marker, dockerfile="FROM base\nCOPY . /ctx\nRUN test -s /ctx/hello.txt\n")
    _, digest = pack_context(str(ctx))
    assert missing(api, digest) == [digest]
    script = tmp / "build.mjs"
    script.write_text(JS_SCRIPT % {"index": json.dumps((JS / "dist" / "index.js").as_uri())})
    name = f"clients-js-{marker}"
    r = subprocess.run([node, str(script), str(ctx), name], env=env, capture_output=True, text=True,
                       timeout=BUILD_TIMEOUT)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["digest"] == digest, "the TypeScript SDK packs the folder to other bytes than the Python SDK"
    assert out["image"]["state"] == "ready" and out["image"]["name"] == name, out["image"]
    assert any("RUN" in t for t in out["lines"]), out["lines"]
    assert (out["exitCode"], out["stdout"]) == (0, f"hello {marker}\nkept\nno-junk\n"), out
    assert missing(api, digest) == [], "the TypeScript SDK's upload is not under the Python SDK's digest"


# --- CLI ---------------------------------------------------------------------------

CLI_DOCKERFILE = ("FROM base\n"
                  "ARG GREETING=none\n"
                  "USER root\n"
                  "COPY hello.txt /hello.txt\n"
                  "RUN echo \"greeting $GREETING\" > /greeting.txt\n")


@pytest.fixture(scope="module")
def cli(kilnd, bin_dir):
    env = {k: v for k, v in os.environ.items() if k not in ("RUNTIME_API_URL", "RUNTIME_API_KEY")}
    env.update(KILN_API_URL=kilnd.url, KILN_API_KEY=kilnd.admin_key)

    def run(*args, timeout=BUILD_TIMEOUT):
        return subprocess.run([str(bin_dir / "kiln"), *args], env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    run.env = env
    return run


def _ok(p):
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def test_cli_build_run_and_manage(cli, api, tmp):
    marker = _unique()
    name = f"clients-cli-{marker}"
    ctx = make_context(tmp / "ctx", marker, dockerfile=CLI_DOCKERFILE)
    _, digest = pack_context(str(ctx))
    assert missing(api, digest) == [digest]

    out = _ok(cli("image", "build", str(ctx), "-t", f"{name}:v1", "--build-arg", "GREETING=hi"))
    lines = out.splitlines()
    assert any("RUN" in line for line in lines[:-1]), out
    m = re.fullmatch(r"([0-9a-f-]{36}) (\S+):(\d+)", lines[-1])
    assert m and m.group(2) == name and m.group(3) == "1", lines[-1]
    image_id = m.group(1)
    assert missing(api, digest) == [], "the CLI's upload is not under the Python SDK's digest"
    info = api.ok("GET", f"/v1/images/{image_id}")
    assert info["state"] == "ready" and info["tags"] == ["v1"], info

    p = cli("sandbox", "run", "--image", f"{name}:v1", "--", "cat", "/hello.txt", "/greeting.txt")
    assert (p.returncode, p.stdout) == (0, f"hello {marker}\ngreeting hi\n"), (p.returncode, p.stdout, p.stderr)

    table = _ok(cli("image", "ls")).splitlines()
    assert table[0].split()[:5] == ["ID", "NAME", "VERSION", "TAGS", "STATE"], table
    row = [line.split() for line in table if line.startswith(image_id)]
    assert row and row[0][1:5] == [name, "1", "v1", "ready"], table
    listed = json.loads(_ok(cli("image", "ls", "--json")))
    assert image_id in [i["id"] for i in listed["data"]]

    got = json.loads(_ok(cli("image", "get", f"{name}:v1", "--json")))
    assert (got["id"], got["state"], got["version"]) == (image_id, "ready", 1), got
    text = _ok(cli("image", "get", image_id))
    assert image_id in text and name in text and "ready" in text, text

    out = _ok(cli("image", "tag", f"{name}:v1", "prod"))
    assert out.split()[0] == image_id and set(out.split()[1:]) == {"v1", "prod"}, out
    assert set(api.ok("GET", f"/v1/images/{image_id}")["tags"]) == {"v1", "prod"}
    assert api.ok("GET", "/v1/images/resolve", query={"ref": f"{name}:prod"})["id"] == image_id
    out = _ok(cli("image", "untag", image_id, "v1"))
    assert out.split() == [image_id, "prod"], out
    assert api.ok("GET", f"/v1/images/{image_id}")["tags"] == ["prod"]

    logs = _ok(cli("image", "logs", image_id))
    assert "RUN" in logs and logs.splitlines() == lines[:-1], (logs, lines)

    assert _ok(cli("image", "rm", f"{name}:prod")).strip() == image_id
    p = cli("image", "get", image_id, "--json")
    assert p.returncode != 0 or json.loads(p.stdout)["state"] == "deleted", (p.stdout, p.stderr)
    row = [line.split() for line in _ok(cli("image", "ls")).splitlines() if line.startswith(image_id)]
    assert not row or row[0][3:5] == ["-", "deleted"], row


def test_cli_failing_build_exits_one_naming_step_and_exit_code(cli, tmp):
    ctx = tmp / "bad"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM base\nRUN echo fine\nRUN echo oh no >&2; exit 5\n")
    name = f"clients-clibad-{_unique()}"
    p = cli("image", "build", str(ctx), "-t", name)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "oh no" in p.stdout, p.stdout
    err = p.stderr.strip().splitlines()[-1]
    assert "build failed at step 3" in err and "exit 5" in err and name in err, p.stderr


def test_cli_build_on_a_terminal_shows_step_progress(cli, bin_dir, tmp):
    if not shutil.which("script"):
        pytest.skip("script (util-linux) not installed")
    ctx = tmp / "slow"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM base\nRUN echo starting; sleep 3; echo slept\n")
    name = f"clients-tty-{_unique()}"
    cmd = f"{bin_dir / 'kiln'} image build {ctx} -t {name} --no-cache"
    p = subprocess.run(["script", "-qec", cmd, "/dev/null"], env={**cli.env, "TERM": "xterm"},
                       capture_output=True, text=True, timeout=BUILD_TIMEOUT, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, (p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    # The progress line ("\r| step 2/2… 1.2s"; text mode reads the "\r" as a newline).
    assert re.search(r"step 2/2\u2026 \d+\.\ds", p.stdout), repr(p.stdout[-3000:])
    assert "slept" in p.stdout and re.search(rf"[0-9a-f-]{{36}} {name}:1", p.stdout), repr(p.stdout[-3000:])
