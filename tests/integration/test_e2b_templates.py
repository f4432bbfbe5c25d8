"""E2B's template builds (issue 44, item 1) with E2B's own SDKs (Python e2b 2.63.0, JS e2b
2.51.0) against a real kilnd: Template.build / build_in_background / get_build_status /
exists / tags, every step type, .dockerignore, file modes and symlinks in COPY, a start and
ready command, a cached rebuild that uploads nothing and runs no step, a failing step named in
E2B's numbering, another key's template not found, the upload link as a credential of its own,
and template deletion. Each build is a kiln image (GET /v1/images shows it)."""
import hashlib
import http.client
import json
import os
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from e2b_clients import (GROUP, e2b_env, e2b_http, e2b_key, e2b_node, e2b_python,  # noqa: F401
                         run_node, run_python)
from client import Client
from hub_images import hub_layout
from oci import Registry

# In the e2b group: its builds beside the other groups' at the start of a run starved
# Runtime's layer samples past their limits on 2 cores (2026-12-07).
pytestmark = GROUP


@pytest.fixture(scope="module")
def other_env(api, e2b_env):
    """E2B's environment with a second key of its own, and that key's id."""
    made = api.ok("POST", "/v1/keys", json={"name": "e2b-templates-other"})
    return dict(e2b_env, E2B_API_KEY="e2b_" + made["secret"][len("kiln_"):], KEY_ID=made["id"])


@pytest.fixture(scope="module")
def context_dir():
    """A template's files: a folder, a glob's files, modes, a symlink, and a .dockerignore
    that leaves some out."""
    d = Path(tempfile.mkdtemp(prefix="kiln-e2b-ctx-"))
    (d / "app" / "pkg").mkdir(parents=True)
    (d / "app" / "main.py").write_text("print('hello from the template')\n")
    (d / "app" / "pkg" / "mod.py").write_text("X = 42\n")
    (d / "app" / "run.sh").write_text("#!/bin/sh\necho ran\n")
    os.chmod(d / "app" / "run.sh", 0o755)
    (d / "app" / "secret.txt").write_text("private\n")
    os.chmod(d / "app" / "secret.txt", 0o600)
    os.symlink("main.py", d / "app" / "link.py")
    (d / "app" / "debug.log").write_text("ignored\n")
    (d / "app" / "cache").mkdir()
    (d / "app" / "cache" / "big.bin").write_bytes(b"\0" * 1024)
    (d / "tools").mkdir()
    for n in ("a.py", "b.py", "c.txt"):
        (d / "tools" / n).write_text(f"# {n}\n")
    (d / ".dockerignore").write_text("# not these\n**/*.log\napp/cache\n")
    yield d
    import shutil
    shutil.rmtree(d, ignore_errors=True)


