"""`sandbox.files.watch`: inotify in the sandbox, read by cursor (`…/files/watches`)."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence
from urllib.parse import quote

from . import errors
from .client import new_idempotency_key

MAX_WAIT_MS = 8000
_FOLLOW_TIMEOUT_S = 150.0  # a follow ends by itself after 110 s with `continue`


class WatchHandle:
    """A running watch. `cursor` is where the next read starts; `notices` keeps overflow,
    limit, lost and paused notices (events were missed: rescan); `exit_reason` says why
    it ended (stopped, timeout, root-removed, gone), None while it runs."""

    def __init__(self, t: Any, base: str, info: Dict[str, Any]) -> None:
        self._t = t
        self._base = base
        self.info = info
        self.id: str = info["id"]
        self.path: str = info.get("path", "")
        self.cursor: int = int(info.get("cursor") or 0)
        self.notices: List[Dict[str, Any]] = []
        self.exit_reason: Optional[str] = None

    def _events_path(self) -> str:
        return f"{self._base}/{quote(self.id, safe='')}/events"

    def get_new_events(self, wait_ms: int = 0) -> List[Dict[str, Any]]:
        """Events after `cursor`, waiting up to `wait_ms` (at most 8000) for the first."""
        wait_ms = max(0, min(MAX_WAIT_MS, int(wait_ms)))
        page = self._t.request("GET", self._events_path(), query={"cursor": self.cursor, "waitMs": wait_ms},
                               timeout=self._t.timeout + wait_ms / 1000.0).json()
        self.cursor = int(page.get("nextCursor", self.cursor))
        if page.get("lostBytes"):
            self.notices.append({"k": "lost", "bytes": page["lostBytes"]})
        for notice in page.get("notices", []):
            if notice.get("k") == "end":
                self.exit_reason = notice.get("reason")
            else:
                self.notices.append(notice)
        return list(page.get("events", []))

    def events(self) -> Iterator[Dict[str, Any]]:
        """Each event as it comes, until the watch ends (`exit_reason`) or the sandbox
        pauses (a `paused` notice; call again after a wake). Follows again from the
        cursor on `continue`."""
        while True:
            again = False
            with self._t.stream("GET", self._events_path(), query={"cursor": self.cursor, "follow": True},
                                headers={"Accept": "application/x-ndjson"}, timeout=_FOLLOW_TIMEOUT_S) as s:
                for line in s.lines():
                    if "cursor" in line:
                        self.cursor = int(line["cursor"])
                    kind = line.get("k")
                    if kind == "events":
                        yield from line.get("events", [])
                    elif kind == "continue":
                        again = True
                    elif kind == "end":
                        self.exit_reason = line.get("reason")
                        return
                    elif kind == "paused":
                        self.notices.append(line)
                        return
                    elif kind == "failure":
                        raise errors.make_error(int(line.get("status") or 500), {"error": {
                            "code": line.get("code"), "message": line.get("message"),
                            "status": line.get("status")}})
                    else:
                        self.notices.append(line)
            if not again:
                return

    def stop(self) -> bool:
        """Ends the watch in the sandbox (its readers see `end {reason: stopped}`)."""
        stopped = bool(self._t.request("DELETE", f"{self._base}/{quote(self.id, safe='')}",
                                       idempotency_key=new_idempotency_key()).json().get("stopped"))
        self.exit_reason = self.exit_reason or "stopped"
        return stopped

    def __enter__(self) -> "WatchHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.exit_reason is None:
            try:
                self.stop()
            except errors.KilnError:
                pass


class Watches:
    """`sandbox.files.watches`: the watches of one sandbox (at most 4 run at once)."""

    def __init__(self, t: Any, sandbox_path: str) -> None:
        self._t = t
        self._base = sandbox_path + "/files/watches"

    def start(self, path: str, recursive: bool = False, events: Optional[Sequence[str]] = None,
              include: Optional[Sequence[str]] = None, exclude: Optional[Sequence[str]] = None,
              batch_ms: Optional[int] = None, timeout_ms: Optional[int] = None,
              max_watches: Optional[int] = None, id: Optional[str] = None) -> WatchHandle:  # noqa: A002
        body: Dict[str, Any] = {"path": path, "recursive": bool(recursive)}
        for name, value in (("events", events), ("include", include), ("exclude", exclude)):
            if value is not None:
                body[name] = list(value)
        for name, value in (("batchMs", batch_ms), ("timeoutMs", timeout_ms), ("maxWatches", max_watches),
                            ("id", id)):
            if value is not None:
                body[name] = value
        info = self._t.request("POST", self._base, json=body, idempotency_key=new_idempotency_key()).json()
        return WatchHandle(self._t, self._base, info)

    def list(self) -> List[Dict[str, Any]]:
        """WatchInfo dicts: running ones and the last ended, oldest first."""
        return self._t.request("GET", self._base).json()["data"]

    def stop(self, watch_id: str) -> bool:
        return bool(self._t.request("DELETE", f"{self._base}/{quote(watch_id, safe='')}",
                                    idempotency_key=new_idempotency_key()).json().get("stopped"))
