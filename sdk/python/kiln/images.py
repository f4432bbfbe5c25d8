"""Images: `runtime.images.build(...)` turns a recipe, a Dockerfile (with its context folder) or
an OCI image into a ready image that sandboxes start from (`sandboxes.create(image=...)`).

The build context is packed the same way by this SDK, the TypeScript SDK and the CLI, so one
tree always has one digest and is uploaded once: a ustar archive (entries sorted by path,
directories included, mtime 0, uid/gid 0, no user/group names, mode & 0o7777, symlinks kept,
.dockerignore honoured) inside a gzip member made of stored deflate blocks (mtime 0, no name).
Stored blocks because deflate output differs between zlib builds (Node bundles its own).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import struct
import time
import zlib
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from . import errors
from .client import new_idempotency_key
from .pages import Page

_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
# snake_case keys whose camelCase is not the plain conversion.
_SPECIAL_KEYS = {"memory_mib": "memoryMiB", "disk_mib": "diskMiB", "max_image_mib": "maxImageMiB"}
_END_STATES = frozenset({"ready", "failed", "deleted"})
LogCallback = Callable[[Dict[str, Any]], None]


def wire_keys(fields: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """Top-level snake_case keys to the API's camelCase (values, e.g. env names, untouched)."""
    if fields is None:
        return None
    out: Dict[str, Any] = {}
    for key, value in dict(fields).items():
        if key in _SPECIAL_KEYS:
            key = _SPECIAL_KEYS[key]
        elif "_" in key:
            head, *rest = key.split("_")
            key = head + "".join(p[:1].upper() + p[1:] for p in rest)
        out[key] = value
    return out


def is_image_id(ref: str) -> bool:
    return bool(_UUID_RE.match(ref))


class Image(dict):  # type: ignore[type-arg]
    """An ImageInfo (a dict, as the API sends it) with attribute shortcuts."""

    @property
    def id(self) -> str:
        return self["id"]

    @property
    def name(self) -> Optional[str]:
        return self.get("name")

    @property
    def version(self) -> Optional[int]:
        return self.get("version")

    @property
    def state(self) -> str:
        return self.get("state", "unknown")

    @property
    def tags(self) -> List[str]:
        return list(self.get("tags") or [])

    @property
    def error(self) -> Optional[Dict[str, Any]]:
        return self.get("error")

    def __repr__(self) -> str:
        return f"Image(id={self.get('id')!r}, name={self.name!r}, version={self.version!r}, state={self.state!r})"


# --- .dockerignore ------------------------------------------------------------


def _clean(path: str) -> str:
    """path.Clean for patterns: no leading '/', no '.', '..' folded, no empty parts."""
    parts: List[str] = []
    for p in path.split("/"):
        if p in ("", "."):
            continue
        if p == ".." and parts and parts[-1] != "..":
            parts.pop()
        else:
            parts.append(p)
    return "/".join(parts)


def _pattern_regex(pattern: str) -> "re.Pattern[str]":
    """A Docker (moby/patternmatcher) pattern as a regex: `*` and `?` stay inside one path
    part, `**` spans parts, `[...]` is a class, `\\x` escapes x."""
    out = "^"
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "*":
            if i + 1 < n and pattern[i + 1] == "*":
                i += 2
                if i < n and pattern[i] == "/":
                    i += 1
                out += "[\\s\\S]*" if i >= n else "([\\s\\S]*/)?"
                continue
            out += "[^/]*"
        elif ch == "?":
            out += "[^/]"
        elif ch == "\\":
            if i + 1 < n:
                i += 1
                out += re.escape(pattern[i])
            else:
                out += "\\\\"
        elif ch == "[":
            # A class, as Go's filepath.Match: "^" negates, "\\x" is x, "-" a range; a
            # negated class never matches "/" (nor does any, within one part).
            j = i + 1
            body = ""
            if j < n and pattern[j] == "^":
                body, j = "^/", j + 1
            while j < n and pattern[j] != "]":
                c = pattern[j]
                if c == "\\" and j + 1 < n:
                    j += 1
                    c = pattern[j]
                    body += "\\" + c if c in "\\]^-[" else c
                else:
                    body += "\\" + c if c in "\\[" else c
                j += 1
            if j >= n or body in ("", "^/"):
                raise re.error("unterminated or empty character class")
            out += "[" + body + "]"
            i = j + 1
            continue
        else:
            out += re.escape(ch)
        i += 1
    return re.compile(out + "$")


