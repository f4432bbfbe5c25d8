"""Unit tests of `runtime.images` (sdk/python/kiln/images.py) against the fake server of
test_fake_server.py, plus the build-context packing every client must agree on."""
import gzip
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

import kiln
from kiln import images as kimages
from test_fake_server import FakeServer, err_body, rt, server  # noqa: F401 -- fixtures

IID = "0b0e6a7e-1c5a-4c39-9a43-2f1d8e0c9a11"


def info(state="queued", **extra):
    base = {"id": IID, "kind": "image", "name": "web", "version": 1, "tags": [], "labels": {},
            "state": state, "source": "dockerfile", "error": None}
    base.update(extra)
    return base


# The tree every client's packing test builds; all three must answer GOLDEN_DIGEST for it
# (the same constant is in sdk/js/test/unit/images.test.mjs and tests/unit/cli/image_test.cc).
GOLDEN_DIGEST = "sha256:503240a6176a064c996f3ac1b1bcbcf8e935eabd5a831e008af9220ff3b6c68d"


def make_tree(root):
    def put(rel, data, mode=0o644):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)

    put("Dockerfile", b"FROM base\nCOPY . /app\n")
    put(".dockerignore", b"# comment\n*.log\nbuild/\n!keep.log\nsecret*\n**/tmp\n")
    put("app.py", b"print(1)\n", 0o755)
    put("a.log", b"x")
    put("keep.log", b"k")
    put("build/out.bin", b"out")
    put("src/main.c", b"int main(){}\n")
    put("src/tmp/x", b"x")
    put("secret.txt", b"s")
    put("big.bin", bytes(i % 251 for i in range(70000)), 0o600)
    put("src/deep/" + "d" * 60 + "/" + "e" * 60 + ".txt", b"long")
    os.symlink("app.py", os.path.join(root, "link"))
    for d in ("build", "src", "src/tmp", "src/deep", "src/deep/" + "d" * 60):
        os.chmod(os.path.join(root, d), 0o755)
    os.chmod(root, 0o755)


# --- packing ------------------------------------------------------------------------


def test_pack_context_layout_and_golden_digest(tmp_path):
    make_tree(str(tmp_path))
    blob, digest = kimages.pack_context(str(tmp_path))
    assert digest == "sha256:" + hashlib.sha256(blob).hexdigest()
    assert blob[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"  # mtime 0, no name
    raw = gzip.decompress(blob)
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tf:
        members = tf.getmembers()
    names = [m.name for m in members]
    assert names == [".dockerignore", "Dockerfile", "app.py", "big.bin", "keep.log", "link", "src",
                     "src/deep", "src/deep/" + "d" * 60, "src/deep/" + "d" * 60 + "/" + "e" * 60 + ".txt",
                     "src/main.c"]
    by = {m.name: m for m in members}
    assert by["app.py"].mode == 0o755 and by["big.bin"].mode == 0o600 and by["src"].isdir()
    assert by["link"].issym() and by["link"].linkname == "app.py"
    assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 and m.uname == "" for m in members)
    assert by["big.bin"].size == 70000
    assert digest == GOLDEN_DIGEST


def test_pack_is_stable_and_content_sensitive(tmp_path):
    make_tree(str(tmp_path))
    _, d1 = kimages.pack_context(str(tmp_path))
    _, d2 = kimages.pack_context(str(tmp_path))
    assert d1 == d2
    with open(tmp_path / "a.log", "wb") as f:  # ignored: no change
        f.write(b"changed")
    assert kimages.pack_context(str(tmp_path))[1] == d1
    os.chmod(tmp_path / "app.py", 0o700)  # mode is part of the archive
    assert kimages.pack_context(str(tmp_path))[1] != d1


def test_dockerignore_rules():
    """The cases kilnd's matcher and the TypeScript SDK's pass too (one table)."""
    table = Path(__file__).resolve().parents[3] / "tests" / "data" / "dockerignore_cases.json"
    cases = json.loads(table.read_text())["cases"]
    assert len(cases) >= 30
    for c in cases:
        assert kimages.DockerIgnore(c["patterns"]).excluded(c["path"]) == c["excluded"], c


