"""Escape attempts on the file system: host paths through /proc/*/root,
symlinks and `..`, by commands (as the user and as root with sudo), by the
file API, by archive uploads and downloads. Everything acts inside the
sandbox's own root; the host marker (escape_common) must never be read,
written or deleted."""
import hashlib
import io
import json
import tarfile

import pytest

from client import assert_error
from escape_common import escape_guard, marker, no_secret, quote, sh  # noqa: F401 -- fixtures

F = "/v1/sandboxes/{}/files"


@pytest.fixture(scope="module")
def box(api):
    info = api.create(vcpu=1, memoryMiB=512)
    yield info["id"]
    api.request("DELETE", f"/v1/sandboxes/{info['id']}")


def _host_paths(marker):
    m = str(marker.path)
    return {
        "plain": m,
        "proc-self-root": "/proc/self/root" + m,
        "proc-1-root": "/proc/1/root" + m,
        "proc-1-root-twice": "/proc/1/root/proc/1/root" + m,
        "proc-1-cwd-dotdot": "/proc/1/cwd/../../.." + m,
        "dotdot": "/workspace/../../../../.." + m,
    }


# --- commands -----------------------------------------------------------------


@pytest.mark.parametrize("user", ["user", "root"])
def test_commands_cannot_read_host_paths(api, kilnd, marker, box, user):
    prefix = "sudo " if user == "root" else ""
    attempts = {name: f"{prefix}cat {quote(p)}" for name, p in _host_paths(marker).items()}
    attempts["symlink"] = f"ln -sfn {marker.path} /tmp/l-{user} && {prefix}cat /tmp/l-{user}"
    attempts["symlink-proc"] = f"ln -sfn /proc/1/root{marker.path} /tmp/lp-{user} && {prefix}cat /tmp/lp-{user}"
    attempts["dir"] = f"{prefix}ls -la {marker.dir} /proc/1/root{marker.dir}"
    attempts["admin-key"] = f"{prefix}cat {kilnd.state_dir}/admin.key /proc/1/root{kilnd.state_dir}/admin.key"
    for name, command in attempts.items():
        r = sh(api, box, command)
        no_secret(marker, r, extra=[kilnd.admin_key])
        assert r["exitCode"] != 0, (name, r)
        assert "No such file or directory" in r["stderr"] or "Permission denied" in r["stderr"], (name, r)
    # The sandbox's own root is all /proc/1/root shows (kiln's agent, its /tmp marker file).
    r = sh(api, box, f"{prefix}ls /proc/1/root/opt/kiln/kiln-agent /proc/1/root/tmp/.kiln-disk")
    if user == "root":
        assert r["exitCode"] == 0, r
    else:
        assert r["exitCode"] != 0 and "Permission denied" in r["stderr"], r  # the agent is root's


def test_commands_write_and_delete_only_inside(api, marker, box):
    m = str(marker.path)
    for name, p in _host_paths(marker).items():
        r = sh(api, box, f"sudo sh -c {quote(f'echo pwned-{name} > {p}')} && cat {m}")
        assert r["exitCode"] == 0 and r["stdout"] == f"pwned-{name}\n", (name, r)  # the sandbox's own /tmp
        r = sh(api, box, f"sudo rm -f {quote(p)} && test ! -e {m}")
        assert r["exitCode"] == 0, (name, r)
    r = sh(api, box, f"sudo mkdir -p {marker.dir} && sudo rm -rf /proc/1/root{marker.dir} && "
                     f"ln -sfn {marker.dir} /tmp/dl && sudo rm -rf /tmp/dl/ ; echo done")
    assert r["stdout"] == "done\n", r


def test_image_root_and_bind_mounts_stay_unchanged(api, kilnd, host, box, sandboxes):
    config = json.loads((host.sandbox_dir(box) / "config.json").read_text())
    root = config["root"]["path"]
    agent = next(mt["source"] for mt in config["mounts"] if mt["destination"] == "/usr/bin/sudo")
    watched = [f"{root}/etc/passwd", f"{root}/etc/hostname", f"{root}/usr/bin/yes", agent]
    before = {p: hashlib.sha256(open(p, "rb").read()).hexdigest() for p in watched}
    r = sh(api, box, "sudo sh -c 'echo pwned::0:0::/:/bin/sh >> /etc/passwd; echo pwned > /usr/bin/yes; "
                     "echo pwned > /etc/hostname'; tail -1 /etc/passwd")
    assert r["stdout"] == "pwned::0:0::/:/bin/sh\n", r  # the sandbox's own copy (its overlay)
    for target in ("/usr/bin/sudo", "/opt/kiln/kiln-agent"):
        r = sh(api, box, f"sudo sh -c 'echo pwned >> {target}'; sudo mount -o remount,rw {target}; "
                         f"sudo cp /bin/true {target}")
        assert r["exitCode"] != 0 and "Read-only file system" in r["stderr"], (target, r)
    after = {p: hashlib.sha256(open(p, "rb").read()).hexdigest() for p in watched}
    assert after == before, "a sandbox changed a file of the image or the agent on the host"
    # A new sandbox from the same image sees the image's files, not the first one's writes.
    other = sandboxes.create(vcpu=1, memoryMiB=256)["id"]
    assert "pwned" not in api.sh(other, "cat /etc/passwd /etc/hostname; /usr/bin/yes | head -1")
    assert api.sh(box, "echo alive") == "alive\n"


