"""envd 0.6.4's file features, as E2B's SDKs use them once kiln announces that version
(issue 45), against a real kilnd with E2B's published Python (e2b 2.63.0) and JavaScript
(e2b 2.51.0) SDKs:

- file metadata (envd 0.6.2): X-Metadata-* headers on an upload become user.e2b.* extended
  attributes of the file, shown on the write's answer, get_info, list and rename; an upload
  replaces them (one with none clears them); ones set inside the sandbox show too; keys and
  values outside printable ASCII are refused before anything is written;
- gzip'ed uploads (envd 0.5.7): the body inflated as it streams;
- watch events' entries (envd 0.6.3) and allow_network_mounts (0.6.4).

Each of these failed on kiln before: the SDKs refused them by the version kiln announced.
"""
import gzip

import pytest

from e2b_clients import (e2b_env, e2b_http, e2b_key, e2b_node, e2b_python,  # noqa: F401
                         run_node, run_python)

pytestmark = pytest.mark.xdist_group("e2b_conformance")

PY = """
import time
from e2b import Sandbox, FileType, FilesystemEventType
from e2b.exceptions import InvalidArgumentException
from e2b.sandbox.filesystem.filesystem import WriteEntry
"""


def py(e2b_python, env, script, timeout=300):  # noqa: F811
    return run_python(e2b_python, env, script, timeout, imports=PY)


def test_file_metadata_is_kept_as_the_files_attributes(e2b_python, e2b_env):  # noqa: F811
    out = py(e2b_python, e2b_env, """
        s = Sandbox.create(timeout=300)
        r = {"version": str(s._envd_version)}
        meta = {"author": "mish", "purpose": "upload"}
        r["write"] = s.files.write("m/a.txt", "content", metadata=meta).metadata
        r["octet"] = s.files.write("m/b.txt", "x", metadata={"k": "v"},
                                   use_octet_stream=True).metadata
        r["info"] = s.files.get_info("m/a.txt").metadata
        r["list"] = {e.name: e.metadata for e in s.files.list("m")}
        r["many"] = [i.metadata for i in s.files.write_files(
            [WriteEntry(path="m/c.txt", data="1"), WriteEntry(path="m/d.txt", data="2")],
            metadata={"source": "suite"})]
        r["renamed"] = s.files.rename("m/a.txt", "m/renamed.txt").metadata
        r["xattr"] = s.commands.run(
            "getfattr -d -m user. m/renamed.txt 2>/dev/null || python3 -c \\"import os; "
            "print(sorted(os.listxattr('m/renamed.txt')))\\"").stdout
        # An upload replaces the metadata: one with none clears it.
        s.files.write("m/renamed.txt", "second")
        r["cleared"] = s.files.get_info("m/renamed.txt").metadata
        # Set inside the sandbox, as a policy would.
        s.commands.run("python3 -c \\"import os; "
                       "os.setxattr('m/b.txt', 'user.e2b.owner', b'policy'); "
                       "os.setxattr('m/b.txt', 'user.other', b'not shown')\\"")
        r["inside"] = s.files.get_info("m/b.txt").metadata
        bad = []
        for m in ({"bad key": "v"}, {"": "v"}, {"good": "bad\\nvalue"}):
            try:
                s.files.write("m/refused.txt", "x", metadata=m)
                bad.append("written")
            except InvalidArgumentException:
                bad.append("refused")
        r["bad"] = bad
        r["refused_exists"] = s.files.exists("m/refused.txt")
        s.kill()
        out(r)
    """)
    assert out["version"] == "0.6.4", out
    assert out["write"] == {"author": "mish", "purpose": "upload"}, out
    assert out["octet"] == {"k": "v"}, out
    assert out["info"] == {"author": "mish", "purpose": "upload"}, out
    assert out["list"]["a.txt"] == {"author": "mish", "purpose": "upload"}, out
    assert out["list"]["b.txt"] == {"k": "v"}, out
    assert out["many"] == [{"source": "suite"}, {"source": "suite"}], out
    assert out["renamed"] == {"author": "mish", "purpose": "upload"}, out
    assert "user.e2b.author" in out["xattr"], out
    assert out["cleared"] is None, out
    assert out["inside"] == {"k": "v", "owner": "policy"}, out
    assert out["bad"] == ["refused"] * 3, out
    assert out["refused_exists"] is False, out


def test_kilnd_checks_metadata_headers_itself(kilnd, e2b_python, e2b_env):  # noqa: F811
    """The SDK checks metadata before sending it; kilnd must too, for a client that does not:
    a 400 naming the header, and no file written."""
    out = py(e2b_python, e2b_env, """
        s = Sandbox.create(timeout=300)
        out({"id": s.sandbox_id, "token": s._envd_access_token})
    """)
    sid, token = out["id"], out["token"]
    base = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983", "X-Access-Token": token,
            "Content-Type": "application/octet-stream"}
    status, body = e2b_http(kilnd, "POST", "/sandbox/files?path=/tmp/v.txt", raw=b"x",
                            headers=dict(base, **{"X-Metadata-Note": "caf\u00e9".encode()
                                                  .decode("latin-1")}))
    assert status == 400 and "X-Metadata-Note" in body["message"], (status, body)
    status, body = e2b_http(kilnd, "POST", "/sandbox/files?path=/tmp/v.txt", raw=b"x",
                            headers=dict(base, **{"X-Metadata-Big": "v" * 5000}))
    assert status == 400 and "4096" in body["message"], (status, body)
    status, body = e2b_http(kilnd, "GET", "/sandbox/files?path=/tmp/v.txt",
                            headers={k: v for k, v in base.items() if k != "Content-Type"})
    assert status == 404, (status, body)
    status, body = e2b_http(kilnd, "POST", "/sandbox/files?path=/tmp/v.txt", raw=b"x",
                            headers=dict(base, **{"X-Metadata-Mixed-Case": "Kept As Is"}))
    assert status == 200 and body[0]["metadata"] == {"mixed-case": "Kept As Is"}, (status, body)
    e2b_http(kilnd, "DELETE", f"/sandboxes/{sid}")