def test_every_step_type_files_modes_symlinks_and_a_warm_server(e2b_python, e2b_env, context_dir,
                                                                api):
    out = run_python(e2b_python, e2b_env, f"""
        from e2b import Template, Sandbox, wait_for_url
        t = (Template(file_context_path={str(context_dir)!r})
             .from_template("base")
             .run_cmd("echo as $(whoami) in $(pwd)")
             .copy("app", "/opt/app/")
             .copy("tools/*.py", "/opt/tools/", mode=0o700)
             .copy("app/main.py", "/opt/owned.py", user="root")
             .set_envs({{"GREETING": "hi there", "MODE": "e2b"}})
             .set_workdir("/opt/app")
             .run_cmd("echo written-as-$(whoami) > /opt/marker", user="root")
             .set_user("worker")
             .run_cmd("touch /home/worker/made-by-worker")
             .set_start_cmd("python3 -m http.server 8765", wait_for_url("http://127.0.0.1:8765/")))
        logs = []
        info = Template.build(t, "steps-tpl", cpu_count=1, memory_mb=1024,
                              on_build_logs=lambda e: logs.append(str(e)))
        s = Sandbox.create("steps-tpl", timeout=300)
        me = s.commands.run("whoami; pwd")
        r = s.commands.run(
            "echo $GREETING/$MODE; cat /opt/marker; "
            "stat -c '%n %a %U' /opt/app/run.sh /opt/app/secret.txt /opt/tools/a.py "
            "/opt/owned.py /home/user /home/worker/made-by-worker; "
            "readlink /opt/app/link.py; ls /opt/app /opt/tools; "
            "python3 -c 'import urllib.request as u; print(u.urlopen(\\"http://127.0.0.1:8765\\").status)'; "
            "grep MemTotal /proc/meminfo", user="root")
        s.kill()
        out({{"info": [info.template_id, info.build_id, info.tags], "me": me.stdout,
              "stdout": r.stdout, "logs": logs}})
    """, timeout=600)
    assert out["me"].split() == ["worker", "/opt/app"], out["me"]  # the last USER, WORKDIR
    lines = out["stdout"].splitlines()
    assert lines[0] == "hi there/e2b" and lines[1] == "written-as-root", out["stdout"]
    stats = dict(line.split(" ", 1) for line in lines[2:8])
    assert stats["/opt/app/run.sh"] == "755 user", stats  # owned by the user copying (E2B's)
    assert stats["/opt/app/secret.txt"] == "600 user", stats  # modes kept
    assert stats["/opt/tools/a.py"] == "700 user", stats  # a COPY's mode
    assert stats["/opt/owned.py"] == "644 root", stats
    assert stats["/home/user"].endswith(" user"), stats  # E2B's account and home
    assert stats["/home/worker/made-by-worker"].endswith(" worker"), stats  # USER made it
    assert lines[8] == "main.py", out["stdout"]  # a symlink stays one
    listed = lines[9:]
    assert "debug.log" not in listed and "cache" not in listed, listed  # .dockerignore
    assert "main.py" in listed and "pkg" in listed and "a.py" in listed and "c.txt" not in listed
    assert "200" in listed, out["stdout"]  # the start command's server was up in the warm copy
    assert any("MemTotal:        1048576 kB" in x for x in lines), out["stdout"]
    name, build_id, tags = out["info"]
    assert (name, tags) == ("steps-tpl", ["default"]), out["info"]
    image = api.ok("GET", f"/v1/images/{build_id}")
    assert image["name"] == "steps-tpl" and image["state"] == "ready", image


def test_a_cached_rebuild_uploads_nothing_and_runs_no_step(e2b_python, e2b_env, context_dir, api):
    script = f"""
        from e2b import Template
        t = (Template(file_context_path={str(context_dir)!r}).from_template("base")
             .copy("app", "/opt/app/").run_cmd("echo once > /home/user/once"))
        logs = []
        info = Template.build(t, "cached-tpl", on_build_logs=lambda e: logs.append(e.message))
        out({{"build": info.build_id, "logs": logs}})
    """
    first = run_python(e2b_python, e2b_env, script, timeout=600)
    again = run_python(e2b_python, e2b_env, script, timeout=600)
    assert any(m.startswith("Uploaded 'app'") or "Skipping upload of 'app'" in m
               for m in first["logs"]), first["logs"]
    assert any("Skipping upload of 'app', already cached" in m for m in again["logs"]), again["logs"]
    assert not any(m.startswith("Uploaded") for m in again["logs"]), again["logs"]
    image = api.ok("GET", f"/v1/images/{again['build']}")
    assert image["stepsRun"] == 0, image  # nothing ran, nothing was copied again
    # The two RUNs (E2B's account, then the template's) and the COPY came from the cache.
    assert again["logs"].count("cached") == 3, again["logs"]
    assert again["build"] != first["build"]


def test_a_failing_step_is_named_in_e2bs_numbering(e2b_python, e2b_env):
    out = run_python(e2b_python, e2b_env, """
        from e2b import Template
        from e2b.exceptions import BuildException
        t = (Template().from_template("base")
             .run_cmd("echo fine")
             .run_cmd("echo about to fail >&2; exit 3")
             .run_cmd("echo never"))
        try:
            Template.build(t, "failing-tpl")
            out({"raised": None})
        except BuildException as e:
            info = Template.build_in_background(t, "failing-tpl")
            import time
            while True:
                st = Template.get_build_status(info, logs_offset=0)
                if st.status.value in ("ready", "error"):
                    break
                time.sleep(0.3)
            out({"raised": str(e), "status": st.status.value,
                 "reason": [st.reason.message, st.reason.step],
                 "logs": [x.message for x in st.log_entries]})
    """, timeout=600)
    assert out["raised"] and "step 2" in out["raised"] and "exit code 3" in out["raised"], out
    assert out["status"] == "error" and out["reason"][1] == "2", out
    assert "RUN echo about to fail" in out["reason"][0], out
    assert "about to fail" in out["logs"] and "never" not in out["logs"], out["logs"]


