"""`sandbox.files`: read, write, list and move files and whole folders."""

from __future__ import annotations

import hashlib
import os
import stat as _stat
import tarfile
import tempfile
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from . import errors
from .client import new_idempotency_key
from .localfile import write_whole
from .watch import WatchHandle, Watches

if TYPE_CHECKING:
    from .sandbox import Sandbox

_SPOOL_BYTES = 8 << 20  # archives up to this size are built in memory


def _mode(mode: Union[int, str, None]) -> Optional[str]:
    if mode is None:
        return None
    return format(mode, "o") if isinstance(mode, int) else str(mode)


class Files:
    """File operations inside one sandbox. Paths are absolute."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sandbox = sandbox
        self._t = sandbox._t
        self._base = sandbox._path + "/files"
        self.watches = Watches(self._t, sandbox._path)

    def watch(self, path: str, recursive: bool = False, **options: Any) -> WatchHandle:
        """Starts a watch of `path` (a folder or a file): `handle.get_new_events(wait_ms)`
        polls, `handle.events()` follows, `handle.stop()` ends it (so does `with`). Options:
        events, include, exclude, batch_ms, timeout_ms, max_watches, id."""
        return self.watches.start(path, recursive=recursive, **options)

    def write(self, path: str, data: Union[str, bytes], mode: Union[int, str, None] = None) -> Dict[str, Any]:
        """Writes a whole file atomically, making parents; `mode` like 0o755 or "755"."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        r = self._t.request("PUT", self._base + "/content", query={"path": path, "mode": _mode(mode)},
                            data=bytes(data))
        return r.json()

    def read(self, path: str) -> bytes:
        """The file's bytes, checked against the length and SHA-256 the daemon announces."""
        last: Dict[str, Any] = {}
        for _ in range(3):
            r = self._t.request("GET", self._base + "/content", query={"path": path},
                                headers={"Accept": "application/octet-stream"})
            body = r.body
            length = r.headers.get("x-content-length")
            digest = r.headers.get("x-content-sha256")
            if length is not None and int(length) != len(body):
                last = {"received": len(body), "expected": int(length)}
                continue
            if digest and hashlib.sha256(body).hexdigest() != digest.lower():
                last = {"received": len(body), "expected": int(length or len(body)), "sha256": "mismatch"}
                continue
            return body
        raise errors.KilnError(f"{path}: download incomplete after 3 tries", code="download_incomplete",
                               details=last)

    read_bytes = read

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def list(self, path: str = "/workspace", *, depth: Optional[int] = None, glob: Optional[str] = None,
             hidden: Optional[bool] = None, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """FileEntry dicts of a folder (`depth` levels, default 1). `glob` keeps entries whose
        path relative to `path` matches (`*` and `?` stay within a name, `**` spans folders;
        without `depth` it searches as deep as the pattern reaches, 16 levels for `**`);
        `hidden=False` leaves out names starting with "." and what is under them; `limit` caps
        how many entries come back."""
        r = self._t.request("GET", self._base + "/list", query={
            "path": path, "depth": depth, "glob": glob, "hidden": hidden, "limit": limit})
        return r.json()["data"]

    def glob(self, pattern: str, root: str = "/workspace") -> List[Dict[str, Any]]:
        """Entries under `root` whose relative path matches `pattern`, e.g. "**/*.csv"."""
        return self.list(root, glob=pattern)

    def stat(self, path: str) -> Dict[str, Any]:
        """FileEntry plus `exists: True`, or `{"exists": False, "path"}`."""
        return self._t.request("GET", self._base + "/stat", query={"path": path}).json()

    def exists(self, path: str) -> bool:
        return bool(self.stat(path).get("exists"))

    def mkdir(self, path: str, parents: bool = True) -> Dict[str, Any]:
        return self._post(":mkdir", {"path": path, "parents": parents})

    def remove(self, path: str, recursive: bool = False) -> bool:
        """True when something was removed."""
        return bool(self._post(":remove", {"path": path, "recursive": recursive}).get("removed"))

    def rename(self, source: str, target: str, overwrite: bool = False) -> Dict[str, Any]:
        return self._post(":rename", {"from": source, "to": target, "overwrite": overwrite})

    def _post(self, verb: str, body: Dict[str, Any]) -> Dict[str, Any]:
        return self._t.request("POST", self._base + verb, json=body,
                               idempotency_key=new_idempotency_key()).json()

    # --- folders -----------------------------------------------------------

    def archive(self, path: str, gzip: bool = True) -> bytes:
        """A tar (gzip'ed by default) of a folder."""
        with self._t.stream("GET", self._base + "/archive", query={"path": path, "gzip": gzip},
                            headers={"Accept": "application/octet-stream"}) as s:
            return s.read()

    def unarchive(self, path: str, data: Any) -> Dict[str, Any]:
        """Unpacks a tar or tar.gz (bytes or a binary file) into a folder (created)."""
        return self._t.request("PUT", self._base + "/archive", query={"path": path}, data=data,
                               timeout=max(self._t.timeout, 600.0)).json()

    def upload(self, local_path: Union[str, "os.PathLike[str]"], remote_path: str) -> Dict[str, Any]:
        """Copies a local file (keeping its permission bits) or a folder's contents into the sandbox."""
        local = os.fspath(local_path)
        st = os.stat(local)
        if not _stat.S_ISDIR(st.st_mode):
            with open(local, "rb") as f:
                return self.write(remote_path, f.read(), mode=st.st_mode & 0o777)
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as buf:
            with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                for name in sorted(os.listdir(local)):
                    tar.add(os.path.join(local, name), arcname=name, filter=_as_user)
            buf.seek(0)
            return self.unarchive(remote_path, buf)

    def download(self, remote_path: str, local_path: Union[str, "os.PathLike[str]"]) -> str:
        """Copies a sandbox file or folder to `local_path`; returns that path. Archive entries
        that would land outside `local_path` are refused (`unsafe_archive`)."""
        local = os.fspath(local_path)
        info = self.stat(remote_path)
        if not info.get("exists"):
            raise errors.NotFoundError(f"{remote_path}: no such file or folder", code="file_not_found",
                                       status=404, details={"path": remote_path})
        if info.get("type") != "directory":
            data = self.read(remote_path)
            mode = info.get("mode")
            return write_whole(local, lambda f: f.write(data),
                               int(mode, 8) & 0o777 if isinstance(mode, str) and mode.isdigit() else None)
        os.makedirs(local, exist_ok=True)
        with self._t.stream("GET", self._base + "/archive", query={"path": remote_path, "gzip": True},
                            headers={"Accept": "application/octet-stream"},
                            timeout=max(self._t.timeout, 600.0)) as s:
            _safe_extract(s.raw, local)
        return local


def _as_user(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 1000
    info.uname = info.gname = "user"
    return info


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _safe_extract(fileobj: Any, dest: str) -> None:
    """Streams a tar.gz into `dest`, refusing entries (or links) that resolve outside it."""
    root = os.path.realpath(dest)
    has_filter = hasattr(tarfile, "data_filter")
    with tarfile.open(fileobj=fileobj, mode="r|*") as tar:
        for member in tar:
            name = member.name
            target = os.path.realpath(os.path.join(root, name))
            bad = os.path.isabs(name) or not _inside(root, target)
            if member.issym() or member.islnk():
                base = root if member.islnk() else os.path.dirname(os.path.join(root, name))
                link = os.path.realpath(os.path.join(base, member.linkname))
                bad = bad or os.path.isabs(member.linkname) or not _inside(root, link)
            if bad:
                raise errors.KilnError(f"archive entry {name!r} would land outside {dest}",
                                       code="unsafe_archive", details={"path": name})
            if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
                continue  # devices and fifos are never written
            if has_filter:
                tar.extract(member, root, filter="data")
            else:
                member.mode &= 0o777
                tar.extract(member, root)
