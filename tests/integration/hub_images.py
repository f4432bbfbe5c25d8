"""Stand-ins for Docker Hub's images, served by a local registry: nothing here leaves the
machine. The tests' Dockerfiles name Docker Hub images (`FROM ubuntu:24.04`, `FROM
python:3.12-slim-bookworm`) as real tasks do; kilnd pulls them through its --registry-mirror
docker.io=http://127.0.0.1:PORT, where `push_hub_images` has put an image under each name.

The image is small and made here: Debian's static busybox (sh and the usual tools) and
bash-static as /bin/bash, a root account, /root and /tmp; no useradd or adduser, so E2B's
`user` account is made the way a minimal image needs it. It is not Ubuntu or Python: the
tasks need a shell, coreutils and bash, which it has."""
import shutil
from pathlib import Path

from oci import build_image, busybox_rootfs

BASH = Path("/bin/bash-static")  # Debian's bash-static (make setup installs it)
APPLETS = ("sh", "echo", "id", "ls", "cat", "env", "pwd", "sleep", "mkdir", "touch", "rm", "test",
           "printf", "wc", "head", "tail", "grep", "chmod", "chown", "tee", "find", "mv", "cp",
           "tar", "gzip", "true", "false", "dirname", "basename", "sed", "awk", "cut", "tr", "sort",
           "uniq", "date", "stat", "ln", "which", "seq", "expr", "uname", "readlink", "xargs",
           "md5sum", "sha256sum", "nc", "wget", "ps", "kill", "whoami")


def hub_layout(root):
    """The stand-in image as an OCI layout under `root` ("DIR:tag" for skopeo)."""
    root = Path(root)
    assert BASH.exists(), f"{BASH} not found: make setup installs bash-static"
    rootfs = busybox_rootfs(root / "rootfs", applets=APPLETS)
    shutil.copy(BASH, rootfs / "bin" / "bash")
    (rootfs / "root").mkdir(mode=0o700)
    return build_image(root / "layout", [rootfs], config=[
        "--config.env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"])


def push_hub_images(registry, layout, names):
    """Pushes `layout` to `registry` (oci.Registry) as each Docker Hub name in `names`
    ("ubuntu:24.04" is library/ubuntu:24.04, as Docker Hub spells it)."""
    for name in names:
        repo = name if "/" in name.split(":")[0] else "library/" + name
        registry.push(layout, repo)