def test_background_builds_status_logs_and_tags(e2b_python, e2b_env):
    out = run_python(e2b_python, e2b_env, """
        import time
        from e2b import Template, Sandbox
        t = (Template().from_template("base").run_cmd("echo v1 > /home/user/version")
             .set_ready_cmd("test -s /home/user/version"))  # a ready check alone
        info = Template.build_in_background(t, "tagged-tpl", tags=["v1"])
        seen, offset = [], 0
        while True:
            st = Template.get_build_status(info, logs_offset=offset)
            offset += len(st.log_entries)
            seen += [x.message for x in st.log_entries]
            if st.status.value in ("ready", "error"):
                break
            time.sleep(0.2)
        Template.build(Template().from_template("base").run_cmd("echo v2 > /home/user/version"),
                       "tagged-tpl")
        tagged = Template.assign_tags("tagged-tpl:v1", ["stable"])
        tags = sorted((x.tag, x.build_id == info.build_id) for x in Template.get_tags("tagged-tpl"))
        s = Sandbox.create("tagged-tpl:stable")
        old = s.commands.run("cat /home/user/version").stdout.strip()
        s.kill()
        s = Sandbox.create("tagged-tpl")
        new = s.commands.run("cat /home/user/version").stdout.strip()
        s.kill()
        Template.remove_tags("tagged-tpl", "stable")
        out({"status": st.status.value, "logs": seen, "tags": tags, "old": old, "new": new,
             "tagged": [tagged.build_id == info.build_id, tagged.tags],
             "after": sorted(x.tag for x in Template.get_tags("tagged-tpl")),
             "exists": [Template.exists("tagged-tpl"), Template.exists("tagged-tpl-no")]})
    """, timeout=600)
    assert out["status"] == "ready", out
    assert any("echo v1" in m for m in out["logs"]), out["logs"]
    assert out["tags"] == [["default", False], ["stable", True], ["v1", True]], out["tags"]
    assert (out["old"], out["new"]) == ("v1", "v2"), out
    assert out["tagged"] == [True, ["stable"]] and out["after"] == ["default", "v1"], out
    assert out["exists"] == [True, False], out


def test_a_dockerfile_from_a_registry_image_without_useradd(e2b_python, e2b_env, tmp_path):
    """The SDK's Dockerfile reader on an image pulled by its registry name: E2B's `user` is
    made in an image with neither useradd nor adduser, and /home/user is its home."""
    with Registry(tmp_path / "reg") as reg:
        ref = reg.push(hub_layout(tmp_path / "hub"), "tiny/base:1")
        (tmp_path / "ctx").mkdir()
        (tmp_path / "ctx" / "hello.sh").write_text("echo hello from the task\n")
        (tmp_path / "ctx" / "Dockerfile").write_text(
            f"FROM {ref}\nWORKDIR /app\nCOPY hello.sh /app/\nRUN chmod +x /app/hello.sh\n"
            "ENV TASK=one\n")
        out = run_python(e2b_python, e2b_env, f"""
            from e2b import Template, Sandbox
            ctx = {str(tmp_path / 'ctx')!r}
            t = Template(file_context_path=ctx).from_dockerfile(ctx + "/Dockerfile")
            Template.build(t, "dockerfile-tpl")
            s = Sandbox.create("dockerfile-tpl")
            r = s.commands.run("id; pwd; bash /app/hello.sh; echo $TASK; ls -ld /home/user",
                               user="root", cwd="/app")
            mine = s.commands.run("whoami; pwd")
            s.kill()
            out({{"root": r.stdout, "mine": mine.stdout}})
        """, timeout=600)
    lines = out["root"].splitlines()
    assert lines[0].startswith("uid=0(root)") and lines[1] == "/app", out
    assert lines[2] == "hello from the task" and lines[3] == "one", out
    assert " user " in lines[4], out
    assert out["mine"].split() == ["user", "/app"], out  # E2B's user, the Dockerfile's WORKDIR


