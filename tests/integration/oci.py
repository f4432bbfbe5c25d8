"""A real local OCI registry (Debian's docker-registry) and images made in
the test with umoci and pushed with skopeo: nothing leaves the machine.

    with Registry(tmp) as reg:
        ref = reg.push(build_image(tmp / "bb", busybox_rootfs(tmp / "r")), "busybox:1")
"""
import base64
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import time
import urllib.request
from pathlib import Path

from lib.net import free_port

BUSYBOX = "/bin/busybox"  # busybox-static


def run(*argv, **kw):
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 0, f"{argv!r}: {r.stderr or r.stdout}"
    return r.stdout


class Registry:
    """docker-registry on 127.0.0.1:<free port>; with `htpasswd` lines it
    asks for basic auth."""

    def __init__(self, root, htpasswd=None):
        self.root = Path(root)
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.data = self.root / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        auth = ""
        if htpasswd:
            (self.root / "htpasswd").write_text(htpasswd)
            auth = f"auth:\n  htpasswd:\n    realm: kiln-test\n    path: {self.root / 'htpasswd'}\n"
        (self.root / "config.yml").write_text(
            f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {self.data}\n"
            f"  delete:\n    enabled: true\nhttp:\n  addr: {self.host}\n{auth}")
        self.log = open(self.root / "registry.log", "w")
        self.proc = subprocess.Popen(["docker-registry", "serve", str(self.root / "config.yml")],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://{self.host}/v2/", timeout=1)
                break
            except urllib.error.HTTPError:  # 401 with auth: it is up
                break
            except OSError:
                assert self.proc.poll() is None, (self.root / "registry.log").read_text()
                assert time.monotonic() < deadline, "docker-registry did not start"
                time.sleep(0.1)

    def push(self, layout_ref, name, creds=None):
        """Pushes an OCI layout image ("DIR:tag") as host/name; returns the ref."""
        args = ["skopeo", "copy", "--dest-tls-verify=false"]
        if creds:
            args += ["--dest-creds", creds]
        run(*args, f"oci:{layout_ref}", f"docker://{self.host}/{name}")
        return f"{self.host}/{name}"

    def push_raw(self, name, tag, config, layers,
                 media_type="application/vnd.oci.image.manifest.v1+json"):
        """Pushes an image exactly as given, through the registry's own API:
        `config` (a dict, dumped as it is, or bytes) and `layers` (gzip'd tar
        bytes each) as blobs, and a manifest naming them. For crafted images:
        nothing here checks that the config agrees with the layers."""
        def post_blob(data):
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            start = urllib.request.urlopen(urllib.request.Request(
                f"http://{self.host}/v2/{name}/blobs/uploads/", method="POST", data=b""))
            loc = start.headers["Location"]
            if loc.startswith("/"):
                loc = f"http://{self.host}{loc}"
            urllib.request.urlopen(urllib.request.Request(
                f"{loc}{'&' if '?' in loc else '?'}digest={digest}", method="PUT", data=data,
                headers={"Content-Type": "application/octet-stream"}))
            return {"digest": digest, "size": len(data)}
        raw = config if isinstance(config, bytes) else json.dumps(config).encode()
        manifest = {"schemaVersion": 2, "mediaType": media_type,
                    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **post_blob(raw)},
                    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **post_blob(gz)}
                               for gz in layers]}
        urllib.request.urlopen(urllib.request.Request(
            f"http://{self.host}/v2/{name}/manifests/{tag}", method="PUT",
            data=json.dumps(manifest).encode(), headers={"Content-Type": media_type}))
        return f"{self.host}/{name}:{tag}"

    def blob_paths(self):
        return sorted(self.data.glob("docker/registry/v2/blobs/sha256/*/*/data"))

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def layer(files):
    """(gzip'd tar, diff id "sha256:<hex>") of {path: bytes or (bytes, mode)}."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as t:
        for path, content in sorted(files.items()):
            data, mode = content if isinstance(content, tuple) else (content, 0o644)
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), mode
            t.addfile(info, io.BytesIO(data))
    tar = raw.getvalue()
    return gzip.compress(tar, mtime=0), "sha256:" + hashlib.sha256(tar).hexdigest()


def image_config(diff_ids, **config):
    return {"architecture": "amd64", "os": "linux", "config": config,
            "rootfs": {"type": "layers", "diff_ids": list(diff_ids)}}


def htpasswd_line(user, password):
    """A bcrypt htpasswd line (the registry only takes bcrypt)."""
    return run("htpasswd", "-Bbn", user, password).strip() + "\n"


def busybox_rootfs(root, applets=("sh", "echo", "id", "ls", "cat", "env", "pwd", "sleep", "mkdir",
                                   "touch", "rm", "test", "printf", "wc", "head", "dd", "nc", "httpd")):
    """A root with static busybox as /bin/sh and friends, /etc/passwd with
    root and app (1234)."""
    root = Path(root)
    (root / "bin").mkdir(parents=True)
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for a in applets:
        os.symlink("busybox", root / "bin" / a)
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\napp:x:1234:1234:app:/home/app:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\napp:x:1234:\n")
    (root / "home" / "app").mkdir(parents=True)
    os.chown(root / "home" / "app", 1234, 1234)
    (root / "tmp").mkdir(mode=0o1777)
    return root


def build_image(layout, rootfs_layers, config=(), tag="t"):
    """An OCI image in `layout` ("DIR:tag" returned): one layer per root dir
    in `rootfs_layers` (each copied over the previous ones), then `config`
    (umoci config flags)."""
    layout = Path(layout)
    if not (layout / "index.json").exists():
        run("umoci", "init", "--layout", layout)
    ref = f"{layout}:{tag}"
    run("umoci", "new", "--image", ref)
    for i, src in enumerate(rootfs_layers):
        bundle = layout.parent / f"{layout.name}-bundle-{tag}-{i}"
        run("umoci", "unpack", "--image", ref, bundle)
        run("cp", "-a", f"{src}/.", bundle / "rootfs")
        run("umoci", "repack", "--image", ref, bundle)
        shutil.rmtree(bundle)
    if config:
        run("umoci", "config", "--image", ref, *config)
    return ref


def static_musl_binary(path, source):
    """Compiles C `source` with musl-gcc -static into `path`."""
    path = Path(path)
    c = path.with_suffix(".c")
    c.write_text(source)
    run("musl-gcc", "-static", "-O2", "-o", path, c)
    return path


def basic_auth(user, password):
    return base64.b64encode(f"{user}:{password}".encode()).decode()
