"""Images against a real kilnd and a real local registry (docker-registry),
with images made here by umoci and pushed by skopeo: pulls, Dockerfile and
recipe builds whose RUN steps run in kiln sandboxes, the step cache, warm
starts, any image's USER/WORKDIR/ENV, ownership, and the failures."""
import gzip
import hashlib
import io
import os
import signal
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import pytest

from client import Client, assert_error
from lib.kilnd import OwnKilnds
from lib.net import free_port
from oci import Registry, basic_auth, build_image, busybox_rootfs, htpasswd_line, static_musl_binary

BUILD_WAIT = 600


def wait_image(api, image_id, within=BUILD_WAIT):
    """Follows the build log until the image is done; returns (image, lines)."""
    lines, after = [], 0
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        page = api.ok("GET", f"/v1/images/{image_id}/logs", query={"after": after, "follow": "true"})
        lines += page["lines"]
        after = page["nextAfter"]
        if page["done"]:
            return api.ok("GET", f"/v1/images/{image_id}"), lines
    raise AssertionError(f"image {image_id} not done within {within} s: {lines[-20:]}")


def build(api, **body):
    image = api.ok("POST", "/v1/images", json=body)
    assert image["state"] == "queued", image
    return wait_image(api, image["id"])


def context_tar(files):
    """A gzip'd tar of {path: bytes or (bytes, mode)}; returns (digest, bytes)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as t:
        for name, content in sorted(files.items()):
            data, mode = content if isinstance(content, tuple) else (content, 0o644)
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            t.addfile(info, io.BytesIO(data))
    blob = gzip.compress(raw.getvalue(), mtime=0)
    return "sha256:" + hashlib.sha256(blob).hexdigest(), blob


def upload_context(api, files):
    digest, blob = context_tar(files)
    missing = api.ok("POST", "/v1/images/context/missing", json={"digests": [digest]})["missing"]
    if missing:
        api.ok("PUT", f"/v1/images/context/{digest}", data=blob, headers={"Content-Type": "application/gzip"})
    return digest


@pytest.fixture(scope="module")
def registry():
    root = Path(tempfile.mkdtemp(prefix="kiln-registry-"))
    with Registry(root / "registry") as reg:
        bb = busybox_rootfs(root / "busybox")
        reg.busybox = reg.push(build_image(root / "layout", [bb], config=[
            "--config.env", "GREETING=hello from the image", "--config.workingdir", "/home/app",
            "--config.user", "app"], tag="bb"), "busybox:1")
        hello = root / "hello-root"
        (hello).mkdir()
        static_musl_binary(hello / "hello", '#include <stdio.h>\nint main(int c, char** v) {'
                           ' printf("hello from musl, %d args\\n", c - 1); return 0; }\n')
        (hello / "hello.c").unlink()
        reg.shellless = reg.push(build_image(root / "layout", [hello], tag="hello"), "hello:1")
        reg.root = root
        yield reg


@pytest.fixture(scope="module")
def pulled(api, registry):
    image, lines = build(api, image=registry.busybox, name="busybox")
    assert image["state"] == "ready", (image, lines[-20:])
    return image


def test_a_pulled_image_runs_with_its_user_workdir_and_env(api, sandboxes, pulled, registry):
    assert pulled["source"] == "image" and pulled["ref"] == registry.busybox
    assert pulled["config"]["user"] == "app" and pulled["config"]["workdir"] == "/home/app"
    assert pulled["version"] >= 1 and "latest" in pulled["tags"] and pulled["digest"].startswith("sha256:")
    s = sandboxes.create(image="busybox", env={"EXTRA": "from create"})
    assert s["image"] == pulled["id"]
    r = api.exec(s["id"], command='echo "$GREETING|$EXTRA|$(id -u):$(id -g)|$(pwd)|$HOME"')
    assert r["exitCode"] == 0, r
    assert r["stdout"] == "hello from the image|from create|1234:1234|/home/app|/home/app\n"
    # sudo is kiln's shim, added at start: root inside, in an image without sudo.
    assert api.sh(s["id"], "sudo id -u") == "0\n"
    # Files belong to the image's user.
    api.write_file(s["id"], "/home/app/note.txt", b"x")
    assert api.stat(s["id"], "/home/app/note.txt")["uid"] == 1234 if "uid" in api.stat(s["id"], "/home/app/note.txt") else True


def test_a_shellless_musl_image_runs_argv_and_says_why_command_fails(api, sandboxes, registry):
    image, lines = build(api, image=registry.shellless)
    assert image["state"] == "ready", lines[-10:]
    assert image["name"] == "hello"
    s = sandboxes.create(image=image["id"])
    r = api.exec(s["id"], argv=["/hello", "a", "b"])
    assert (r["exitCode"], r["stdout"]) == (0, "hello from musl, 2 args\n"), r
    bad = api.post(f"/v1/sandboxes/{s['id']}:exec", json={"command": "echo hi"})
    assert bad.status in (400, 200), bad
    text = bad.body.decode()
    assert "no shell" in text and "argv" in text, text


def test_dockerfile_build_runs_steps_in_sandboxes_and_caches_them(api, sandboxes, pulled):
    dockerfile = (
        "FROM busybox\n"
        "ARG FLAVOUR=plain\n"
        "ENV APP_HOME=/srv/app\n"
        "WORKDIR $APP_HOME\n"
        "USER root\n"
        "COPY --chown=app:app app.sh ./\n"
        "RUN echo \"built $FLAVOUR by $(id -u)\" > built.txt && chmod 0755 app.sh && rm -f /bin/wc\n"
        "USER app\n"
        "LABEL org.kiln.test=yes\n"
        "EXPOSE 8080\n"
        'CMD ["sleep", "1000"]\n')
    ctx = upload_context(api, {"app.sh": (b"#!/bin/sh\necho app says $1\n", 0o644), "junk.log": b"ignored"})
    body = dict(name="web", dockerfile=dockerfile, context=ctx, buildArgs={"FLAVOUR": "spicy"},
                dockerignore="*.log\n", tags=["v1"])
    t0 = time.monotonic()
    image, lines = build(api, **body)
    cold = time.monotonic() - t0
    assert image["state"] == "ready", (image, [l["text"] for l in lines[-30:]])
    assert image["stepsTotal"] == 11 and image["stepsCached"] < image["stepsTotal"]
    assert set(image["tags"]) == {"v1"}
    assert image["config"]["labels"]["org.kiln.test"] == "yes" and image["config"]["exposedPorts"] == ["8080/tcp"]
    assert image["start"]["argv"] == ["sleep", "1000"]  # CMD of the Dockerfile
    texts = [l["text"] for l in lines]
    assert any("[7/11] RUN" in t for t in texts), texts
    s = sandboxes.create(image="web:v1")
    assert api.sh(s["id"], "cat built.txt; ./app.sh hi; ls /srv/app; id -u; test -e /bin/wc || echo no-wc") == \
        "built spicy by 0\napp says hi\napp.sh\nbuilt.txt\n1234\nno-wc\n"
    # Unchanged: every step from the cache, in about a second.
    t0 = time.monotonic()
    again, _ = build(api, **body)
    cached = time.monotonic() - t0
    assert again["state"] == "ready" and again["stepsRun"] == 0 and again["stepsCached"] > 0, again
    assert again["version"] == image["version"] + 1
    assert cached < max(5.0, cold / 2), (cached, cold)
    # A changed file rebuilds from its COPY on.
    ctx2 = upload_context(api, {"app.sh": (b"#!/bin/sh\necho app v2 says $1\n", 0o644)})
    changed, _ = build(api, **{**body, "context": ctx2})
    assert changed["state"] == "ready" and changed["stepsRun"] == 2 and changed["stepsCached"] > 0, changed
    s2 = sandboxes.create(image=changed["id"])
    assert api.sh(s2["id"], "./app.sh x") == "app v2 says x\n"


def test_a_followed_log_streams_as_ndjson_when_asked(api):
    """The reference client's follow_logs asks for NDJSON: a line event per log line as
    it is written (with its seq, to resume after), then done with the image."""
    image = api.ok("POST", "/v1/images", json={
        "dockerfile": "FROM base\nRUN for i in 1 2 3; do echo tick $i; sleep 1; done\n"})
    got = api.stream("GET", f"/v1/images/{image['id']}/logs", query={"after": 0, "follow": "true"},
                     timeout=BUILD_WAIT)
    assert got.status == 200, got
    events = got.events
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "done" and set(kinds[:-1]) == {"line"}, kinds
    assert events[-1]["image"]["state"] == "ready" and events[-1]["image"]["id"] == image["id"]
    seqs = [e["seq"] for e in events[:-1]]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    texts = [e["text"] for e in events[:-1]]
    assert "tick 1" in texts and "tick 3" in texts, texts
    # Lines came as they were written, not all at the end.
    tick1 = next(t for t, e in got.timed_events if e.get("text") == "tick 1")
    assert got.timed_events[-1][0] - tick1 >= 1.5, got.timed_events
    # Resuming after the last line gives only the end.
    again = api.stream("GET", f"/v1/images/{image['id']}/logs", query={"after": seqs[-1], "follow": "true"})
    assert [e["type"] for e in again.events] == ["done"], again.events


def test_multi_stage_with_target(api, sandboxes, pulled):
    dockerfile = ("FROM busybox AS builder\nUSER root\nRUN mkdir -p /out && echo artifact > /out/a.txt\n"
                  "FROM busybox AS unused\nRUN exit 3\n"
                  "FROM busybox AS final\nCOPY --from=builder /out/a.txt /opt/a.txt\n"
                  "FROM final AS extra\nRUN exit 4\n")
    image, lines = build(api, name="multi", dockerfile=dockerfile, target="final")
    assert image["state"] == "ready", [l["text"] for l in lines[-20:]]
    s = sandboxes.create(image="multi")
    assert api.sh(s["id"], "cat /opt/a.txt") == "artifact\n"


def test_a_failing_run_reports_step_exit_code_and_log_tail(api, pulled):
    image, _ = build(api, name="broken", dockerfile="FROM busybox\nRUN echo first-line\n"
                                                     "RUN echo about to fail >&2; exit 7\nRUN echo never\n")
    assert image["state"] == "failed"
    err = image["error"]
    assert err["code"] == "step_failed" and err["exitCode"] == 7 and err["step"] == 3 and err["line"] == 3, err
    assert any("about to fail" in l for l in err["logTail"]), err
    assert_error(api.post("/v1/sandboxes", json={"image": image["id"]}), 400, "invalid_request", ["failed"])


def test_bad_dockerfiles_and_bases_are_refused_with_the_line(api):
    for text, line, word in (("FROM base\nRUN --mount=type=secret,id=x cat /run/secrets/x\n", 2, "secret"),
                             ("FROM base\nONBUILD RUN echo\n", 2, "ONBUILD"),
                             ("FROM base\n\nADD https://example.com/x /x\n", 3, "URL"),
                             ("FROM base\nNOSUCH thing\n", 2, "NOSUCH"),
                             ("RUN echo before from\n", 1, "FROM")):
        err = assert_error(api.post("/v1/images", json={"name": "bad", "dockerfile": text}), 400, "invalid_request")
        assert f"line {line}" in err["message"] and word.lower() in err["message"].lower(), (text, err)
    err = assert_error(api.post("/v1/images", json={"name": "bad", "dockerfile": "FROM nosuchimage\n"}),
                       404, "image_not_found")
    assert "nosuchimage" in err["message"] and "line 1" in err["message"]
    assert_error(api.post("/v1/images", json={"name": "bad", "recipe": {"base": "nosuch"}}), 404, "image_not_found")
    assert_error(api.post("/v1/images", json={"name": "bad", "recipe": {}, "image": "x/y"}), 400, "invalid_request",
                 issue_path="body.recipe")
    assert_error(api.post("/v1/sandboxes", json={"image": "nosuch"}), 404, "image_not_found")
    # An OCI reference is parsed once, where the request comes in, and refused by name.
    for ref in ("Upper/case", "a//b", "x:" + "t" * 200, "x@sha256:beef"):
        assert_error(api.post("/v1/images", json={"image": ref}), 400, "invalid_request", issue_path="body.image")
    assert_error(api.post("/v1/sandboxes", json={"image": "base", "snapshot": "x"}), 400, "invalid_request",
                 issue_path="body.image")
    big = "FROM base\n" + "# padding\n" * 30000
    assert_error(api.post("/v1/images", json={"name": "big", "dockerfile": big}), 413, "payload_too_large")


def test_context_limits_answer_413(api):
    files = {f"f{i}": b"" for i in range(20001)}
    digest, blob = context_tar(files)
    r = api.request("PUT", f"/v1/images/context/{digest}", data=blob, headers={"Content-Type": "application/gzip"})
    assert_error(r, 413, "payload_too_large", ["files"])
    wrong = "sha256:" + "0" * 64
    assert_error(api.request("PUT", f"/v1/images/context/{wrong}", data=b"abc"), 400, "invalid_request", ["sha256"])


def test_pull_failures_are_clear_and_quick(api, registry, tmp_path):
    port = free_port()  # nothing listens on it
    t0 = time.monotonic()
    image, _ = build(api, image=f"127.0.0.1:{port}/nothing:1", name="unreachable")
    assert image["state"] == "failed" and image["error"]["code"] == "registry_error", image
    assert time.monotonic() - t0 < 60
    assert "127.0.0.1" in image["error"]["message"]
    image, _ = build(api, image=f"{registry.host}/no-such-repo:1", name="missing")
    assert image["state"] == "failed" and image["error"]["code"] == "registry_error", image


def test_registry_credentials_are_used_and_a_bad_one_is_named(api, registry, tmp_path):
    with Registry(tmp_path / "auth-reg", htpasswd=htpasswd_line("alice", "s3cret")) as reg:
        ref = reg.push(f"{registry.root / 'layout'}:bb", "private/bb:1", creds="alice:s3cret")
        image, _ = build(api, image=ref, name="private")
        assert image["state"] == "failed" and "unauthorized" in image["error"]["message"].lower(), image
        api.ok("POST", "/v1/images/registries", json={"registry": reg.host, "username": "alice", "password": "wrong"})
        image, _ = build(api, image=ref, name="private")
        assert image["state"] == "failed" and "unauthorized" in image["error"]["message"].lower(), image
        saved = api.ok("POST", "/v1/images/registries", json={"registry": reg.host, "username": "alice",
                                                               "password": "s3cret"})
        assert saved == {"registry": reg.host, "username": "alice", "createdAt": saved["createdAt"]}
        listed = api.ok("GET", "/v1/images/registries")["data"]
        assert [c["registry"] for c in listed] == [reg.host] and "password" not in listed[0]
        image, _ = build(api, image=ref, name="private")
        assert image["state"] == "ready", image
        assert api.ok("POST", "/v1/images/registries:delete", json={"registry": reg.host})["deleted"] is True


def test_a_corrupted_layer_is_refused(api, tmp_path):
    with Registry(tmp_path / "reg") as reg:
        root = busybox_rootfs(tmp_path / "r")
        ref = reg.push(build_image(tmp_path / "layout", [root], tag="c"), "corrupt:1")
        big = max(reg.blob_paths(), key=lambda p: p.stat().st_size)
        data = bytearray(big.read_bytes())
        data[len(data) // 2] ^= 0xFF
        big.write_bytes(bytes(data))
        image, _ = build(api, image=ref, name="corrupt")
        assert image["state"] == "failed", image
        msg = image["error"]["message"].lower()
        assert "digest" in msg or "sha256" in msg or "checksum" in msg, image


def test_images_belong_to_their_key(api, pulled):
    k = api.ok("POST", "/v1/keys", json={"name": "images-other"})
    other = Client(api.base_url, key=k["secret"])
    assert_error(other.get(f"/v1/images/{pulled['id']}"), 404, "image_not_found")
    assert_error(other.post("/v1/sandboxes", json={"image": "busybox"}), 404, "image_not_found")
    assert all(i["id"] != pulled["id"] for i in other.ok("GET", "/v1/images")["data"])
    # The built-in image is everyone's, under both names.
    for ref in ("base", "runtime"):
        base = other.ok("GET", "/v1/images/resolve", query={"ref": ref})
        assert base["source"] == "builtin" and base["name"] == "base" and base["state"] == "ready"
    api.ok("POST", f"/v1/keys/{k['id']}:revoke", json={})


def test_tags_versions_resolve_and_delete(api, sandboxes, pulled, registry):
    second, lines = build(api, image=registry.busybox, name="busybox", tags=["stable"])
    assert second["version"] == pulled["version"] + 1 and second["tags"] == ["stable"]
    # Its layers are stored: a second pull fetches the manifest and config only.
    assert second["stepsRun"] == 0 and any("only its manifest and config" in l["text"] for l in lines), lines
    assert second["digest"] == pulled["digest"] and second["config"] == pulled["config"]
    # "busybox" is still the first (latest moves only with a build tagged latest).
    assert api.ok("GET", "/v1/images/resolve", query={"ref": "busybox"})["id"] == pulled["id"]
    assert api.ok("GET", "/v1/images/resolve", query={"ref": f"busybox@{second['version']}"})["id"] == second["id"]
    tagged = api.ok("POST", f"/v1/images/{second['id']}:tag", json={"tag": "latest"})
    assert "latest" in tagged["tags"]
    assert api.ok("GET", "/v1/images/resolve", query={"ref": "busybox:latest"})["id"] == second["id"]
    versions = api.ok("GET", "/v1/images", query={"name": "busybox"})["data"]
    assert [v["version"] for v in versions][:2] == [second["version"], pulled["version"]]
    untagged = api.ok("POST", f"/v1/images/{second['id']}:untag", json={"tag": "stable"})
    assert "stable" not in untagged["tags"]
    # Deleting an image a sandbox runs keeps its layers until that sandbox is gone.
    s = sandboxes.create(image=second["id"])
    gone = api.ok("POST", f"/v1/images/{second['id']}:delete", json={})
    assert gone["state"] == "deleted"
    assert api.sh(s["id"], "echo still $GREETING") == "still hello from the image\n"
    assert_error(api.post("/v1/sandboxes", json={"image": f"busybox@{second['version']}"}), 404, "image_not_found")
    api.ok("POST", "/v1/images/{}:tag".format(pulled["id"]), json={"tag": "latest"})


def test_warm_start_with_a_ready_port(api, sandboxes):
    server = "import http.server as h\nh.HTTPServer(('127.0.0.1', 8000), h.SimpleHTTPRequestHandler).serve_forever()\n"
    image, lines = build(api, name="server", recipe={"files": [{"path": "/srv/server.py", "content": server}]},
                         start={"command": "cd /srv && python3 server.py", "readyPort": 8000, "readyTimeoutSeconds": 30})
    assert image["state"] == "ready", [l["text"] for l in lines[-20:]]
    assert image["warm"] is True
    s = sandboxes.create(image="server")
    assert s["start"]["state"] == "ready" and s["start"]["processId"], s
    assert "server.py" in api.sh(s["id"], "curl -s --noproxy '*' http://127.0.0.1:8000/")
    pool = api.ok("POST", f"/v1/images/{image['id']}:pool", json={"size": 1})
    assert pool["size"] == 1
    deadline = time.monotonic() + 60
    while api.ok("GET", f"/v1/images/{image['id']}")["pool"]["ready"] < 1:
        assert time.monotonic() < deadline, "the image's pool did not fill"
        time.sleep(0.5)
    pooled = sandboxes.create(image="server")
    assert pooled["start"]["state"] == "ready"
    assert "server.py" in api.sh(pooled["id"], "curl -s --noproxy '*' http://127.0.0.1:8000/")
    api.ok("POST", f"/v1/images/{image['id']}:pool", json={"size": 0})
    # Another shape boots cold and runs the start command itself.
    cold = sandboxes.create(image="server", memoryMiB=1024)
    assert cold["start"]["state"] == "ready" and cold["start"]["readyMs"] >= 0
    assert "server.py" in api.sh(cold["id"], "curl -s --noproxy '*' http://127.0.0.1:8000/")


def test_snapshot_and_fork_of_an_image_sandbox(api, sandboxes, pulled):
    s = sandboxes.create(image="busybox")
    api.sh(s["id"], "echo kept > /home/app/state")
    snap = api.ok("POST", f"/v1/sandboxes/{s['id']}:snapshot", json={})
    copy = sandboxes.create(snapshot=snap["id"])
    assert copy["image"] == pulled["id"]
    assert api.sh(copy["id"], "cat /home/app/state; id -u") == "kept\n1234\n"
    forked = api.ok("POST", f"/v1/sandboxes/{s['id']}:fork", json={"count": 2})
    for c in forked["sandboxes"]:
        sandboxes.ids.append(c["id"])
        assert api.sh(c["id"], "cat /home/app/state; echo $GREETING") == "kept\nhello from the image\n"
    api.ok("POST", f"/v1/snapshots/{snap['id']}:delete", json={})


def test_a_disk_copy_boots_as_the_images_user_and_runs_its_start_command(api, sandboxes, pulled):
    s = sandboxes.create(image="busybox")
    api.sh(s["id"], "echo on-disk > /home/app/state")
    snap = api.ok("POST", f"/v1/sandboxes/{s['id']}:snapshot", json={"mode": "disk"})
    try:
        copy = sandboxes.create(snapshot=snap["id"])
        assert copy["image"] == pulled["id"] and "start" not in copy, copy
        assert api.sh(copy["id"], "cat /home/app/state; id -u; echo $GREETING") == \
            "on-disk\n1234\nhello from the image\n"
    finally:
        api.ok("POST", f"/v1/snapshots/{snap['id']}:delete", json={})
    # An image with a start command: a disk copy boots fresh, so it runs it again.
    server = "import http.server as h\nh.HTTPServer(('127.0.0.1', 8000), h.SimpleHTTPRequestHandler).serve_forever()\n"
    image, lines = build(api, name="server", recipe={"files": [{"path": "/srv/server.py", "content": server}]},
                         start={"command": "cd /srv && python3 server.py", "readyPort": 8000, "readyTimeoutSeconds": 30})
    assert image["state"] == "ready", [l["text"] for l in lines[-20:]]
    s = sandboxes.create(image=image["id"])
    api.sh(s["id"], "echo added-later | sudo tee /srv/later.txt >/dev/null")
    snap = api.ok("POST", f"/v1/sandboxes/{s['id']}:snapshot", json={"mode": "disk"})
    try:
        copy = sandboxes.create(snapshot=snap["id"])
        assert copy["start"]["state"] == "ready" and copy["start"]["processId"], copy
        assert "later.txt" in api.sh(copy["id"], "curl -s --noproxy '*' http://127.0.0.1:8000/")
        procs = api.ok("GET", f"/v1/sandboxes/{copy['id']}/processes")["data"]
        assert [p["id"] for p in procs if p["state"] == "running"] == [copy["start"]["processId"]], procs
    finally:
        api.ok("POST", f"/v1/snapshots/{snap['id']}:delete", json={})
    # So does the wake of a files-only pause.
    api.ok("POST", f"/v1/sandboxes/{s['id']}:pause", json={"memory": False})
    api.ok("POST", f"/v1/sandboxes/{s['id']}:wake", json={})
    deadline = time.monotonic() + 30
    while "later.txt" not in api.sh(s["id"], "curl -s --noproxy '*' http://127.0.0.1:8000/ || true"):
        assert time.monotonic() < deadline, "the start command did not run again after the wake"
        time.sleep(0.5)


def test_a_build_past_its_timeout_is_stopped(api, pulled):
    t0 = time.monotonic()
    image, _ = build(api, name="slow", dockerfile="FROM busybox\nRUN sleep 600\n", build={"timeoutSeconds": 60})
    assert image["state"] == "failed" and image["error"]["code"] == "build_timeout", image
    assert time.monotonic() - t0 < 100


def test_kill_9_mid_build_leaves_a_failed_build(tmp_path, registry):
    kilnds = OwnKilnds("kiln-img-kill-")
    d = kilnds()
    try:
        api = Client(d.url, key=d.admin_key)
        image = api.ok("POST", "/v1/images", json={"name": "longbuild", "recipe": {"commands": ["sleep 300"]}})
        deadline = time.monotonic() + 120
        while api.ok("GET", f"/v1/images/{image['id']}")["state"] != "building":
            assert time.monotonic() < deadline
            time.sleep(0.2)
        time.sleep(2)
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        d = kilnds(state=d.state_dir)
        api = Client(d.url, key=d.admin_key)
        after = api.ok("GET", f"/v1/images/{image['id']}")
        assert after["state"] == "failed" and after["error"]["code"] == "build_interrupted", after
        assert api.ok("GET", "/v1/sandboxes")["data"] == []  # its step sandbox was reaped
    finally:
        kilnds.close()


def random_layer_image(tmp, tag, mib):
    root = busybox_rootfs(tmp / f"root-{tag}")
    (root / "data.bin").write_bytes(os.urandom(mib << 20))
    return build_image(tmp / "layout", [root], tag=tag)


def test_storage_quota_delete_and_prune(tmp_path):
    """A build past --image-storage-mib fails and says so; a deleted image's
    layers stay while a snapshot uses them; prune collects them after."""
    kilnds = OwnKilnds("kiln-img-quota-")
    d = kilnds("--image-storage-mib", "12")
    state = d.state_dir
    try:
        api = Client(d.url, key=d.admin_key)
        with Registry(tmp_path / "reg") as reg:
            small = reg.push(random_layer_image(tmp_path, "small", 3), "small:1")
            big = reg.push(random_layer_image(tmp_path, "big", 16), "big:1")
            image, _ = build(api, image=big)
            assert image["state"] == "failed" and image["error"]["code"] == "storage_quota_exceeded", image
            assert "--image-storage-mib" in image["error"]["message"]
            image, _ = build(api, image=small)
            assert image["state"] == "ready", image
        store = Path(state) / "image-store" / "layers"
        layers = {p.name for p in store.iterdir() if p.is_dir() and not p.is_symlink()}
        assert layers, "the ready image has its layers"
        s = api.create(image=image["id"])
        snap = api.ok("POST", f"/v1/sandboxes/{s['id']}:snapshot", json={})
        # A snapshot's size is its own capture, not the image's bytes again.
        assert snap["sizeBytes"] < image["sizeBytes"], (snap["sizeBytes"], image["sizeBytes"])
        api.delete(s["id"])
        api.ok("POST", f"/v1/images/{image['id']}:delete", json={})
        api.ok("POST", "/v1/images:prune", json={})
        assert layers <= {p.name for p in store.iterdir()}, "layers a snapshot still uses were removed"
        copy = api.create(snapshot=snap["id"])
        assert api.exec(copy["id"], argv=["/bin/sh", "-c", "wc -c < /data.bin"])["stdout"].strip() == str(3 << 20)
        api.delete(copy["id"])
        api.ok("POST", f"/v1/snapshots/{snap['id']}:delete", json={})
        pruned = api.ok("POST", "/v1/images:prune", json={})
        assert pruned["layersRemoved"] >= 1 and pruned["bytesFreed"] >= 3 << 20, pruned
        assert not layers & {p.name for p in store.iterdir()}, "unused layers survived prune"
        assert_error(Client(d.url, key=api.ok("POST", "/v1/keys", json={"name": "x"})["secret"])
                     .post("/v1/images:prune", json={}), 403, "forbidden")
    finally:
        kilnds.close()
