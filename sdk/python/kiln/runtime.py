"""Runtime: the client. `runtime.sandboxes` creates and finds sandboxes, `runtime.snapshots`
manages snapshots."""

from __future__ import annotations

import difflib
import http.client
import math
import os
import random
import re
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from . import config, errors
from .client import Transport, new_idempotency_key
from .images import Images
from .localfile import write_whole
from .pages import Page  # noqa: F401  (kiln.runtime.Page, as before)
from .sandbox import Sandbox

# Create fields: kiln's own, then the rest of the public API's (the daemon judges those).
_CREATE_FIELDS = {
    "name": "name", "labels": "labels", "vcpu": "vcpu", "memory_mib": "memoryMiB",
    "disk_mib": "diskMiB", "timeout_seconds": "timeoutSeconds", "on_lease_end": "onLeaseEnd",
    "max_cost_micros": "maxCostMicros", "network": "network", "snapshot": "snapshot",
    "snapshot_id": "snapshot", "env": "env",
    "funding": "funding", "region": "region", "cpu": "cpu", "cpu_floor_millis": "cpuFloorMillis",
    "pausable": "pausable", "idle_pause_seconds": "idlePauseSeconds", "auto_wake": "autoWake",
    "persistent": "persistent", "max_total_cost_micros": "maxTotalCostMicros",
    "get_or_create": "getOrCreate", "image": "image", "volumes": "volumes", "tailscale": "tailscale",
    "sudo": "sudo", "pause_memory": "pauseMemory",
}
#: Every `state` a SandboxInfo may carry.
STATES = ("starting", "running", "pausing", "paused", "resuming", "stopping", "stopped")
# States a sandbox passes through on its way to running.
_ON_THE_WAY = ("starting", "resuming")
_START_WAIT_SECONDS = 60.0
_START_POLL_SECONDS = 0.25
_CAMEL = set(_CREATE_FIELDS.values())
_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
CapacityCallback = Callable[[errors.KilnError, float], None]


def create_body(fields: Mapping[str, Any]) -> Dict[str, Any]:
    """The JSON of a create from snake_case (or camelCase) keyword fields; None values dropped."""
    body: Dict[str, Any] = {}
    for name, value in fields.items():
        wire = _CREATE_FIELDS.get(name) or (name if name in _CAMEL else None)
        if wire is None:
            close = difflib.get_close_matches(name, list(_CREATE_FIELDS) + list(_CAMEL), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"unknown sandbox field {name!r}{hint}")
        if value is None:
            continue
        if wire == "volumes":
            value = [{_camel(k): v for k, v in dict(vol).items()} for vol in value]
        body[wire] = dict(value) if wire in ("labels", "env", "network") and value is not None else value
    return body


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def check_idempotency_key(key: str) -> str:
    if not _KEY_RE.match(key):
        raise ValueError("idempotency_key: 1-128 chars, a letter or digit first, then letters, "
                         "digits and _ . : -")
    return key