class DockerIgnore:
    """The rules of a .dockerignore: the last matching line wins, `!` re-includes, a pattern
    that matches a directory matches everything under it."""

    def __init__(self, text: str) -> None:
        self.rules: List[Tuple[bool, "re.Pattern[str]"]] = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            if negate:
                line = line[1:].strip()
            line = _clean(line)
            if not line:
                continue
            try:
                self.rules.append((negate, _pattern_regex(line)))
            except re.error as e:
                raise ValueError(f".dockerignore: bad pattern {raw.strip()!r}: {e}") from None
        self.has_negation = any(neg for neg, _ in self.rules)

    def excluded(self, rel: str) -> bool:
        """Whether `rel` (a '/'-separated path under the context) is left out."""
        parts = rel.split("/")
        prefixes = ["/".join(parts[:k]) for k in range(1, len(parts) + 1)]
        out = False
        for negate, rx in self.rules:
            if any(rx.match(p) for p in prefixes):
                out = not negate
        return out


# --- context packing ------------------------------------------------------------

_BLOCK = 512
_ALWAYS_KEPT = frozenset({".dockerignore", "Dockerfile"})


def _octal(value: int, digits: int, tail: bytes) -> bytes:
    text = format(value, "o")
    if len(text) > digits:
        raise ValueError(f"value {value} does not fit a tar header field")
    return text.rjust(digits, "0").encode() + tail


def _split_name(name: bytes, rel: str) -> Tuple[bytes, bytes]:
    """ustar name/prefix, split at a '/' like libarchive does."""
    if len(name) <= 100:
        return name, b""
    start = len(name) - 100 - 1
    cut = name.find(b"/", max(start, 0))
    if cut == 0:
        cut = name.find(b"/", 1)
    if cut < 0 or cut + 1 == len(name) or cut > 155:
        raise ValueError(f"context path too long for a ustar archive: {rel!r}")
    return name[cut + 1:], name[:cut]


def tar_header(rel: str, kind: str, mode: int, size: int = 0, linkname: str = "") -> bytes:
    """One ustar header block as libarchive's ustar writer makes it."""
    name = rel.encode("utf-8", "surrogateescape") + (b"/" if kind == "5" else b"")
    base, prefix = _split_name(name, rel)
    link = linkname.encode("utf-8", "surrogateescape")
    if len(link) > 100:
        raise ValueError(f"symlink target too long for a ustar archive: {rel!r} -> {linkname!r}")
    h = bytearray(_BLOCK)
    h[0:len(base)] = base
    h[100:108] = _octal(mode & 0o7777, 6, b" \0")
    h[108:116] = _octal(0, 6, b" \0")
    h[116:124] = _octal(0, 6, b" \0")
    h[124:136] = _octal(size, 11, b" ")
    h[136:148] = _octal(0, 11, b" ")
    h[148:156] = b" " * 8
    h[156:157] = kind.encode()
    h[157:157 + len(link)] = link
    h[257:265] = b"ustar\x0000"
    h[329:337] = _octal(0, 6, b" \0")
    h[337:345] = _octal(0, 6, b" \0")
    h[345:345 + len(prefix)] = prefix
    h[148:156] = _octal(sum(h), 6, b"\0 ")
    return bytes(h)


def context_entries(root: str, ignore: Optional[DockerIgnore] = None) -> List[Tuple[str, str]]:
    """(relative path, absolute path) of what the context holds, sorted by path bytes."""
    found: List[Tuple[str, str]] = []

    def walk(dir_abs: str, dir_rel: str) -> None:
        with os.scandir(dir_abs) as it:
            names = sorted((e.name for e in it), key=lambda s: s.encode("utf-8", "surrogateescape"))
        for name in names:
            rel = f"{dir_rel}/{name}" if dir_rel else name
            full = os.path.join(dir_abs, name)
            st = os.lstat(full)
            skip = ignore is not None and rel not in _ALWAYS_KEPT and ignore.excluded(rel)
            if stat.S_ISDIR(st.st_mode):
                if not skip:
                    found.append((rel, full))
                if not skip or (ignore is not None and ignore.has_negation):
                    walk(full, rel)
            elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                if not skip:
                    found.append((rel, full))

    walk(root, "")
    found.sort(key=lambda e: e[0].encode("utf-8", "surrogateescape"))
    return found


def _stored_gzip(data: bytes) -> bytes:
    """A gzip member of stored deflate blocks (≤ 65535 bytes each), mtime 0, no name."""
    out = [b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"]
    pos = 0
    while True:
        chunk = data[pos:pos + 0xFFFF]
        pos += len(chunk)
        final = pos >= len(data)
        out.append(struct.pack("<BHH", 1 if final else 0, len(chunk), len(chunk) ^ 0xFFFF))
        out.append(chunk)
        if final:
            break
    out.append(struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF))
    return b"".join(out)