def test_dockerignore_dockerfile_always_kept(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    (tmp_path / ".dockerignore").write_text("*\n")
    (tmp_path / "other").write_text("o")
    blob, _ = kimages.pack_context(str(tmp_path))
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob))) as tf:
        assert tf.getnames() == [".dockerignore", "Dockerfile"]


def test_pack_errors_name_the_path(tmp_path):
    with pytest.raises(ValueError, match="not a directory"):
        kimages.pack_context(str(tmp_path / "nope"))
    os.symlink("t" * 101, tmp_path / "far")
    with pytest.raises(ValueError, match="far"):
        kimages.pack_context(str(tmp_path))


# --- build ---------------------------------------------------------------------------


def test_build_dockerfile_with_context_uploads_when_missing(server, rt, tmp_path):
    make_tree(str(tmp_path))
    blob, digest = kimages.pack_context(str(tmp_path))
    server.answer(200, {"missing": [digest]})
    server.answer(200, {"digest": digest, "sizeBytes": len(blob)})
    server.answer(202, info())
    server.answer(200, {"lines": [{"n": 1, "time": "t", "stream": "system", "step": 1, "text": "step 1/2"}],
                        "nextAfter": 1, "state": "building", "truncated": False, "done": False})
    server.answer(200, {"lines": [{"n": 2, "time": "t", "stream": "stdout", "step": 2, "text": "ok"}],
                        "nextAfter": 2, "state": "ready", "truncated": False, "done": True})
    server.answer(200, info("ready", digest="sha256:ab"))
    seen = []
    img = rt.images.build("web", context_dir=str(tmp_path), tags=["v1"], build_args={"A": "1"},
                          build={"memory_mib": 2048, "max_image_mib": 4096, "vcpu": 2},
                          start={"command": "serve", "ready_port": 8000, "env": {"MY_VAR": "1"}},
                          network={"allow": ["pypi.org"]}, cache=False, on_log=seen.append)
    assert isinstance(img, kiln.Image) and img.state == "ready" and img.id == IID
    assert [ln["text"] for ln in seen] == ["step 1/2", "ok"]
    reqs = server.requests
    assert (reqs[0]["method"], reqs[0]["path"]) == ("POST", "/v1/images/context/missing")
    assert reqs[0]["body"] == {"digests": [digest]}
    assert (reqs[1]["method"], reqs[1]["path"]) == ("PUT", f"/v1/images/context/{digest}")
    assert reqs[1]["headers"]["content-type"] == "application/gzip" and reqs[1]["body"] == blob
    assert (reqs[2]["method"], reqs[2]["path"]) == ("POST", "/v1/images")
    assert "idempotency-key" in reqs[2]["headers"]
    assert reqs[2]["body"] == {
        "name": "web", "dockerfile": "FROM base\nCOPY . /app\n", "context": digest, "buildArgs": {"A": "1"},
        "tags": ["v1"], "build": {"memoryMiB": 2048, "maxImageMiB": 4096, "vcpu": 2},
        "network": {"allow": ["pypi.org"]}, "start": {"command": "serve", "readyPort": 8000, "env": {"MY_VAR": "1"}},
        "cache": False}
    assert reqs[3]["path"] == f"/v1/images/{IID}/logs"
    assert reqs[3]["query"] == {"after": ["0"], "follow": ["true"]}
    assert reqs[4]["query"] == {"after": ["1"], "follow": ["true"]}
    assert (reqs[5]["method"], reqs[5]["path"]) == ("GET", f"/v1/images/{IID}")


