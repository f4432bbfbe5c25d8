"""`sandbox.interpreter`: stateful Python/JavaScript contexts, like notebook kernels."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional
from urllib.parse import quote

from . import errors
from .client import new_idempotency_key

if TYPE_CHECKING:
    from .sandbox import Sandbox

Callback = Optional[Callable[[Any], Any]]
_GRACE_S = 60.0


def run_body(code: str, language: Optional[str], context: Optional[str],
             timeout_ms: Optional[int], env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    body: Dict[str, Any] = {"code": code}
    for name, value in (("language", language), ("context", context), ("timeoutMs", timeout_ms),
                        ("env", env)):
        if value is not None:
            body[name] = value
    return body


def http_timeout(timeout_ms: Optional[int]) -> float:
    """How long to wait for a run's answer: its own timeout plus a grace (a day for none)."""
    if timeout_ms == 0:
        return 86400.0 + _GRACE_S
    return (60_000 if timeout_ms is None else timeout_ms) / 1000.0 + _GRACE_S


def dispatch(event: Mapping[str, Any], on_stdout: Callback, on_stderr: Callback, on_result: Callback,
             on_error: Callback) -> Optional[Dict[str, Any]]:
    """Hands one streamed event to its callback; the Execution once `execution` comes."""
    kind = event.get("k")
    if kind == "stdout" and on_stdout:
        on_stdout(event.get("text", ""))
    elif kind == "stderr" and on_stderr:
        on_stderr(event.get("text", ""))
    elif kind == "result" and on_result:
        on_result({"main": event.get("main"), "data": event.get("data"), "refs": event.get("refs", [])})
    elif kind == "error" and on_error:
        on_error({"name": event.get("name"), "value": event.get("value"), "traceback": event.get("traceback")})
    elif kind == "execution":
        return dict(event["execution"])
    elif kind == "failure":
        raise errors.make_error(int(event.get("status") or 500), {"error": {
            "code": event.get("code"), "message": event.get("message"), "status": event.get("status")}})
    return None


class Contexts:
    """`sandbox.interpreter.contexts`: each language's own name is its default context."""

    def __init__(self, t: Any, base: str) -> None:
        self._t = t
        self._base = base + "/contexts"

    def list(self) -> List[Dict[str, Any]]:
        return self._t.request("GET", self._base).json()["data"]

    def create(self, id: Optional[str] = None, language: Optional[str] = None,  # noqa: A002
               cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
        body = {k: v for k, v in (("id", id), ("language", language), ("cwd", cwd),
                                  ("env", dict(env) if env is not None else None)) if v is not None}
        return self._t.request("POST", self._base, json=body, idempotency_key=new_idempotency_key()).json()

    def restart(self, context_id: str) -> Dict[str, Any]:
        """Kills the kernel and starts it again with empty state."""
        return self._t.request("POST", f"{self._base}/{quote(context_id, safe='')}:restart", json={},
                               idempotency_key=new_idempotency_key()).json()

    def interrupt(self, context_id: str) -> bool:
        """SIGINT to the running code (state kept); whether code was running."""
        return bool(self._t.request("POST", f"{self._base}/{quote(context_id, safe='')}:interrupt", json={},
                                    idempotency_key=new_idempotency_key()).json()["interrupted"])

    def delete(self, context_id: str) -> bool:
        return bool(self._t.request("DELETE", f"{self._base}/{quote(context_id, safe='')}",
                                    idempotency_key=new_idempotency_key()).json()["deleted"])

    remove = delete


class Interpreter:
    def __init__(self, sandbox: "Sandbox") -> None:
        self._t = sandbox._t
        self._base = sandbox._path + "/interpreter"
        self.contexts = Contexts(self._t, self._base)

    def run(self, code: str, language: Optional[str] = None, context: Optional[str] = None,
            timeout_ms: Optional[int] = None, on_stdout: Callback = None, on_stderr: Callback = None,
            on_result: Callback = None, on_error: Callback = None,
            env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        """Runs a cell; the Execution dict (`status`, `stdout`, `stderr`, `results` of MIME
        bundles, `error`). With a callback the run streams: output reaches it as it happens.
        A cell's error is a result (`status: "error"`), not an exception. Not retried.
        `env`: environment variables for this run alone, put back after it."""
        body = run_body(code, language, context, timeout_ms, env)
        timeout = http_timeout(timeout_ms)
        if not (on_stdout or on_stderr or on_result or on_error):
            return self._t.request("POST", self._base + ":run", json=body, timeout=timeout, retry=False).json()
        with self._t.stream("POST", self._base + ":run", json={**body, "stream": True}, timeout=timeout,
                            headers={"Accept": "application/x-ndjson"}) as s:
            for event in s.lines():
                execution = dispatch(event, on_stdout, on_stderr, on_result, on_error)
                if execution is not None:
                    return execution
        raise errors.ConnectionError("the interpreter stream ended without its execution", code="stream_ended")