def pack_context(root: str, dockerignore: Optional[str] = None) -> Tuple[bytes, str]:
    """The gzip'd tar of `root` and its digest "sha256:<hex>". `dockerignore` (text) replaces
    the folder's own .dockerignore when given."""
    if not os.path.isdir(root):
        raise ValueError(f"context_dir {root!r} is not a directory")
    if dockerignore is None:
        path = os.path.join(root, ".dockerignore")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                dockerignore = f.read()
    ignore = DockerIgnore(dockerignore) if dockerignore else None
    parts: List[bytes] = []
    for rel, full in context_entries(root, ignore):
        st = os.lstat(full)
        if stat.S_ISDIR(st.st_mode):
            parts.append(tar_header(rel, "5", st.st_mode))
        elif stat.S_ISLNK(st.st_mode):
            parts.append(tar_header(rel, "2", st.st_mode, linkname=os.readlink(full)))
        else:
            with open(full, "rb") as f:
                data = f.read()
            parts.append(tar_header(rel, "0", st.st_mode, size=len(data)))
            parts.append(data)
            if len(data) % _BLOCK:
                parts.append(b"\0" * (_BLOCK - len(data) % _BLOCK))
    parts.append(b"\0" * (2 * _BLOCK))
    blob = _stored_gzip(b"".join(parts))
    return blob, "sha256:" + hashlib.sha256(blob).hexdigest()


# --- the client -----------------------------------------------------------------


class Registries:
    """`runtime.images.registries`: credentials for pulling from private registries."""

    def __init__(self, transport: Any) -> None:
        self._t = transport

    def set(self, registry: str, *, username: str, password: str) -> Dict[str, Any]:
        body = {"registry": registry, "username": username, "password": password}
        return self._t.request("POST", "/v1/images/registries", json=body,
                               idempotency_key=new_idempotency_key()).json()

    def list(self) -> List[Dict[str, Any]]:
        return self._t.request("GET", "/v1/images/registries").json().get("data", [])

    def delete(self, registry: str) -> Dict[str, Any]:
        return self._t.request("POST", "/v1/images/registries:delete", json={"registry": registry},
                               idempotency_key=new_idempotency_key()).json()


