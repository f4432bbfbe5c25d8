"""Files: content read/write, list, stat, mkdir, remove, rename, and whole
directory trees through tar archives."""
import gzip
import hashlib
import io
import os
import tarfile

from client import assert_error

F = "/v1/sandboxes/{}/files"


def test_write_read_text_creates_parents(api, sid):
    w = api.write_file(sid, "/workspace/t/a/b/c.txt", "grüße\n".encode())
    assert w == {"path": "/workspace/t/a/b/c.txt", "size": 8}, w
    r = api.read_file(sid, "/workspace/t/a/b/c.txt")
    assert r.body.decode() == "grüße\n"
    assert api.sh(sid, "cat /workspace/t/a/b/c.txt") == "grüße\n"
    st = api.stat(sid, "/workspace/t/a/b/c.txt")
    assert (st["exists"], st["type"], st["size"], st["mode"]) == (True, "file", 8, "644"), st
    assert (st["uid"], st["gid"]) == (1000, 1000), "files belong to user"
    assert api.stat(sid, "/workspace/t/a")["type"] == "directory"


def test_binary_round_trip_and_headers(api, sid):
    data = bytes(range(256)) * 4097
    api.write_file(sid, "/workspace/t/bin.dat", data)
    r = api.read_file(sid, "/workspace/t/bin.dat")
    assert r.body == data
    assert r.headers.get("x-content-length") == str(len(data))
    assert r.headers.get("x-content-sha256") == hashlib.sha256(data).hexdigest()
    assert r.request_id
    assert api.sh(sid, "sha256sum < /workspace/t/bin.dat").split()[0] == hashlib.sha256(data).hexdigest()
    api.write_file(sid, "/workspace/t/empty", b"")
    r = api.read_file(sid, "/workspace/t/empty")
    assert r.body == b"" and r.headers.get("x-content-length") == "0"


def test_mode_is_honoured(api, sid):
    api.write_file(sid, "/workspace/t/run.sh", b"#!/bin/sh\necho ran\n", mode="755")
    assert api.stat(sid, "/workspace/t/run.sh")["mode"] == "755"
    assert api.sh(sid, "stat -c %a /workspace/t/run.sh && /workspace/t/run.sh") == "755\nran\n"
    api.write_file(sid, "/workspace/t/secret", b"s", mode="600")
    assert api.sh(sid, "stat -c '%a %u' /workspace/t/secret") == "600 1000\n"


def test_write_is_atomic(api, sid):
    size = 4 << 20
    api.write_file(sid, "/workspace/t/atomic", b"A" * size)
    reader = ("import time\nbad = reads = 0\nend = time.time() + 4\n"
              "while time.time() < end:\n"
              "    d = open('/workspace/t/atomic', 'rb').read(); reads += 1\n"
              f"    bad += not (len(d) == {size} and d.count(d[:1]) == len(d))\n"
              "print(reads, bad)\n")
    p = api.spawn(sid, argv=["python3", "-c", reader])
    for i in range(12):
        api.write_file(sid, "/workspace/t/atomic", (b"B" if i % 2 == 0 else b"A") * size)
    done = api.wait_process(sid, p["id"], timeout=20)
    out = api.ok("GET", f"/v1/sandboxes/{sid}/processes/{p['id']}/output", query={"cursor": 0})
    reads, bad = map(int, "".join(c["data"] for c in out["chunks"]).split())
    assert done["exitCode"] == 0 and reads > 0
    assert bad == 0, f"{bad} of {reads} reads saw a partly written file"


def test_list_and_stat(api, sid):
    api.sh(sid, "mkdir -p /workspace/ls/sub/deep && printf 12345 > /workspace/ls/five && "
                "touch /workspace/ls/sub/deep/x && ln -s five /workspace/ls/link")
    d = api.ok("GET", F.format(sid) + "/list", query={"path": "/workspace/ls", "depth": 1})["data"]
    by = {e["name"]: e for e in d}
    assert set(by) == {"five", "sub", "link"}, d
    assert (by["five"]["type"], by["five"]["size"], by["five"]["path"]) == ("file", 5, "/workspace/ls/five")
    assert by["sub"]["type"] == "directory"
    assert by["link"]["type"] == "symlink" and by["link"].get("symlinkTarget") == "five"
    deep = api.ok("GET", F.format(sid) + "/list", query={"path": "/workspace/ls", "depth": 3})["data"]
    assert "/workspace/ls/sub/deep/x" in {e["path"] for e in deep}, deep
    missing = api.stat(sid, "/workspace/ls/nope")
    assert missing == {"exists": False, "path": "/workspace/ls/nope"}, missing


