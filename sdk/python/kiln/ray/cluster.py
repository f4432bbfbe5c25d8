"""The cluster side of kiln.ray: finding each node's agent, a Runtime bound to
a node's kilnd whose sandboxes carry cluster-wide ids, and the keep-alive that
ties a sandbox to the process that made it."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from typing import Any, Dict, List, Optional, Set, Tuple

import ray

from .. import errors
from ..runtime import Runtime, Sandboxes, Snapshots
from ..images import Images
from ..runtime import Limits
from ..sandbox import Sandbox
from . import ids

NAMESPACE = "kiln"
RENEW_INTERVAL_SECONDS = 2.0


class NodeLostError(errors.ConnectionError):
    """The node holding a sandbox is gone (Ray reports it dead, or its kilnd does not answer):
    the sandbox and its work are lost; retry the episode elsewhere (`map_rollouts` does)."""


def agent_name(tag: str) -> str:
    return f"kiln-node-{tag}"


def agent(tag: str) -> Any:
    try:
        return ray.get_actor(agent_name(tag), namespace=NAMESPACE)
    except ValueError:
        raise NodeLostError(f"no kilnd is attached on node {tag} (kiln.ray.attach was not run there, "
                            "or the node is gone)", code="node_lost", details={"node": tag}) from None


def node_alive(tag: str) -> bool:
    for n in ray.nodes():
        if n.get("NodeID", "").startswith(tag):
            return bool(n.get("Alive"))
    return False


# --- per-process state ------------------------------------------------------

_mu = threading.Lock()
_addresses: Dict[str, Tuple[str, Optional[str]]] = {}   # tag -> (url, key)
_runtimes: Dict[str, "ClusterRuntime"] = {}
_owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
_owned: Dict[str, Set[str]] = {}  # tag -> kilnd ids this process keeps alive
_renewer: Optional[threading.Thread] = None


def address(tag: str) -> Tuple[str, Optional[str]]:
    with _mu:
        if tag in _addresses:
            return _addresses[tag]
    url, key, _ = ray.get(agent(tag).address.remote())
    with _mu:
        _addresses[tag] = (url, key)
    return url, key


def runtime_for(tag: str) -> "ClusterRuntime":
    """The Runtime of the kilnd on node `tag` (one per process)."""
    with _mu:
        rt = _runtimes.get(tag)
    if rt is None:
        url, key = address(tag)
        rt = ClusterRuntime(tag, url, key)
        with _mu:
            rt = _runtimes.setdefault(tag, rt)
    return rt


def keep(tag: str, local_id: str) -> None:
    """Renews the sandbox with its node's agent while this process lives."""
    global _renewer
    with _mu:
        _owned.setdefault(tag, set()).add(local_id)
        if _renewer is None:
            _renewer = threading.Thread(target=_renew_loop, daemon=True, name="kiln-ray-renew")
            _renewer.start()
    try:
        agent(tag).renew.remote(_owner, [local_id])
    except NodeLostError:
        pass


def unkeep(tag: str, local_id: str) -> None:
    with _mu:
        _owned.get(tag, set()).discard(local_id)
    try:
        agent(tag).release.remote(_owner, [local_id])
    except NodeLostError:
        pass


def _renew_loop() -> None:
    stop = threading.Event()
    # Agent handles, looked up once: a call on a handle after ray.shutdown() raises, where a
    # lookup (ray.get_actor) would connect this process to Ray again.
    handles: Dict[str, Any] = {}
    while not stop.wait(RENEW_INTERVAL_SECONDS):
        if not ray.is_initialized():
            handles.clear()
            continue
        with _mu:
            owned = {tag: sorted(s) for tag, s in _owned.items() if s}
        for tag, local_ids in owned.items():
            try:
                if tag not in handles:
                    handles[tag] = agent(tag)
                handles[tag].renew.remote(_owner, local_ids)
            except Exception:  # noqa: BLE001 -- a lost node must not stop renewing the others
                handles.pop(tag, None)  # looked up again next time (an agent attached anew)


# --- a node's Runtime ---------------------------------------------------------