class Images:
    """`runtime.images`."""

    def __init__(self, runtime: Any) -> None:
        self._t = runtime._transport
        self.registries = Registries(self._t)

    def build(self, name: Optional[str] = None, *, recipe: Optional[Mapping[str, Any]] = None,
              dockerfile: Optional[str] = None, context_dir: Optional[str] = None,
              image: Optional[str] = None, tags: Optional[Sequence[str]] = None,
              labels: Optional[Mapping[str, str]] = None, env: Optional[Mapping[str, str]] = None,
              start: Optional[Mapping[str, Any]] = None, build: Optional[Mapping[str, Any]] = None,
              build_args: Optional[Mapping[str, str]] = None, target: Optional[str] = None,
              dockerignore: Optional[str] = None, network: Optional[Mapping[str, Any]] = None,
              cache: bool = True, on_log: Optional[LogCallback] = None, wait: bool = True,
              timeout: Optional[float] = None) -> Image:
        """Builds an image from exactly one of `recipe`, `dockerfile`/`context_dir` or `image`.
        With `wait` it follows the build log (each line to `on_log`) and answers the final
        image; a failed build raises ImageBuildError. `timeout` (seconds) bounds the wait."""
        if dockerfile is None and context_dir is not None:
            path = os.path.join(context_dir, "Dockerfile")
            if not os.path.isfile(path):
                raise ValueError(f"context_dir {context_dir!r} has no Dockerfile and none was given")
            with open(path, encoding="utf-8") as f:
                dockerfile = f.read()
        sources = [s for s, v in (("recipe", recipe), ("dockerfile", dockerfile), ("image", image))
                   if v is not None]
        if len(sources) != 1:
            raise ValueError("build needs exactly one of recipe=, dockerfile= (or context_dir=) and image="
                             + (f"; got {', '.join(sources)}" if sources else ""))
        if name is None and image is None:
            raise ValueError("build needs name= (only an image= build may omit it)")
        body: Dict[str, Any] = {}
        if name is not None:
            body["name"] = name
        if recipe is not None:
            body["recipe"] = wire_keys(recipe)
        if image is not None:
            body["image"] = image
        if dockerfile is not None:
            body["dockerfile"] = dockerfile
            if context_dir is not None:
                body["context"] = self.upload_context(context_dir, dockerignore=dockerignore)
            if build_args is not None:
                body["buildArgs"] = dict(build_args)
            if target is not None:
                body["target"] = target
            if dockerignore is not None:
                body["dockerignore"] = dockerignore
        elif build_args is not None or target is not None:
            raise ValueError("build_args= and target= go with a dockerfile build")
        for key, value in (("tags", list(tags) if tags is not None else None),
                           ("labels", dict(labels) if labels is not None else None),
                           ("env", dict(env) if env is not None else None),
                           ("build", wire_keys(build)), ("network", wire_keys(network))):
            if value is not None:
                body[key] = value
        if start is not None:
            body["start"] = wire_keys(start)
        if not cache:
            body["cache"] = False
        info = Image(self._t.request("POST", "/v1/images", json=body,
                                     idempotency_key=new_idempotency_key()).json())
        if not wait:
            return info
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        self.follow_logs(info.id, on_log, deadline=deadline)
        final = self.get(info.id)
        if final.state == "failed":
            raise ImageBuildError.of(final)
        return final

    def upload_context(self, context_dir: str, *, dockerignore: Optional[str] = None) -> str:
        """Packs `context_dir`, uploads it unless the daemon has it already; its digest."""
        blob, digest = pack_context(context_dir, dockerignore)
        missing = self._t.request("POST", "/v1/images/context/missing", json={"digests": [digest]},
                                  idempotency_key=new_idempotency_key()).json().get("missing") or []
        if digest in missing:
            self._t.request("PUT", f"/v1/images/context/{digest}", data=blob,
                            headers={"Content-Type": "application/gzip"})
        return digest

    def get(self, id_or_ref: str) -> Image:
        """By id, else resolved as a ref (name, name:tag, name@version)."""
        if is_image_id(id_or_ref):
            return Image(self._t.request("GET", f"/v1/images/{id_or_ref}").json())
        return self.resolve(id_or_ref)

    def resolve(self, ref: str) -> Image:
        return Image(self._t.request("GET", "/v1/images/resolve", query={"ref": ref}).json())

    def list(self, *, name: Optional[str] = None, state: Optional[str] = None,
             limit: Optional[int] = None) -> "Page":
        """Images newest first, walking every page (up to `limit` in all)."""
        out = Page()
        cursor: Optional[str] = None
        while True:
            page_size = 100 if limit is None else max(1, min(100, limit - len(out)))
            answer = self._t.request("GET", "/v1/images", query={
                "name": name, "state": state, "limit": page_size, "cursor": cursor}).json()
            out.extend(Image(info) for info in answer.get("data", []))
            cursor = answer.get("nextCursor")
            if not cursor or (limit is not None and len(out) >= limit):
                out.next_cursor = cursor
                out.has_more = bool(cursor)
                return out

    def versions(self, name: str) -> List[Image]:
        """Every version of `name`, newest first."""
        return list(self.list(name=name))

    def _id(self, ref: str) -> str:
        return ref if is_image_id(ref) else self.resolve(ref).id

    def _post(self, ref: str, verb: str, body: Dict[str, Any]) -> Dict[str, Any]:
        return self._t.request("POST", f"/v1/images/{self._id(ref)}{verb}", json=body,
                               idempotency_key=new_idempotency_key()).json()

    def tag(self, ref: str, tag: str) -> Image:
        return Image(self._post(ref, ":tag", {"tag": tag}))

    def untag(self, ref: str, tag: str) -> Image:
        return Image(self._post(ref, ":untag", {"tag": tag}))

    def delete(self, ref: str) -> Image:
        return Image(self._post(ref, ":delete", {}))

    def pool(self, ref: str, size: int) -> Dict[str, Any]:
        """Keeps `size` warm sandboxes of the image ready (0 = off); {size, ready}."""
        return self._post(ref, ":pool", {"size": int(size)})

    def prune(self) -> Dict[str, Any]:
        """Drops unused layers and build cache: {layersRemoved, cacheEntriesRemoved, bytesFreed}."""
        return self._t.request("POST", "/v1/images:prune", json={},
                               idempotency_key=new_idempotency_key()).json()

    def logs(self, image_id: str, after: int = 0, *, limit: Optional[int] = None,
             follow: bool = False) -> Dict[str, Any]:
        """One read of the build log: {lines, nextAfter, state, truncated, done}."""
        query = {"after": int(after), "limit": limit, "follow": True if follow else None}
        timeout = self._t.timeout + 25 if follow else None
        return self._t.request("GET", f"/v1/images/{image_id}/logs", query=query, timeout=timeout).json()

    def follow_logs(self, image_id: str, on_log: Optional[LogCallback] = None, after: int = 0, *,
                    deadline: Optional[float] = None) -> str:
        """Reads the log until the build ends, each line to `on_log`; the final state."""
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                raise errors.TimeoutError(f"image {image_id}: the build did not end in time",
                                          code="request_timeout")
            page = self.logs(image_id, after, follow=True)
            for line in page.get("lines") or []:
                if on_log is not None:
                    on_log(line)
            next_after = page.get("nextAfter")
            if isinstance(next_after, int):
                after = next_after
            if page.get("done") or page.get("state") in _END_STATES:
                return str(page.get("state"))


ImageBuildError = errors.ImageBuildError