# --- the file API -------------------------------------------------------------


def test_file_api_cannot_read_host_paths(api, marker, box):
    paths = dict(_host_paths(marker))
    api.sh(box, f"ln -sfn {marker.path} /workspace/lnk && ln -sfn /proc/1/root{marker.path} /workspace/lnkp && "
                f"ln -sfn {marker.dir} /workspace/dirlnk && sudo rm -rf {marker.path} {marker.dir}")
    paths.update({"symlink": "/workspace/lnk", "symlink-proc": "/workspace/lnkp",
                  "dir-symlink": "/workspace/dirlnk/inside", "dir": f"{marker.dir}/inside"})
    for name, p in paths.items():
        r = api.get(F.format(box) + "/content", query={"path": p})
        no_secret(marker, r.body)
        assert_error(r, 404, "file_not_found")
        st = api.stat(box, p)
        no_secret(marker, st)
        assert st.get("type") != "file", (name, st)
    for p in (str(marker.dir), f"/proc/1/root{marker.dir}", "/workspace/dirlnk"):
        r = api.get(F.format(box) + "/list", query={"path": p})
        assert_error(r, 404, "file_not_found")
    listing = api.ok("GET", F.format(box) + "/list", query={"path": "/proc/1/root/tmp", "depth": 2})
    assert not [e for e in listing["data"] if "kiln-escape" in e["name"]], listing
    r = api.get(F.format(box) + "/archive", query={"path": str(marker.dir)})
    assert_error(r, 404, "file_not_found")


def test_file_api_symlink_to_shadow_reads_the_sandboxs_own(api, box):
    api.sh(box, "ln -sfn /etc/shadow /workspace/shadow")
    got = api.read_file(box, "/workspace/shadow").body
    own = api.exec(box, argv=["cat", "/etc/shadow"], user="root")["stdout"].encode()
    assert got == own and b"root:" in got
    with open("/etc/shadow", "rb") as f:
        assert got != f.read(), "the file API read the host's /etc/shadow"


def test_file_api_writes_deletes_and_renames_only_inside(api, marker, box):
    m = str(marker.path)
    api.sh(box, f"ln -sfn {m} /workspace/wl && ln -sfn /proc/1/root{marker.dir} /workspace/wdl")
    targets = dict(_host_paths(marker), symlink="/workspace/wl")
    for name, p in targets.items():
        w = api.request("PUT", F.format(box) + "/content", data=b"pwned\n", query={"path": p})
        assert w.status == 200, (name, w)
        # It landed in the sandbox: at the path inside, or replacing the symlink.
        inside = "/workspace/wl" if name == "symlink" else m
        assert api.sh(box, f"cat {inside}") == "pwned\n", name
        rm = api.ok("POST", F.format(box) + ":remove", json={"path": p})
        assert rm == {"removed": True}, (name, rm)
    r = api.ok("POST", F.format(box) + ":mkdir", json={"path": f"/proc/1/root{marker.dir}/made", "parents": True})
    assert r["type"] == "directory"
    assert api.sh(box, f"ls {marker.dir}") == "made\n"
    api.write_file(box, "/workspace/src", b"moved\n")
    r = api.ok("POST", F.format(box) + ":rename",
               json={"from": "/workspace/src", "to": "/workspace/wdl/inside", "overwrite": True})
    assert api.sh(box, f"cat {marker.dir}/inside") == "moved\n"
    r = api.ok("POST", F.format(box) + ":rename", json={"from": f"/workspace/../..{marker.dir}/inside",
                                                          "to": "/workspace/back"})
    assert api.sh(box, "cat /workspace/back") == "moved\n"
    r = api.ok("POST", F.format(box) + ":remove", json={"path": f"/workspace/../..{marker.dir}", "recursive": True})
    assert r == {"removed": True}
    assert api.stat(box, str(marker.dir))["exists"] is False


# --- archives -----------------------------------------------------------------


def _tar(*members):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.GNU_FORMAT) as t:
        for ti, data in members:
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return b.getvalue()