def test_gzip_uploads_are_inflated_as_they_stream(kilnd, e2b_python, e2b_env):  # noqa: F811
    out = py(e2b_python, e2b_env, """
        import hashlib, io, os
        s = Sandbox.create(timeout=300)
        big = os.urandom(3 << 20) + b"a" * (5 << 20)
        s.files.write("z/big.bin", io.BytesIO(big), gzip=True)
        s.files.write("z/small.txt", "hello gzip", gzip=True)
        r = {"sum": s.commands.run("sha256sum z/big.bin").stdout.split()[0],
             "want": hashlib.sha256(big).hexdigest(),
             "small": s.files.read("z/small.txt"),
             "small_gz": s.files.read("z/small.txt", gzip=True),
             "id": s.sandbox_id, "token": s._envd_access_token}
        out(r)
    """)
    assert out["sum"] == out["want"], out
    assert out["small"] == "hello gzip" and out["small_gz"] == "hello gzip", out
    base = {"E2b-Sandbox-Id": out["id"], "E2b-Sandbox-Port": "49983",
            "X-Access-Token": out["token"], "Content-Type": "application/octet-stream",
            "Content-Encoding": "gzip"}
    # Two members, as `cat a.gz b.gz`, are one file.
    status, body = e2b_http(kilnd, "POST", "/sandbox/files?path=/tmp/two.txt",
                            raw=gzip.compress(b"one ") + gzip.compress(b"two"), headers=base)
    assert status == 200, (status, body)
    status, body = e2b_http(kilnd, "POST", "/sandbox/files?path=/tmp/bad.txt",
                            raw=b"this is not gzip", headers=base)
    assert status == 400 and "gzip" in body["message"], (status, body)
    status, body = e2b_http(kilnd, "POST", "/sandbox/files?path=/tmp/cut.txt",
                            raw=gzip.compress(b"x" * 1000)[:-8], headers=base)
    assert status == 400 and "ended before" in body["message"], (status, body)
    status, body = e2b_http(kilnd, "POST", "/sandbox/files?path=/tmp/br.txt", raw=b"x",
                            headers=dict(base, **{"Content-Encoding": "br"}))
    assert status == 501 or status == 400, (status, body)
    out2 = py(e2b_python, e2b_env, f"""
        s = Sandbox.connect("{out['id']}")
        out(s.files.read("/tmp/two.txt"))
        s.kill()
    """)
    assert out2 == "one two", out2


def test_watch_events_carry_the_entry(e2b_python, e2b_env):  # noqa: F811
    out = py(e2b_python, e2b_env, """
        s = Sandbox.create(timeout=300)
        s.files.make_dir("w")
        s.files.write("w/f.txt", "one", metadata={"tag": "watched"})
        h = s.files.watch_dir("w", include_entry=True)
        s.files.write("w/f.txt", "two", metadata={"tag": "watched"})
        s.files.write("w/gone.txt", "x")
        s.files.remove("w/gone.txt")
        time.sleep(0.5)
        events = h.get_new_events()
        h.stop()
        r = []
        for e in events:
            en = e.entry
            r.append([e.type.name, e.name, None if en is None else
                      {"name": en.name, "path": en.path, "type": en.type.name,
                       "size": en.size, "metadata": en.metadata}])
        plain = s.files.watch_dir("w", allow_network_mounts=True)
        s.files.write("w/f.txt", "three")
        time.sleep(0.5)
        r2 = [(e.type.name, e.name, e.entry) for e in plain.get_new_events()]
        plain.stop()
        s.kill()
        out({"events": r, "plain": [[t, n, en is None] for t, n, en in r2]})
    """)
    writes = [e for e in out["events"] if e[0] == "WRITE" and e[1] == "f.txt"]
    assert writes and writes[-1][2] == {"name": "f.txt", "path": "/home/user/w/f.txt",
                                        "type": "FILE", "size": 3,
                                        "metadata": {"tag": "watched"}}, out
    removes = [e for e in out["events"] if e[0] == "REMOVE" and e[1] == "gone.txt"]
    assert removes and removes[0][2] is None, out
    assert ["WRITE", "f.txt", True] in out["plain"], out


def test_the_javascript_sdk_writes_metadata_and_gzip(e2b_node, e2b_env):  # noqa: F811
    out = run_node(e2b_node, e2b_env, """
        import { Sandbox } from 'e2b'
        const s = await Sandbox.create({ timeoutMs: 300000 })
        const w = await s.files.write('js/a.txt', 'from js', { metadata: { lang: 'js' } })
        const z = await s.files.write('js/z.txt', 'zipped '.repeat(1000), { gzip: true })
        const info = await s.files.getInfo('js/a.txt')
        const text = await s.files.read('js/z.txt')
        await s.kill()
        out({ write: w.metadata, info: info.metadata, zpath: z.path, zlen: text.length })
    """)
    assert out == {"write": {"lang": "js"}, "info": {"lang": "js"},
                   "zpath": "/home/user/js/z.txt", "zlen": 7000}, out
