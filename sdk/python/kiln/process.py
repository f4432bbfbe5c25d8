"""Background processes started with `sandbox.spawn`."""

from __future__ import annotations

import base64
import time
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Union

from .client import new_idempotency_key
from .contract import MAX_OUTPUT_WAIT_MS
from .results import CommandResult

if TYPE_CHECKING:
    from .sandbox import Sandbox


class Process:
    """A process that outlives the call that started it. `info` is its last ProcessInfo."""

    def __init__(self, sandbox: "Sandbox", info: Dict[str, Any]) -> None:
        self.sandbox = sandbox
        self.sandbox_id = sandbox.id
        self.info = info
        self.id: str = info["id"]
        self._t = sandbox._t
        self._path = f"{sandbox._path}/processes/{self.id}"

    @property
    def state(self) -> str:
        return self.info.get("state", "unknown")

    @property
    def exit_code(self) -> Optional[int]:
        return self.info.get("exitCode")

    def refresh(self) -> Dict[str, Any]:
        self.info = self._t.request("GET", self._path).json()
        return self.info

    def read_output(self, cursor: int = 0, *, wait_ms: int = 0) -> Dict[str, Any]:
        """One page of output after `cursor`: `{chunks, nextCursor, complete, state, ...}`;
        `wait_ms` (at most MAX_OUTPUT_WAIT_MS) waits for new output or the end."""
        return self._t.request("GET", self._path + "/output", query={"cursor": cursor, "waitMs": wait_ms},
                               timeout=self._t.timeout + wait_ms / 1000.0).json()

    def output(self, cursor: int = 0) -> Iterator[Dict[str, Any]]:
        """Follows the output as events (`stdout`/`stderr`/`truncated`/`exit`) until it ends."""
        with self._t.stream("GET", self._path + "/output", query={"cursor": cursor, "follow": True},
                            headers={"Accept": "application/x-ndjson"}, timeout=86400.0) as s:
            yield from s.lines()

    def wait(self, timeout_seconds: Optional[float] = None) -> CommandResult:
        """Waits until the process ends; its output (the kept last 1 MiB) split by stream."""
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        out: List[str] = []
        err: List[str] = []
        cursor = 0
        while True:
            wait_ms = MAX_OUTPUT_WAIT_MS
            if deadline is not None:
                wait_ms = max(0, min(wait_ms, int((deadline - time.monotonic()) * 1000)))
            page = self.read_output(cursor, wait_ms=wait_ms)
            for chunk in page.get("chunks", []):
                (out if chunk.get("stream") == "stdout" else err).append(chunk.get("data", ""))
            cursor = page.get("nextCursor", cursor)
            if page.get("complete"):
                break
            if deadline is not None and time.monotonic() >= deadline:
                from .errors import TimeoutError
                raise TimeoutError(f"process {self.id} still running after {timeout_seconds} s",
                                   code="request_timeout")
        info = self.refresh()
        return CommandResult(exit_code=info.get("exitCode"), stdout="".join(out), stderr="".join(err),
                             timed_out=info.get("state") == "timed_out", process_id=self.id,
                             signal=info.get("signal"))

    def write(self, data: Union[str, bytes], eof: bool = False) -> int:
        """Writes to stdin (spawned with `stdin="pipe"`); returns the total bytes accepted."""
        body: Dict[str, Any] = ({"data": data} if isinstance(data, str)
                                else {"base64": base64.b64encode(data).decode("ascii")})
        if eof:
            body["eof"] = True
        r = self._t.request("POST", self._path + ":write", json=body, idempotency_key=new_idempotency_key())
        return int(r.json()["offset"])

    def close_stdin(self) -> int:
        return self.write("", eof=True)

    def resize(self, cols: int, rows: int) -> Dict[str, Any]:
        """Resizes the terminal of a process spawned with `pty` (the program gets SIGWINCH)."""
        r = self._t.request("POST", self._path + ":resize", json={"cols": int(cols), "rows": int(rows)},
                            idempotency_key=new_idempotency_key())
        return r.json() or {}

    def kill(self, signal: str = "SIGTERM") -> Dict[str, Any]:
        """Signals the process group (SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2)."""
        self.info = self._t.request("POST", self._path + ":signal", json={"signal": signal},
                                    idempotency_key=new_idempotency_key()).json()
        return self.info

    def __repr__(self) -> str:
        return (f"Process(id={self.id!r}, command={self.info.get('command')!r}, state={self.state!r}, "
                f"exit_code={self.exit_code!r})")