def test_mkdir_remove_rename(api, sid):
    e = api.ok("POST", F.format(sid) + ":mkdir", json={"path": "/workspace/mk/a/b", "parents": True})
    assert (e["type"], e["path"]) == ("directory", "/workspace/mk/a/b"), e
    assert_error(api.post(F.format(sid) + ":mkdir", json={"path": "/workspace/mk/a", "parents": False}),
                 409, "file_exists", mentions=["/workspace/mk/a"])
    api.write_file(sid, "/workspace/mk/a/b/f", b"1")
    api.write_file(sid, "/workspace/mk/g", b"2")
    # rename refuses to overwrite unless asked
    r = api.post(F.format(sid) + ":rename", json={"from": "/workspace/mk/g", "to": "/workspace/mk/a/b/f"})
    assert_error(r, 409, "file_exists")
    assert api.read_file(sid, "/workspace/mk/a/b/f").body == b"1"
    e = api.ok("POST", F.format(sid) + ":rename",
               json={"from": "/workspace/mk/g", "to": "/workspace/mk/a/b/f", "overwrite": True})
    assert e["path"] == "/workspace/mk/a/b/f" and api.read_file(sid, "/workspace/mk/a/b/f").body == b"2"
    assert api.stat(sid, "/workspace/mk/g")["exists"] is False
    e = api.ok("POST", F.format(sid) + ":rename", json={"from": "/workspace/mk/a/b/f", "to": "/workspace/mk/h"})
    assert e["path"] == "/workspace/mk/h" and e["type"] == "file"
    # remove: non-recursive refuses a non-empty dir, recursive takes it all
    r = api.post(F.format(sid) + ":remove", json={"path": "/workspace/mk/a"})
    assert 400 <= r.status < 500, r
    assert api.stat(sid, "/workspace/mk/a/b")["exists"] is True
    assert api.ok("POST", F.format(sid) + ":remove", json={"path": "/workspace/mk/h"}) == {"removed": True}
    assert api.ok("POST", F.format(sid) + ":remove", json={"path": "/workspace/mk/a", "recursive": True}) == {"removed": True}
    assert api.ok("POST", F.format(sid) + ":remove", json={"path": "/workspace/mk/a"}) == {"removed": False}
    assert api.sh(sid, "ls -A /workspace/mk") == ""


def test_file_errors_name_the_path(api, sid):
    api.write_file(sid, "/workspace/fe/file", b"x")
    q = F.format(sid) + "/content"
    assert_error(api.get(q, query={"path": "/workspace/fe/missing"}), 404, "file_not_found",
                 mentions=["/workspace/fe/missing"])
    assert_error(api.get(q, query={"path": "/workspace/fe"}), 409, "is_a_directory", mentions=["/workspace/fe"])
    assert_error(api.request("PUT", q, data=b"y", query={"path": "/workspace/fe/file/under"}), 409,
                 "not_a_directory")


def _tree():
    rnd = os.urandom
    return {"a.txt": b"hello\n", "empty": b"", "bin/blob": rnd(1 << 20), "bin/x.sh": b"#!/bin/sh\n",
            "d1/d2/d3/deep.dat": rnd(70001), "d1/one": b"1", "spaces and ünïcode.txt": rnd(333)}


def _make_tar(files, gz=False):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w") as t:
        dirs = sorted({os.path.dirname(n) for n in files} - {""})
        for d in dirs + ["emptydir"]:
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            t.addfile(ti)
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), 0o755 if name.endswith(".sh") else 0o644
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def _read_tar(body, root_name):
    """{relative path: bytes} of the regular files, and the set of dirs."""
    files, dirs = {}, set()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as t:
        for m in t.getmembers():
            name = m.name
            while name.startswith("./"):
                name = name[2:]
            name = name.lstrip("/")
            if name.startswith(root_name + "/") or name == root_name:
                name = name[len(root_name) + 1:]
            if m.isdir():
                dirs.add(name.rstrip("/"))
            elif m.isfile():
                files[name] = t.extractfile(m).read()
    return files, dirs


def test_archive_round_trip(api, sid):
    files = _tree()
    body = _make_tar(files)
    r = api.ok("PUT", F.format(sid) + "/archive", data=body, query={"path": "/workspace/up"},
               headers={"Content-Type": "application/x-tar"})
    assert r == {"path": "/workspace/up", "bytes": len(body)}, r
    listing = api.sh(sid, "cd /workspace/up && find . -type f -printf '%P %s %U\\n' | sort")
    assert listing == "".join(f"{n} {len(d)} 1000\n" for n, d in sorted(files.items())), listing
    assert api.sh(sid, "test -d /workspace/up/emptydir && test -x /workspace/up/bin/x.sh && echo ok") == "ok\n"
    assert api.read_file(sid, "/workspace/up/bin/blob").body == files["bin/blob"]
    for gz in (False, True):
        got = api.get(F.format(sid) + "/archive", query={"path": "/workspace/up", "gzip": gz}, timeout=120)
        assert got.status == 200, got
        assert got.request_id
        if gz:
            assert got.body[:2] == b"\x1f\x8b", "gzip=true did not gzip"
        down, dirs = _read_tar(got.body, "up")
        assert {n: len(d) for n, d in down.items()} == {n: len(d) for n, d in files.items()}
        assert down == files, "downloaded tree differs from the uploaded one"
        assert "emptydir" in dirs


def test_archive_gzip_upload(api, sid):
    files = {"x/y.txt": b"gz works\n", "z.bin": os.urandom(5000)}
    body = _make_tar(files, gz=True)
    r = api.ok("PUT", F.format(sid) + "/archive", data=body, query={"path": "/workspace/gzup"})
    assert r["bytes"] == len(body)
    assert api.read_file(sid, "/workspace/gzup/x/y.txt").body == b"gz works\n"
    assert api.read_file(sid, "/workspace/gzup/z.bin").body == files["z.bin"]
    # a corrupt archive is refused without a partial success
    bad = api.request("PUT", F.format(sid) + "/archive", data=gzip.compress(b"not a tar" * 100),
                      query={"path": "/workspace/gzbad"})
    assert 400 <= bad.status < 500, bad