class Sandboxes:
    """`runtime.sandboxes`."""

    def __init__(self, runtime: "Runtime") -> None:
        self._rt = runtime
        self._t = runtime._transport

    def create(self, *, wait: bool = True, idempotency_key: Optional[str] = None,
               wait_for_capacity: Optional[float] = None, on_capacity_wait: Optional[CapacityCallback] = None,
               prefer_wait: Optional[int] = None, **fields: Any) -> Sandbox:
        """Creates a sandbox and answers once it runs. Fields: vcpu, memory_mib, disk_mib,
        timeout_seconds, on_lease_end, labels, env, name, snapshot, image (id, name, name:tag or
        name@version), max_cost_micros, network, pausable, idle_pause_seconds, auto_wake,
        persistent, max_total_cost_micros, sudo, pause_memory, get_or_create, funding and region (accepted,
        ignored by a local daemon).

        Past capacity (409 `no_capacity`/`quota_exceeded`) it waits in the daemon's line
        (`Prefer: wait=N`, N ≤ 120 s each try, or `prefer_wait`) and retries with the same
        Idempotency-Key and body until `wait_for_capacity` seconds (default: the runtime's) end,
        calling `on_capacity_wait(error, sleep_seconds)` before each sleep.

        `wait=False` sends no `Prefer: wait` and answers as soon as the daemon does, possibly
        while the sandbox is still `starting`; with `wait=True` a `starting` answer is followed
        until the sandbox runs (else `start_failed`)."""
        body = create_body(fields)
        if not wait:
            r = self._t.request("POST", "/v1/sandboxes", json=body,
                                idempotency_key=check_idempotency_key(idempotency_key) if idempotency_key
                                else new_idempotency_key())
            return self._rt._sandbox(r.json())
        key = check_idempotency_key(idempotency_key) if idempotency_key else new_idempotency_key()
        budget = self._rt.wait_for_capacity if wait_for_capacity is None else float(wait_for_capacity)
        deadline = time.monotonic() + max(0.0, budget)
        attempt = 0
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            wait = remaining if prefer_wait is None else min(float(prefer_wait), remaining)
            wait_s = int(min(120, math.ceil(wait)))
            try:
                r = self._t.request("POST", "/v1/sandboxes", json=body, headers={"Prefer": f"wait={wait_s}"},
                                    idempotency_key=key, timeout=self._t.timeout + wait_s)
                return self._until_running(self._rt._sandbox(r.json()))
            except errors.KilnError as e:
                if e.code not in errors.ROOM_CODES or (e.details or {}).get("field") == "count":
                    raise
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise
                if e.retry_after_ms is not None:
                    sleep = e.retry_after_ms / 1000.0
                else:
                    sleep = min(8.0, 0.5 * 2 ** attempt) * random.uniform(0.75, 1.25)
                sleep = min(sleep, remaining)
                if on_capacity_wait is not None:
                    on_capacity_wait(e, sleep)
                time.sleep(sleep)
                attempt += 1

    def _until_running(self, sbx: Sandbox) -> Sandbox:
        deadline = time.monotonic() + _START_WAIT_SECONDS
        while sbx.state in _ON_THE_WAY and time.monotonic() < deadline:
            time.sleep(_START_POLL_SECONDS)
            sbx.refresh()
        if sbx.state != "running":
            raise errors.KilnError(f"sandbox {sbx.id} did not start (state {sbx.state})", code="start_failed",
                                   details={"sandboxId": sbx.id, "state": sbx.state,
                                            "stopReason": sbx.info.get("stopReason")})
        return sbx

    def get_or_create(self, name: str, **fields: Any) -> Sandbox:
        """The live sandbox called `name` (woken if paused; its `info["reused"]` is True), or a
        new one made with `fields` (which apply only when creating)."""
        if not name:
            raise ValueError("get_or_create needs a name")
        fields.pop("get_or_create", None)
        fields.pop("getOrCreate", None)
        return self.create(name=name, get_or_create=True, **fields)

    def get(self, sandbox_id: str) -> Sandbox:
        return self._rt._sandbox(self._t.request("GET", f"/v1/sandboxes/{sandbox_id}").json())

    def list(self, *, labels: Optional[Mapping[str, str]] = None, state: Union[str, Iterable[str], None] = None,
             include_stopped: bool = False, name: Optional[str] = None, limit: Optional[int] = None) -> Page:
        """Sandboxes oldest first, walking every page (up to `limit` in all)."""
        query: Dict[str, Any] = {
            "label": [f"{k}:{v}" for k, v in (labels or {}).items()] or None,
            "state": [state] if isinstance(state, str) else (list(state) if state else None),
            "includeStopped": True if include_stopped else None,
            "name": name,
        }
        out = Page()
        cursor: Optional[str] = None
        while True:
            page_size = 100 if limit is None else max(1, min(100, limit - len(out)))
            answer = self._t.request("GET", "/v1/sandboxes",
                                     query={**query, "limit": page_size, "cursor": cursor}).json()
            out.extend(self._rt._sandbox(info) for info in answer.get("data", []))
            cursor = answer.get("nextCursor")
            if not cursor or (limit is not None and len(out) >= limit):
                out.next_cursor = cursor
                out.has_more = bool(cursor)
                return out

    def delete(self, sandbox_id: str) -> Dict[str, Any]:
        return self._t.request("DELETE", f"/v1/sandboxes/{sandbox_id}",
                               idempotency_key=new_idempotency_key()).json()

    def stop_all(self, *, labels: Mapping[str, str]) -> Dict[str, List[str]]:
        """Stops every running sandbox carrying all these labels (at least one label)."""
        if not labels:
            raise ValueError("stop_all needs at least one label")
        stopped, failed = [], []
        for sbx in self.list(labels=labels):
            try:
                sbx.stop()
                stopped.append(sbx.id)
            except errors.KilnError:
                failed.append(sbx.id)
        return {"stopped": stopped, "failed": failed}