class _NodeTransport:
    """The node kilnd's transport; a connection failure becomes NodeLostError."""

    def __init__(self, inner: Any, tag: str, url: str) -> None:
        self._inner, self._tag, self._url = inner, tag, url

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def request(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._inner.request(*args, **kwargs)
        except errors.ConnectionError as e:
            why = "Ray reports the node dead" if not node_alive(self._tag) else "its kilnd does not answer"
            raise NodeLostError(f"node {self._tag} ({self._url}) is lost: {why}; its sandboxes are gone "
                                f"({e})", code="node_lost", details={"node": self._tag, "url": self._url}) from e

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.stream(*args, **kwargs)


class RaySandbox(Sandbox):
    """A Sandbox whose `id` is cluster-wide (`<node tag>.<kilnd id>`); `local_id` is kilnd's."""

    def __init__(self, info: Dict[str, Any], runtime: "ClusterRuntime") -> None:
        super().__init__(info, runtime)
        self.local_id = self.id
        self.node = runtime.tag
        self.id = ids.compose(runtime.tag, self.local_id)
        self._keep_alive = runtime.keep_alive

    def adopt(self) -> "RaySandbox":
        """Keeps this sandbox alive while this process lives (and stops it once this process
        and every other owner are gone). Creates and forks adopt what they make."""
        if self.state != "stopped":
            keep(self.node, self.local_id)
        return self

    def fork(self, count: Optional[int] = None, **kwargs: Any) -> Any:
        copies = super().fork(count, **kwargs)
        for c in copies if isinstance(copies, list) else [copies]:
            if self._keep_alive:
                c.adopt()
        return copies

    def stop(self, wait: bool = True, idempotency_key: Optional[str] = None) -> Dict[str, Any]:
        try:
            return super().stop(wait=wait, idempotency_key=idempotency_key)
        finally:
            unkeep(self.node, self.local_id)

    def snapshot(self, **kwargs: Any) -> Dict[str, Any]:
        return _global_snapshot(self.node, super().snapshot(**kwargs))


def _global_snapshot(tag: str, snap: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(snap)
    out["localId"] = snap["id"]
    out["id"] = ids.compose(tag, snap["id"])
    return out


class ClusterSandboxes(Sandboxes):
    def create(self, **fields: Any) -> Sandbox:  # type: ignore[override]
        rt: ClusterRuntime = self._rt  # type: ignore[assignment]
        for name in ("snapshot", "snapshot_id"):
            if fields.get(name):
                fields[name] = rt.local_snapshot(fields[name])
        sbx = super().create(**fields)
        if rt.keep_alive and isinstance(sbx, RaySandbox):
            sbx.adopt()
        return sbx

    def get(self, sandbox_id: str) -> Sandbox:
        tag, local = ids.split(sandbox_id)
        rt: ClusterRuntime = self._rt  # type: ignore[assignment]
        if tag != rt.tag:
            return runtime_for(tag).sandboxes.get(sandbox_id)
        return super().get(local)


class ClusterSnapshots(Snapshots):
    def create(self, sandbox_id: str, **fields: Any) -> Dict[str, Any]:
        tag, local = ids.split(sandbox_id)
        return _global_snapshot(tag, Snapshots.create(runtime_for(tag).snapshots, local, **fields))

    def get(self, snapshot_id: str) -> Dict[str, Any]:
        tag, local = ids.split(snapshot_id)
        return _global_snapshot(tag, Snapshots.get(runtime_for(tag).snapshots, local))

    def delete(self, snapshot_id: str) -> Dict[str, Any]:
        tag, local = ids.split(snapshot_id)
        return Snapshots.delete(runtime_for(tag).snapshots, local)


class ClusterRuntime(Runtime):
    """kiln's Runtime bound to one node's kilnd. Sandboxes it makes run there and carry
    cluster-wide ids; `sandboxes.get(id)` and snapshot calls route any id to its node; a create
    from another node's snapshot fetches that snapshot here first (once per node)."""

    def __init__(self, tag: str, url: str, key: Optional[str], *, keep_alive: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(key, url, **kwargs)
        self.tag = tag
        self.keep_alive = keep_alive
        self._transport = _NodeTransport(self._transport, tag, self.api_url)  # type: ignore[assignment]
        self.sandboxes = ClusterSandboxes(self)
        self.sandbox = self.sandboxes
        self.snapshots = ClusterSnapshots(self)
        self.images = Images(self)
        self.image = self.images
        self.limits = Limits(self)

    def _sandbox(self, info: Dict[str, Any]) -> Sandbox:
        return RaySandbox(info, self)

    def local_snapshot(self, snapshot_id: str) -> str:
        """The kilnd id of a snapshot on this node, fetched from its own node first if need be.
        A plain kilnd id is taken as this node's."""
        try:
            tag, local = ids.split(snapshot_id)
        except ValueError:
            return snapshot_id
        if tag != self.tag:
            src_url, src_key = address(tag)
            return ray.get(agent(self.tag).ensure_snapshot.remote(local, src_url, src_key))["id"]
        return local

    def untracked(self) -> "ClusterRuntime":
        """The same node without keep-alive (for sandboxes another process will own)."""
        url, key = address(self.tag)
        return ClusterRuntime(self.tag, url, key, keep_alive=False)


def owned() -> List[str]:
    """Cluster-wide ids of the sandboxes this process keeps alive."""
    with _mu:
        return sorted(ids.compose(t, s) for t, ss in _owned.items() for s in ss)
