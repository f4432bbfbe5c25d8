"""Sandbox: commands, processes, files, snapshots, forks and the lease of one sandbox."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from . import errors
from .client import new_idempotency_key
from .contract import DEFAULT_EXEC_TIMEOUT_MS, EXEC_GRACE_MS
from .files import Files
from .interpreter import Interpreter
from .network import Network
from .ports import Ports
from .previews import Previews
from .process import Process
from .results import CommandResult

if TYPE_CHECKING:
    from .runtime import Runtime
    from .tunnel import PortForward

Command = Union[str, Sequence[str]]


def command_body(command: Command, *, cwd: Optional[str], env: Optional[Mapping[str, str]],
                 stdin: Union[str, bytes, None], timeout_ms: Optional[int]) -> Dict[str, Any]:
    """The JSON of an exec or spawn: a string runs with `bash -c`, a list runs as argv."""
    if isinstance(command, str):
        body: Dict[str, Any] = {"command": command}
    elif isinstance(command, (list, tuple)):
        body = {"argv": [str(a) for a in command]}
    else:
        raise TypeError(f"command must be a str or a list of str, not {type(command).__name__}")
    if cwd is not None:
        body["cwd"] = cwd
    if env:
        body["env"] = dict(env)
    if stdin is not None:
        if isinstance(stdin, str):
            body["stdin"] = stdin
        else:
            body["stdinBase64"] = base64.b64encode(bytes(stdin)).decode("ascii")
    if timeout_ms is not None:
        body["timeoutMs"] = int(timeout_ms)
    return body


def _check(result: CommandResult, command: Command, request_id: Optional[str] = None) -> None:
    if result.ok:
        return
    tail = ("\n" + result.stderr[-500:]) if result.stderr else ""
    if result.timed_out:
        raise errors.CommandTimeoutError(
            f"command timed out: {command!r}{tail}", code="command_timeout",
            exit_code=result.exit_code, stdout=result.stdout, stderr=result.stderr, request_id=request_id)
    raise errors.CommandError(
        f"command exited with {result.exit_code}: {command!r}{tail}",
        code="command_failed", exit_code=result.exit_code, stdout=result.stdout, stderr=result.stderr,
        request_id=request_id)


class Sandbox:
    """One sandbox. `info` is the last SandboxInfo seen; `with` stops it on exit."""

    def __init__(self, info: Dict[str, Any], runtime: "Runtime") -> None:
        self.info = info
        self.id: str = info["id"]
        self.runtime = runtime
        self._t = runtime._transport
        self._path = f"/v1/sandboxes/{self.id}"
        self.files = Files(self)
        self.network = Network(self)
        self.ports = Ports(self)
        self.previews = Previews(self)
        self.interpreter = Interpreter(self)
        # Only the create answer carries `start` (an image's start command); keep it.
        self.start: Optional[Dict[str, Any]] = info.get("start")

    # --- constructors ------------------------------------------------------

    @staticmethod
    def create(*, client: Optional["Runtime"] = None, **fields: Any) -> "Sandbox":
        """Creates a sandbox with `client` (default: a Runtime configured from the environment)."""
        from .runtime import default_runtime
        return (client or default_runtime()).sandboxes.create(**fields)

    @staticmethod
    def get_or_create(name: str, *, client: Optional["Runtime"] = None, **fields: Any) -> "Sandbox":
        """The live sandbox called `name` (woken if paused), or a new one with `fields`."""
        from .runtime import default_runtime
        return (client or default_runtime()).sandboxes.get_or_create(name, **fields)

    @staticmethod
    def connect(sandbox_id: str, *, client: Optional["Runtime"] = None) -> "Sandbox":
        from .runtime import default_runtime
        return (client or default_runtime()).sandboxes.get(sandbox_id)

    # --- state -------------------------------------------------------------

    @property
    def state(self) -> str:
        """One of starting, running, pausing, paused, resuming, stopping, stopped (as last seen)."""
        return self.info.get("state", "unknown")

    @property
    def paused(self) -> bool:
        return self.state in ("pausing", "paused")

    def refresh(self) -> Dict[str, Any]:
        self.info = self._t.request("GET", self._path).json()
        return self.info

    def update(self, idempotency_key: Optional[str] = None, **settings: Any) -> Dict[str, Any]:
        """Changes settings; what is left out stays: name, labels, env (a value sets a variable,
        None removes it), auto_wake, idle_pause_seconds, persistent, max_total_cost_micros."""
        known = {"name": "name", "labels": "labels", "env": "env", "auto_wake": "autoWake",
                 "idle_pause_seconds": "idlePauseSeconds", "persistent": "persistent",
                 "max_total_cost_micros": "maxTotalCostMicros"}
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise TypeError(f"update() got unexpected settings {unknown}; it takes {sorted(known)}")
        self.info = self._post(":update", {known[k]: v for k, v in settings.items()},
                               idempotency_key=idempotency_key)
        return self.info

    def metrics(self, range: str = "15m") -> Dict[str, Any]:
        """Its resource use over `range` (15m, 1h, 6h, 24h, 7d, 30d): `{latest, points}`, the
        meter's readings (every 5 s) as means and peaks per point."""
        return self._t.request("GET", self._path + "/metrics", query={"range": range}).json()

    def extend(self, seconds: int) -> Dict[str, Any]:
        """Moves the lease end to max(expiresAt, now) + seconds (at most kilnd's
        --max-lease-seconds ahead: a day by default)."""
        self.info = self._post(":extend", {"seconds": int(seconds)})
        return self.info

    def stop(self, wait: bool = True, idempotency_key: Optional[str] = None) -> Dict[str, Any]:
        """Stops the sandbox. kilnd's stop is synchronous (nothing of it remains when it answers);
        `wait=False` only leaves out `Prefer: wait`."""
        self.info = self._post(":stop", {}, headers={"Prefer": "wait=60"} if wait else None,
                               idempotency_key=idempotency_key)
        return self.info

    def pause(self, wait: bool = True, idempotency_key: Optional[str] = None,
              memory: Optional[bool] = None) -> Dict[str, Any]:
        """Writes the sandbox (memory, processes, files) to disk and frees its memory, CPU and
        capacity; `wake` or any command (with auto_wake) brings it back, same id. `memory=False`
        keeps only its files: its wake boots afresh on them. 409 `not_running` / `not_pausable`
        otherwise."""
        body: Dict[str, Any] = {} if memory is None else {"memory": bool(memory)}
        self.info = self._post(":pause", body, headers={"Prefer": "wait=60"} if wait else None,
                               timeout=self._t.timeout + 60, idempotency_key=idempotency_key)
        return self.info

    def wake(self, wait: bool = True, timeout_seconds: Optional[int] = None,
             idempotency_key: Optional[str] = None) -> Dict[str, Any]:
        """Resumes a paused sandbox, same id; `timeout_seconds` asks for a new lease. A sandbox
        that is already awake (409 `not_paused`) is success unless a new lease was asked for."""
        body: Dict[str, Any] = {} if timeout_seconds is None else {"timeoutSeconds": int(timeout_seconds)}
        try:
            self.info = self._post(":wake", body, headers={"Prefer": "wait=60"} if wait else None,
                                   timeout=self._t.timeout + 60, idempotency_key=idempotency_key)
        except errors.ConflictError as e:
            if e.code != "not_paused" or timeout_seconds is not None:
                raise
            self.refresh()
        return self.info

    def delete(self) -> Dict[str, Any]:
        """Stops and forgets the sandbox; a later get is NotFoundError."""
        answer = self._t.request("DELETE", self._path, idempotency_key=new_idempotency_key()).json()
        self.info = {**self.info, "state": "stopped"}
        return answer

    def _post(self, verb: str, body: Dict[str, Any], headers: Optional[Dict[str, str]] = None,
              timeout: Optional[float] = None, idempotency_key: Optional[str] = None) -> Any:
        return self._t.request("POST", self._path + verb, json=body, headers=headers, timeout=timeout,
                               idempotency_key=idempotency_key or new_idempotency_key()).json()

    # --- commands ----------------------------------------------------------

    def exec(self, command: Command, *, stdin: Union[str, bytes, None] = None,
             env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
             timeout_ms: Optional[int] = None, check: bool = False,
             on_stdout: Optional[Callable[[str], None]] = None,
             on_stderr: Optional[Callable[[str], None]] = None,
             idempotency_key: Optional[str] = None, stop_at_output_cap: bool = False) -> CommandResult:
        """Runs a command to its end. A str runs with `bash -c`, a list as argv. A timeout is a
        result (`timed_out`), not an error, unless `check=True` (then CommandError on exit ≠ 0).
        The answer keeps at most 64 KiB of stdout and of stderr, or 1 MiB when `timeout_ms` is
        over 60 s (`contract.exec_output_cap`); the rest is dropped and `stdout_truncated` /
        `stderr_truncated` set. With `on_stdout`/`on_stderr` the output streams to them as it
        comes (and is not capped). `stop_at_output_cap` (kiln's own) kills the command as soon
        as stdout or stderr passes the answer's cap instead of reading and dropping the rest.
        Not retried on a broken connection unless `idempotency_key` is given."""
        body = command_body(command, cwd=cwd, env=env, stdin=stdin, timeout_ms=timeout_ms)
        if stop_at_output_cap:
            body["stopAtOutputCap"] = True
        http_timeout = ((timeout_ms or DEFAULT_EXEC_TIMEOUT_MS) + EXEC_GRACE_MS) / 1000.0
        if on_stdout is not None or on_stderr is not None:
            result = self._exec_streamed(body, http_timeout, on_stdout, on_stderr, idempotency_key)
        else:
            r = self._t.request("POST", self._path + ":exec", json=body, timeout=http_timeout,
                                idempotency_key=idempotency_key)
            result = CommandResult.from_json(r.json())
        if check:
            _check(result, command)
        return result

    def exec_stream(self, command: Command, *, stdin: Union[str, bytes, None] = None,
                    env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                    timeout_ms: Optional[int] = None, idempotency_key: Optional[str] = None,
                    ) -> Iterator[Dict[str, Any]]:
        """Runs a command and yields its NDJSON events (`start`, `stdout`, `stderr`, `exit`)."""
        body = command_body(command, cwd=cwd, env=env, stdin=stdin, timeout_ms=timeout_ms)
        body["stream"] = True
        http_timeout = ((timeout_ms or DEFAULT_EXEC_TIMEOUT_MS) + EXEC_GRACE_MS) / 1000.0
        with self._t.stream("POST", self._path + ":exec", json=body, timeout=http_timeout,
                            headers={"Accept": "application/x-ndjson"},
                            idempotency_key=idempotency_key) as s:
            for event in s.lines():
                if event.get("type") == "error":
                    e = event.get("error") or {}
                    raise errors.make_error(int(e.get("status") or 500), {"error": e})
                yield event

    def _exec_streamed(self, body: Dict[str, Any], http_timeout: float,
                       on_stdout: Optional[Callable[[str], None]], on_stderr: Optional[Callable[[str], None]],
                       idempotency_key: Optional[str]) -> CommandResult:
        out: List[str] = []
        err: List[str] = []
        result = CommandResult()
        body = {**body, "stream": True}
        with self._t.stream("POST", self._path + ":exec", json=body, timeout=http_timeout,
                            headers={"Accept": "application/x-ndjson"}, idempotency_key=idempotency_key) as s:
            for ev in s.lines():
                kind = ev.get("type")
                if kind == "stdout":
                    out.append(ev.get("data", ""))
                    if on_stdout:
                        on_stdout(ev.get("data", ""))
                elif kind == "stderr":
                    err.append(ev.get("data", ""))
                    if on_stderr:
                        on_stderr(ev.get("data", ""))
                elif kind == "start":
                    result.process_id = ev.get("processId")
                elif kind == "exit":
                    result.exit_code = ev.get("exitCode")
                    result.timed_out = bool(ev.get("timedOut"))
                    result.duration_ms = ev.get("durationMs")
                    result.signal = ev.get("signal")
                elif kind == "truncated":
                    result.stdout_truncated = result.stderr_truncated = True
                elif kind == "error":
                    e = ev.get("error") or {}
                    raise errors.make_error(int(e.get("status") or 500), {"error": e})
        result.stdout, result.stderr = "".join(out), "".join(err)
        return result

    def spawn(self, command: Command, *, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
              stdin: Optional[str] = None, timeout_ms: Optional[int] = None,
              pty: Union[bool, Mapping[str, int], None] = None, user: Optional[str] = None) -> Process:
        """Starts a background process; `stdin="pipe"` keeps its stdin open for `write`.
        `pty=True` (80x24) or `pty={"cols": C, "rows": R}` runs it on a terminal (its output is
        stdout; `process.resize(cols, rows)`); `user="root"` runs it as root."""
        body = command_body(command, cwd=cwd, env=env, stdin=None, timeout_ms=timeout_ms)
        if stdin is not None:
            if stdin != "pipe":
                raise ValueError('spawn(stdin=) takes only "pipe"')
            body["stdinMode"] = "pipe"
        if pty:
            body["pty"] = True if pty is True else {"cols": int(pty["cols"]), "rows": int(pty["rows"])}
        if user is not None:
            body["user"] = user
        info = self._t.request("POST", self._path + "/processes", json=body,
                               idempotency_key=new_idempotency_key()).json()
        return Process(self, info)

    def forward_port(self, port: int, local_port: Optional[int] = None,
                     host: str = "127.0.0.1") -> "PortForward":
        """Listens on `host:local_port` (default: the same port number; 0 picks a free one,
        see `.local_port`) and carries each connection to `port` inside the sandbox over
        the tunnel WebSocket, until `.close()` or the end of a `with` block."""
        from .tunnel import PortForward
        return PortForward(self, port, local_port, host)

    def processes(self) -> List[Dict[str, Any]]:
        return self._t.request("GET", self._path + "/processes").json()["data"]

    def process(self, process_id: str) -> Process:
        return Process(self, self._t.request("GET", f"{self._path}/processes/{process_id}").json())

    # --- snapshots and forks -----------------------------------------------

    def snapshot(self, *, name: Optional[str] = None, retention_days: Optional[int] = None,
                 labels: Optional[Mapping[str, str]] = None, mode: Optional[str] = None,
                 idempotency_key: Optional[str] = None) -> Dict[str, Any]:
        """Captures files, memory and processes while the sandbox keeps running; the Snapshot dict."""
        if mode is not None and mode not in ("memory", "disk"):
            raise ValueError(f"snapshot mode must be 'memory' or 'disk', not {mode!r}")
        body = {k: v for k, v in (("name", name), ("retentionDays", retention_days),
                                  ("labels", dict(labels) if labels is not None else None),
                                  ("mode", mode)) if v is not None}
        return self._post(":snapshot", body, timeout=self._t.timeout + 60, idempotency_key=idempotency_key)

    def fork(self, count: Optional[int] = None, *, name: Optional[str] = None,
             labels: Optional[Mapping[str, str]] = None, keep_snapshot: Optional[bool] = None,
             funding: Optional[str] = None, idempotency_key: Optional[str] = None,
             network: Optional[Mapping[str, Any]] = None) -> Union["Sandbox", List["Sandbox"]]:
        """Copies of this running sandbox: a list with `count`, one Sandbox without it.
        They keep this sandbox's egress rules unless `network` names others. With `name` the
        copies are called name, name-1, name-2, ... (sent as the fork's `name`). `funding` is
        accepted for the public API's sake and not sent (a local daemon has no trial)."""
        body: Dict[str, Any] = {"count": 1 if count is None else int(count)}
        if name is not None:
            body["name"] = name
        if labels is not None:
            body["labels"] = dict(labels)
        if network is not None:
            body["network"] = dict(network)
        if keep_snapshot is not None:
            body["keepSnapshot"] = bool(keep_snapshot)
        answer = self._post(":fork", body, headers={"Prefer": "wait=60"}, timeout=self._t.timeout + 60,
                            idempotency_key=idempotency_key)
        copies = [self.runtime._sandbox(info) for info in answer["sandboxes"]]
        return copies[0] if count is None else copies

    # --- context manager ---------------------------------------------------

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.state != "stopped":
            try:
                self.stop(wait=False)
            except Exception:  # noqa: BLE001 -- leaving the block must not hide the first error
                pass

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, state={self.state!r})"