class Snapshots:
    """`runtime.snapshots`."""

    def __init__(self, runtime: "Runtime") -> None:
        self._t = runtime._transport

    def create(self, sandbox_id: str, **fields: Any) -> Dict[str, Any]:
        body = {_camel(k): v for k, v in fields.items() if v is not None}
        return self._t.request("POST", f"/v1/sandboxes/{sandbox_id}:snapshot", json=body,
                               idempotency_key=new_idempotency_key()).json()

    def get(self, snapshot_id: str) -> Dict[str, Any]:
        return self._t.request("GET", f"/v1/snapshots/{snapshot_id}").json()

    def list(self, *, sandbox_id: Optional[str] = None, name: Optional[str] = None) -> List[Dict[str, Any]]:
        return self._t.request("GET", "/v1/snapshots", query={"sandboxId": sandbox_id, "name": name}).json()["data"]

    def delete(self, snapshot_id: str) -> Dict[str, Any]:
        return self._t.request("POST", f"/v1/snapshots/{snapshot_id}:delete", json={},
                               idempotency_key=new_idempotency_key()).json()

    def pool(self, snapshot_id: str, size: int) -> Dict[str, Any]:
        """Keeps `size` restored copies ready so creates from the snapshot are hand-outs (0 = off)."""
        return self._t.request("POST", f"/v1/snapshots/{snapshot_id}:pool", json={"size": int(size)},
                               idempotency_key=new_idempotency_key()).json()

    def export(self, snapshot_id: str, path: Union[str, "os.PathLike[str]"],
               skip_layers: Optional[Iterable[str]] = None) -> str:
        """Writes the snapshot as a tar (checkpoint, checksums and, for a snapshot of an image,
        its layers) to `path`, for `import_` on another kilnd; returns the path. The file
        appears only once whole. `skip_layers`: layer sha256s the receiver holds (its
        `layers()`), listed but not sent."""
        target = f"/v1/snapshots/{snapshot_id}/archive"
        if skip_layers:
            target += "?skipLayers=" + ",".join(sorted(set(skip_layers)))

        def fill(f: Any) -> None:
            with self._t.stream("GET", target, headers={"Accept": "application/x-tar"},
                                timeout=max(self._t.timeout, 600.0)) as s:
                want = s.headers.get("x-content-length")
                got = 0
                try:
                    while True:
                        chunk = s.read(1 << 20)
                        if not chunk:
                            break
                        f.write(chunk)
                        got += len(chunk)
                except (OSError, http.client.HTTPException) as e:
                    raise errors.ConnectionError(f"snapshot {snapshot_id}: the export broke off: {e}",
                                                 code="connection_error") from e
                if want is not None and int(want) != got:
                    raise errors.ConnectionError(
                        f"snapshot {snapshot_id}: the export ended after {got} of {want} bytes",
                        code="connection_error")

        return write_whole(os.fspath(path), fill)

    def layers(self) -> List[str]:
        """The sha256s of the image layers this kilnd holds, which an export for it may skip
        (admin key only)."""
        found = self._t.request("GET", "/v1/images:layers").json()["layers"]
        return sorted({entry["sha256"] for entry in found})

    def import_(self, path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
        """Imports a tar written by `export` (here or on another kilnd) as this key's snapshot,
        keeping its id, name, labels and network rules; every checksum is checked first. Importing
        the same snapshot again answers its record (nothing is written twice), so it is retried."""
        with open(os.fspath(path), "rb") as f:
            return self._t.request("POST", "/v1/snapshots:import", data=f,
                                   headers={"Content-Type": "application/x-tar"},
                                   timeout=max(self._t.timeout, 600.0), retry=True).json()


class Limits:
    """`runtime.limits`: what this key may spend."""

    def __init__(self, runtime: "Runtime") -> None:
        self._t = runtime._transport

    def get(self) -> Dict[str, Any]:
        """`{"access", "daily": {"limitMicros", "usedMicros", "remainingMicros", "window"}, "trial"}`
        (limit and remaining are None without a daily limit; a local daemon has no trial)."""
        return self._t.request("GET", "/v1/limits").json()


class Runtime:
    """A client of one kilnd: `Runtime(api_key=None, base_url=None, *, timeout=300, max_retries=4,
    max_connections=32, wait_for_capacity=120)`, the public runtime client's order. Arguments
    win over KILN_API_URL/KILN_API_KEY (then RUNTIME_API_URL/RUNTIME_API_KEY); with nothing set it
    reaches http://127.0.0.1:7070 with the local admin key. Thread-safe; each thread keeps one
    keep-alive connection, and at most `max_connections` whole-body calls are in flight at once.

    kiln's older order `Runtime(url, key)` still works: a first argument holding "://" is a URL."""

    def __init__(self, api_key: Optional[str] = None, base_url: Optional[str] = None, *,
                 timeout: float = 300.0, max_retries: int = 4, max_connections: int = 32,
                 wait_for_capacity: float = 120, api_url: Optional[str] = None) -> None:
        if api_key is not None and "://" in api_key:
            if base_url is not None and "://" in base_url:
                raise ValueError("api_key holds a URL; pass the key first: Runtime(api_key, base_url)")
            api_key, base_url = base_url, api_key  # kiln's older (url, key) order
        if base_url is not None and api_url is not None and base_url != api_url:
            raise ValueError("give base_url or api_url, not both")
        base_url = base_url or api_url
        if base_url is not None and "://" not in base_url:
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r} (pass keys as api_key=)")
        url, key = config.resolve(base_url, api_key)
        self.api_url = url.rstrip("/")
        self.base_url = self.api_url
        self.wait_for_capacity = float(wait_for_capacity)
        self._transport = Transport(url, key, timeout=timeout, max_retries=max_retries,
                                    max_connections=max_connections)
        self.sandboxes = Sandboxes(self)
        self.sandbox = self.sandboxes
        self.snapshots = Snapshots(self)
        self.images = Images(self)
        self.image = self.images
        self.limits = Limits(self)

    @property
    def max_connections(self) -> int:
        return self._transport.max_connections

    @property
    def timeout(self) -> float:
        return self._transport.timeout

    def request(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
                json: Any = None, data: Optional[bytes] = None, headers: Optional[Mapping[str, str]] = None,
                idempotency_key: Optional[str] = None, timeout: Optional[float] = None) -> Any:
        """A raw call with auth, retries and error mapping; the parsed JSON answer (or bytes)."""
        r = self._transport.request(method, path, query=query, json=json, data=data, headers=headers,
                                    idempotency_key=idempotency_key, timeout=timeout)
        if (r.headers.get("Content-Type") or "").startswith("application/json"):
            return r.json()
        return r.body

    def health(self) -> Dict[str, Any]:
        return self._transport.request("GET", "/v1/health").json()

    def _sandbox(self, info: Dict[str, Any]) -> Sandbox:
        """The Sandbox object for a SandboxInfo (kiln.ray's runtime makes its own kind)."""
        return Sandbox(info, self)

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Runtime(api_url={self.api_url!r})"


_defaults: Dict[Tuple[str, Optional[str]], Runtime] = {}
_defaults_lock = threading.Lock()


def default_runtime() -> Runtime:
    """A shared Runtime for the current environment settings (used by `Sandbox.create`)."""
    url, key = config.resolve()
    with _defaults_lock:
        rt = _defaults.get((url, key))
        if rt is None:
            rt = _defaults[(url, key)] = Runtime(key, url)
        return rt