def _file(name, data=b"pwned\n", mode=0o644, uid=1000):
    ti = tarfile.TarInfo(name)
    ti.size, ti.mode, ti.uid, ti.gid = len(data), mode, uid, uid
    return ti, data


def _link(name, target, kind=tarfile.SYMTYPE):
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname = kind, target
    return ti, None


def _node(name, kind, major=0, minor=0):
    ti = tarfile.TarInfo(name)
    ti.type, ti.devmajor, ti.devminor, ti.mode = kind, major, minor, 0o666
    return ti, None


def _put_archive(api, sid, path, body):
    return api.request("PUT", F.format(sid) + "/archive", data=body, query={"path": path},
                       headers={"Content-Type": "application/x-tar"})


def test_archive_upload_stays_in_its_folder(api, marker, box):
    m = str(marker.path)
    id_binary = api.read_file(box, "/usr/bin/id").body
    # name -> (archive, refused?, what the folder holds afterwards: find's "%P %y %m %u" lines)
    cases = {
        "dotdot": (_tar(_file("../../../../.." + m)), "Member name contains '..'", []),
        "absolute": (_tar(_file(m)), None, ["tmp d 755 user", f"{m[1:]} f 644 user"]),
        "symlink-out-then-file": (_tar(_link("out", "/tmp"), _file("out/through")), "Not a directory",
                                  ["out l 777 user"]),
        "symlink-up-then-file": (_tar(_link("up", "../../../.."), _file(f"up{m}")), "Not a directory",
                                 ["up l 777 user"]),
        "hardlink-absolute": (_tar(_link("hl", "/etc/shadow", tarfile.LNKTYPE)), "Cannot hard link", []),
        "hardlink-dotdot": (_tar(_link("hl", "../../../etc/passwd", tarfile.LNKTYPE)), "Cannot hard link", []),
        "char-device-mem": (_tar(_node("mem", tarfile.CHRTYPE, 1, 1)), "Cannot mknod", []),
        "block-device": (_tar(_node("sda", tarfile.BLKTYPE, 8, 0)), "Cannot mknod", []),
        "fifo": (_tar(_node("pipe", tarfile.FIFOTYPE)), None, ["pipe p 666 user"]),
        "setuid-root-file": (_tar(_file("suid-id", id_binary, 0o4755, 0)), None, ["suid-id f 4755 user"]),
    }
    shadow_links = api.exec(box, argv=["stat", "-c", "%h", "/etc/shadow", "/etc/passwd"], user="root")["stdout"]
    for name, (body, refused, holds) in cases.items():
        folder = f"/workspace/up-{name}"
        r = _put_archive(api, box, folder, body)
        if refused:
            err = assert_error(r, 400, "invalid_archive")
            assert refused in err["message"], (name, err)
        else:
            assert r.status == 200, (name, r)
        got = api.sh(box, f"cd {folder} && find . -mindepth 1 -printf '%P %y %m %u\\n' | sort")
        assert got.splitlines() == sorted(holds), (name, got)
    # Nothing was written through a link, and no link to the sandbox's secrets was made.
    assert api.exec(box, argv=["stat", "-c", "%h", "/etc/shadow", "/etc/passwd"], user="root")["stdout"] == shadow_links
    r = sh(api, box, f"ls /tmp/through {m}")
    assert r["exitCode"] != 0 and r["stdout"] == "", r
    # The setuid bit on the user's own file gives nothing: it runs as the user.
    assert api.sh(box, "/workspace/up-setuid-root-file/suid-id -u") == "1000\n"


def test_archive_download_keeps_links_as_links(api, marker, box):
    m = str(marker.path)
    api.sh(box, f"mkdir -p /workspace/dl && cd /workspace/dl && echo mine > own && "
                f"ln -sfn {m} host-marker && ln -sfn /etc/shadow shadow && ln -sfn /proc/1/root root-of-1 && "
                f"ln -sfn / slash && mkfifo pipe")
    r = api.get(F.format(box) + "/archive", query={"path": "/workspace/dl"}, timeout=60)
    assert r.status == 200, r
    no_secret(marker, r.body)
    with tarfile.open(fileobj=io.BytesIO(r.body)) as t:
        members = {mem.name.removeprefix("./"): mem for mem in t.getmembers()}
        own = t.extractfile(members["own"]).read()
    links = {n: mem.linkname for n, mem in members.items() if mem.issym()}
    assert links == {"host-marker": m, "shadow": "/etc/shadow", "root-of-1": "/proc/1/root", "slash": "/"}, links
    assert members["pipe"].isfifo() and own == b"mine\n"
    files = sorted(n for n, mem in members.items() if mem.isfile())
    assert files == ["own"], f"the archive followed a link: {files}"