def test_build_skips_upload_when_daemon_has_context(server, rt, tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    server.answer(200, {"missing": []})
    server.answer(202, info())
    img = rt.images.build("web", context_dir=str(tmp_path), wait=False)
    assert img.state == "queued"
    assert [r["path"] for r in server.requests] == ["/v1/images/context/missing", "/v1/images"]


def test_build_recipe_and_image_bodies(server, rt):
    server.answer(202, info(source="recipe"))
    rt.images.build("data", recipe={"base": "python:3.12", "pip": ["pandas"], "apt": ["git"]}, wait=False)
    assert server.requests[0]["body"] == {"name": "data", "recipe": {"base": "python:3.12", "pip": ["pandas"],
                                                                     "apt": ["git"]}}
    server.answer(202, info(source="image"))
    rt.images.build(image="python:3.12-slim", wait=False)
    assert server.requests[1]["body"] == {"image": "python:3.12-slim"}


def test_build_failure_raises_image_build_error(server, rt):
    failed = info("failed", error={"code": "build_step_failed", "message": "exit 2", "step": 3, "line": 7,
                                   "instruction": "RUN make", "exitCode": 2, "logTail": ["make: *** x"]})
    server.answer(202, info())
    server.answer(200, {"lines": [], "nextAfter": 0, "state": "failed", "truncated": False, "done": True})
    server.answer(200, failed)
    with pytest.raises(kiln.ImageBuildError) as ei:
        rt.images.build("web", dockerfile="FROM x\nRUN make\n")
    e = ei.value
    assert isinstance(e, kiln.KilnError)
    assert e.code == "build_step_failed" and e.step == 3 and e.line == 7 and e.exit_code == 2
    assert e.instruction == "RUN make" and e.log_tail == ["make: *** x"] and e.image["state"] == "failed"
    assert "step 3" in str(e) and "line 7" in str(e)


def test_build_argument_errors_send_nothing(server, rt, tmp_path):
    with pytest.raises(ValueError, match="exactly one"):
        rt.images.build("x")
    with pytest.raises(ValueError, match="exactly one"):
        rt.images.build("x", recipe={}, image="y")
    with pytest.raises(ValueError, match="name="):
        rt.images.build(recipe={"base": "b"})
    with pytest.raises(ValueError, match="no Dockerfile"):
        rt.images.build("x", context_dir=str(tmp_path))
    with pytest.raises(ValueError, match="dockerfile build"):
        rt.images.build("x", recipe={}, target="t")
    assert server.requests == []


def test_build_api_error_maps_to_sdk_error(server, rt):
    server.answer(422, err_body("invalid_image", 422, "bad recipe", details={"field": "recipe.base"}))
    with pytest.raises(kiln.InvalidRequestError) as ei:
        rt.images.build("x", recipe={"base": ""}, wait=False)
    assert ei.value.code == "invalid_image" and ei.value.details == {"field": "recipe.base"}


def test_build_timeout(server, rt):
    server.answer(202, info())
    with pytest.raises(kiln.TimeoutError):
        rt.images.build("web", dockerfile="FROM x\n", timeout=0)


# --- the other calls ------------------------------------------------------------------


def test_get_by_id_or_ref(server, rt):
    server.answer(200, info("ready"))
    server.answer(200, info("ready"))
    assert rt.images.get(IID).id == IID
    assert rt.image.get("web:v1").name == "web"
    assert server.requests[0]["path"] == f"/v1/images/{IID}"
    assert server.requests[1]["path"] == "/v1/images/resolve" and server.requests[1]["query"] == {"ref": ["web:v1"]}


def test_list_walks_pages_and_versions(server, rt):
    server.answer(200, {"data": [info(version=2)], "nextCursor": "c1"})
    server.answer(200, {"data": [info(version=1)], "nextCursor": None})
    page = rt.images.list(name="web", state="ready")
    assert [i.version for i in page] == [2, 1] and not page.has_more
    assert server.requests[0]["query"] == {"name": ["web"], "state": ["ready"], "limit": ["100"]}
    assert server.requests[1]["query"]["cursor"] == ["c1"]
    server.answer(200, {"data": [info(version=3)], "nextCursor": None})
    assert [i.version for i in rt.images.versions("web")] == [3]


def test_tag_untag_delete_pool_resolve_refs_first(server, rt):
    server.answer(200, info(tags=["v1"]))
    assert rt.images.tag(IID, "v1").tags == ["v1"]
    server.answer(200, info("ready"))  # resolve
    server.answer(200, info())
    rt.images.untag("web@1", "v1")
    server.answer(200, info("deleted"))
    assert rt.images.delete(IID).state == "deleted"
    server.answer(200, {"size": 2, "ready": 0})
    assert rt.images.pool(IID, 2) == {"size": 2, "ready": 0}
    calls = [(r["method"], r["path"], r["body"]) for r in server.requests]
    assert calls == [("POST", f"/v1/images/{IID}:tag", {"tag": "v1"}),
                     ("GET", "/v1/images/resolve", None),
                     ("POST", f"/v1/images/{IID}:untag", {"tag": "v1"}),
                     ("POST", f"/v1/images/{IID}:delete", {}),
                     ("POST", f"/v1/images/{IID}:pool", {"size": 2})]


def test_unknown_ref_is_not_found(server, rt):
    server.answer(404, err_body("image_not_found", 404, "no image web:nope"))
    with pytest.raises(kiln.NotFoundError) as ei:
        rt.images.delete("web:nope")
    assert ei.value.code == "image_not_found"
    assert len(server.requests) == 1


def test_prune_logs_registries(server, rt):
    server.answer(200, {"layersRemoved": 3, "cacheEntriesRemoved": 1, "bytesFreed": 10})
    assert rt.images.prune()["layersRemoved"] == 3
    server.answer(200, {"lines": [], "nextAfter": 5, "state": "ready", "truncated": True, "done": True})
    assert rt.images.logs(IID, after=5)["truncated"] is True
    assert server.requests[1]["query"] == {"after": ["5"]}
    server.answer(200, {"registry": "ghcr.io", "username": "u", "createdAt": "t"})
    rt.images.registries.set("ghcr.io", username="u", password="p")
    server.answer(200, {"data": [{"registry": "ghcr.io", "username": "u", "createdAt": "t"}]})
    assert rt.images.registries.list()[0]["registry"] == "ghcr.io"
    server.answer(200, {"registry": "ghcr.io", "deleted": True})
    assert rt.images.registries.delete("ghcr.io")["deleted"] is True
    calls = [(r["method"], r["path"], r["body"]) for r in server.requests[2:]]
    assert calls == [("POST", "/v1/images/registries", {"registry": "ghcr.io", "username": "u", "password": "p"}),
                     ("GET", "/v1/images/registries", None),
                     ("POST", "/v1/images/registries:delete", {"registry": "ghcr.io"})]


def test_follow_logs_returns_final_state(server, rt):
    server.answer(200, {"lines": [{"n": 4, "text": "a"}], "nextAfter": 4, "state": "building", "done": False})
    server.answer(200, {"lines": [], "nextAfter": 4, "state": "failed", "done": True})
    got = []
    assert rt.images.follow_logs(IID, got.append, after=3) == "failed"
    assert got == [{"n": 4, "text": "a"}]
    assert [r["query"]["after"] for r in server.requests] == [["3"], ["4"]]


def test_sandbox_create_with_image_keeps_start(server, rt):
    server.answer(200, {"id": "sbx_1", "state": "running", "start": {"state": "ready", "processId": "p1",
                                                                    "readyMs": 120}})
    sbx = rt.sandboxes.create(image="web:v1")
    assert server.requests[0]["body"] == {"image": "web:v1"}
    assert sbx.start == {"state": "ready", "processId": "p1", "readyMs": 120}
    server.answer(200, {"id": "sbx_1", "state": "running"})
    sbx.refresh()
    assert sbx.start["state"] == "ready"  # later reads lack it; the object keeps it


def test_async_images(server):
    import asyncio

    async def go():
        async with kiln.AsyncRuntime(server.url, "test-key-123", timeout=5) as art:
            server.answer(200, info("ready"))
            img = await art.images.get(IID)
            server.answer(200, {"data": []})
            regs = await art.image.registries.list()
            return img, regs

    img, regs = asyncio.run(go())
    assert img.id == IID and regs == []