def test_another_keys_template_is_not_found(kilnd, e2b_python, e2b_env, other_env, e2b_key):
    out = run_python(e2b_python, e2b_env, """
        from e2b import Template
        info = Template.build(Template().from_template("base").run_cmd("true"), "mine-only")
        out([info.template_id, info.build_id])
    """, timeout=600)
    name, build_id = out
    theirs = run_python(e2b_python, other_env, f"""
        from e2b import Template, Sandbox
        res = {{"exists": Template.exists({name!r})}}
        try:
            Sandbox.create({name!r})
            res["create"] = "created"
        except Exception as e:
            res["create"] = type(e).__name__ + ": " + str(e)
        out(res)
    """)
    assert theirs["exists"] is False, theirs
    assert "not found" in theirs["create"], theirs
    other_key = other_env["E2B_API_KEY"]
    status, body = e2b_http(kilnd, "GET", f"/templates/{name}/builds/{build_id}/status", other_key)
    assert status == 404 and body["code"] == 404, body
    status, body = e2b_http(kilnd, "GET", f"/templates/{name}/tags", other_key)
    assert status == 404, body
    status, body = e2b_http(kilnd, "DELETE", f"/templates/{name}", other_key)
    assert status == 404, body
    # The build's files are the key's own: the same hash is not "present" for another key.
    status, body = e2b_http(kilnd, "GET", f"/templates/{name}/files/{'c' * 64}", e2b_key[1])
    assert status == 201 and body["present"] is False and "url" in body, body


def _tar_gz(path, files):
    with tarfile.open(path, "w:gz") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            import io
            t.addfile(info, io.BytesIO(data))
    return Path(path).read_bytes()


def test_an_upload_link_is_a_credential_of_its_own(kilnd, api, e2b_key, tmp_path):
    """GET .../files/{hash} hands out a link for this key, template and hash: a PUT to it needs
    no API key; a changed signature, template, hash or expiry is refused, and so is the link
    once its key is revoked. What it uploads must be a sound archive."""
    made = api.ok("POST", "/v1/keys", json={"name": "upload-links"})
    key = "e2b_" + made["secret"][len("kiln_"):]
    h = "d" * 64
    status, body = e2b_http(kilnd, "GET", f"/templates/links-tpl/files/{h}", key)
    assert status == 404, body  # files go to a template of the key's: requested, or built
    status, body = e2b_http(kilnd, "POST", "/v3/templates", key, {"name": "links-tpl"})
    assert status == 202, body
    status, body = e2b_http(kilnd, "GET", f"/templates/links-tpl/files/{h}", key)
    assert status == 201 and body["present"] is False, body
    url = body["url"]
    parts = urllib.parse.urlsplit(url)
    assert parts.path == f"/e2b/template-uploads/{h}" and "signature=" in parts.query, url
    assert made["secret"] not in url and key not in url  # no credential of the key's in it
    archive = _tar_gz(tmp_path / "a.tgz", {"f.txt": b"hello"})
    q = dict(urllib.parse.parse_qsl(parts.query))

    def put(query, hash_=h, data=archive):
        target = f"{kilnd.url}/e2b/template-uploads/{hash_}?{urllib.parse.urlencode(query)}"
        return e2b_http(kilnd, "PUT", target, raw=data,
                        headers={"Content-Type": "application/octet-stream"})

    for bad in (dict(q, signature="0" * 64), dict(q, template="other"),
                dict(q, expires=str(int(q["expires"]) + 1)), dict(q, key="key_nobody")):
        status, body = put(bad)
        assert status == 403 and body["code"] == 403, (bad, body)
    assert put(q, hash_="e" * 64)[0] == 403  # another hash
    # Past 100 MiB it is refused from its Content-Length, once the body has begun (kilnd
    # waits for a request's start), without waiting for the rest of it.
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    conn.putrequest("PUT", f"{parts.path}?{parts.query}")
    conn.putheader("Content-Length", str(101 << 20))
    conn.endheaders()
    conn.send(b"\0" * 65536)
    r = conn.getresponse()
    assert r.status == 413 and "100 MiB" in r.read().decode(), r.status
    conn.close()
    status, body = put(q, data=_tar_gz(tmp_path / "evil.tgz", {"../escape": b"x"}))
    assert status == 400, body  # unpacked once on arrival, as any build context
    status, body = put(q)
    assert status == 200, body
    status, body = e2b_http(kilnd, "GET", f"/templates/links-tpl/files/{h}", key)
    assert status == 201 and body == {"present": True}, body
    # The link again, other bytes: taken, but what the key's builds read under that hash stays
    # the first upload (a link someone else saw replaces nothing).
    other = _tar_gz(tmp_path / "b.tgz", {"f.txt": b"replaced"})
    assert put(q, data=other)[0] == 200
    kiln_key = Client(kilnd.url, key=made["secret"])
    missing = kiln_key.ok("POST", "/v1/images/context/missing", json={"digests": [
        "sha256:" + hashlib.sha256(archive).hexdigest(), "sha256:" + hashlib.sha256(other).hexdigest()]})
    assert missing["missing"] == ["sha256:" + hashlib.sha256(other).hexdigest()], missing
    api.ok("POST", f"/v1/keys/{made['id']}:revoke")
    status, body = put(q)
    assert status == 403, body  # links die with their key


