"""NodeAgent: one Ray actor per node that runs a kilnd (named `kiln-node-<tag>`
in the `kiln` namespace, detached, pinned to its node). It holds that kilnd's
address and key, fetches snapshots onto it once, and stops sandboxes whose
owner stopped renewing them (the task or actor that made them died)."""

from __future__ import annotations

import json
import os
import tarfile
import tempfile
import threading
import time
from typing import Dict, List, Optional, Set, Tuple

from .. import errors
from ..runtime import Runtime

#: An owner that has not renewed for this long is taken for dead.
OWNER_TIMEOUT_SECONDS = 10.0
REAP_INTERVAL_SECONDS = 1.0


class NodeAgent:
    def __init__(self, url: str, key: Optional[str], tag: str, shared_dir: Optional[str] = None,
                 owner_timeout: float = OWNER_TIMEOUT_SECONDS) -> None:
        self.url, self.key, self.tag = url, key, tag
        self.shared_dir = shared_dir
        self.owner_timeout = owner_timeout
        self._rt = Runtime(key, url)
        self._rt.health()  # refuse to attach to a kilnd that does not answer
        self._mu = threading.Lock()
        self._owners: Dict[str, Tuple[float, Set[str]]] = {}  # owner -> (last renew, kilnd ids)
        self._fetching: Dict[str, threading.Lock] = {}
        self._local: Dict[str, str] = {}  # a source node's snapshot id -> its id here
        self._stopped_by_reaper: List[str] = []
        self._fetches: List[Dict[str, object]] = []
        threading.Thread(target=self._reap_loop, daemon=True, name="kiln-reaper").start()

    def address(self) -> Tuple[str, Optional[str], str]:
        return self.url, self.key, self.tag

    # --- owners ------------------------------------------------------------

    def renew(self, owner: str, local_ids: List[str]) -> None:
        with self._mu:
            _, ids = self._owners.get(owner, (0.0, set()))
            ids.update(local_ids)
            self._owners[owner] = (time.monotonic(), ids)

    def release(self, owner: str, local_ids: List[str]) -> None:
        with self._mu:
            if owner in self._owners:
                self._owners[owner][1].difference_update(local_ids)

    def tracked(self) -> Dict[str, List[str]]:
        with self._mu:
            return {o: sorted(ids) for o, (_, ids) in self._owners.items()}

    def reaped(self) -> List[str]:
        with self._mu:
            return list(self._stopped_by_reaper)

    def fetches(self) -> List[Dict[str, object]]:
        """The snapshots this agent fetched: {snapshot, how, bytes, layersSent, layersSkipped}."""
        with self._mu:
            return list(self._fetches)

    def _reap_loop(self) -> None:
        """Stops the sandboxes whose every owner stopped renewing."""
        while True:
            time.sleep(REAP_INTERVAL_SECONDS)
            now = time.monotonic()
            with self._mu:
                dead = [o for o, (seen, _) in self._owners.items() if now - seen > self.owner_timeout]
                orphans = set().union(*(self._owners.pop(o)[1] for o in dead)) if dead else set()
                # A sandbox another live process also holds stays.
                orphans -= set().union(*(ids for _, ids in self._owners.values()))
            for sid in orphans:
                try:
                    self._rt.request("POST", f"/v1/sandboxes/{sid}:stop", json={})
                except errors.KilnError as e:
                    if e.code not in ("not_found", "not_running"):
                        continue  # kilnd's own lease still ends it
                with self._mu:
                    self._stopped_by_reaper.append(sid)

    # --- snapshots ---------------------------------------------------------

    def ensure_snapshot(self, snapshot_id: str, src_url: str, src_key: Optional[str]) -> Dict[str, str]:
        """Makes the snapshot (a kilnd id) restorable here, fetching it from the kilnd at src_url
        once (or from the shared directory). {"how": "present", "imported" or "imported-shared",
        "id": its id here} -- the same id, unless another key's snapshot held it on this node
        (then the import got an id of its own)."""
        with self._mu:
            lock = self._fetching.setdefault(snapshot_id, threading.Lock())
        with lock:
            here = self._local.get(snapshot_id, snapshot_id)
            if self._has(here):
                return {"how": "present", "id": here}
            src = Runtime(src_key, src_url)
            if self.shared_dir:
                path = os.path.join(self.shared_dir, f"{snapshot_id}.tar")
                how = "imported-shared"
                if not os.path.exists(path):
                    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.partial"
                    src.snapshots.export(snapshot_id, tmp)  # whole: every node reads it
                    os.replace(tmp, path)
                    how = "imported"
                return {"how": how, "id": self._import(snapshot_id, path, how)}
            with tempfile.TemporaryDirectory(prefix="kiln-ray-") as d:
                path = os.path.join(d, "snapshot.tar")
                # An image snapshot's layers this node holds already stay behind.
                src.snapshots.export(snapshot_id, path, skip_layers=self._held_layers())
                return {"how": "imported", "id": self._import(snapshot_id, path, "imported")}

    def _import(self, snapshot_id: str, path: str, how: str) -> str:
        local = self._rt.snapshots.import_(path)["id"]
        with self._mu:
            self._local[snapshot_id] = local
        with tarfile.open(path, "r:") as t:
            first = t.next()
            listed = json.load(t.extractfile(first)).get("layers", []) if first else []
        sent = [entry for entry in listed if entry.get("included")]
        with self._mu:
            self._fetches.append({"snapshot": snapshot_id, "how": how, "bytes": os.path.getsize(path),
                                  "layersSent": len(sent),
                                  "layersSkipped": len([e for e in listed if e.get("included") is False])})
        return local

    def _held_layers(self) -> List[str]:
        """The image layers this node's kilnd holds ([] unless the agent's key is the admin's)."""
        try:
            return self._rt.snapshots.layers()
        except errors.KilnError:
            return []

    def _has(self, snapshot_id: str) -> bool:
        try:
            self._rt.snapshots.get(snapshot_id)
            return True
        except errors.NotFoundError:
            return False