def test_template_delete_and_refusals(kilnd, e2b_python, e2b_env, e2b_key):
    run_python(e2b_python, e2b_env, """
        from e2b import Template
        Template.build(Template().from_template("base").run_cmd("true"), "doomed-tpl")
        out(Template.exists("doomed-tpl"))
    """, timeout=600)
    key = e2b_key[1]
    status, _ = e2b_http(kilnd, "DELETE", "/templates/doomed-tpl", key)
    assert status == 204
    status, body = e2b_http(kilnd, "GET", "/templates/aliases/doomed-tpl", key)
    assert status == 404, body
    status, body = e2b_http(kilnd, "DELETE", "/templates/base", key)
    assert status == 404, body  # kiln's built-in image is nobody's to delete
    status, body = e2b_http(kilnd, "POST", "/v3/templates", key, {"name": "Bad Name"})
    assert status == 400 and "name" in body["message"], body
    status, body = e2b_http(kilnd, "POST", "/v3/templates", key, {"name": "t", "cpuCount": 99})
    assert status == 400 and "cpuCount" in body["message"], body
    status, body = e2b_http(kilnd, "POST", "/v3/templates", key, {"name": "regs"})
    assert status == 202, body
    status, body = e2b_http(kilnd, "POST", f"/v2/templates/regs/builds/{body['buildID']}", key,
                            {"fromImage": "x", "fromImageRegistry": {"type": "aws"}})
    assert status == 501 and "fromImageRegistry" in body["message"], body
    status, body = e2b_http(kilnd, "POST", "/v2/templates/regs/builds/not-a-build", key,
                            {"fromTemplate": "base"})
    assert status == 404, body


def test_the_js_sdk_builds_and_boots_a_template(e2b_node, e2b_env, context_dir):
    out = run_node(e2b_node, e2b_env, f"""
        import {{ Template, Sandbox }} from 'e2b'
        const t = Template({{ fileContextPath: {json.dumps(str(context_dir))} }})
          .fromTemplate('base')
          .copy('app/main.py', '/opt/js/main.py', {{ mode: 0o755 }})
          .setEnvs({{ FROM_JS: 'yes' }})
          .runCmd('python3 /opt/js/main.py > /opt/js/out.txt')
        const info = await Template.build(t, 'js-tpl', {{ cpuCount: 1, memoryMB: 512 }})
        const s = await Sandbox.create('js-tpl')
        const r = await s.commands.run('cat /opt/js/out.txt; echo $FROM_JS; stat -c %a /opt/js/main.py')
        await s.kill()
        out({{ name: info.name, stdout: r.stdout, exists: await Template.exists('js-tpl') }})
    """, timeout=600)
    assert out["name"] == "js-tpl" and out["exists"] is True, out
    assert out["stdout"].split("\n")[:3] == ["hello from the template", "yes", "755"], out
