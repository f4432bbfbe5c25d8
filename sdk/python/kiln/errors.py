"""Errors: one class per kind of API answer, chosen from the error code and status."""

from __future__ import annotations

import builtins
from typing import Any, Dict, Optional

__all__ = [
    "KilnError", "APIError", "RuntimeAPIError", "AuthenticationError", "AuthError",
    "PermissionDeniedError", "NotFoundError", "ConflictError", "CapacityError",
    "InvalidRequestError", "RateLimitError", "ServiceUnavailableError", "ConnectionError",
    "RuntimeConnectionError", "TimeoutError", "CommandError", "CommandTimeoutError",
    "AccountBlockedError", "PaymentRequiredError", "ImageBuildError", "make_error",
]

# 503 codes that mean "this is off here", never retried (reference §1.2).
DELIBERATE_CODES = frozenset({
    "unavailable", "unsupported", "fork_unavailable", "previews_unavailable",
    "network_unavailable", "network_rules_unavailable", "secrets_unavailable",
    "identity_unavailable", "env_unavailable", "resize_unavailable",
})
# Refusals that clear on their own: a create waits and retries them (reference §1.4).
ROOM_CODES = frozenset({
    "no_capacity", "quota_exceeded", "trial_busy", "trial_domain_limit", "trial_capacity",
    "volume_releasing", "request_in_progress",
})
RETRY_STATUSES = frozenset({429, 502, 503, 504})


class KilnError(Exception):
    """Base of every SDK error: an API error answer or a transport failure."""

    def __init__(self, message: str, *, code: str = "error", status: int = 0,
                 request_id: Optional[str] = None, details: Optional[Dict[str, Any]] = None,
                 hint: Optional[str] = None, retry_after_ms: Optional[int] = None,
                 idempotency_key: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.request_id = request_id
        self.details = details
        self.hint = hint
        self.retry_after_ms = retry_after_ms
        self.idempotency_key = idempotency_key

    @property
    def retryable(self) -> bool:
        """Whether the same call may succeed later without any change."""
        if self.code in DELIBERATE_CODES:
            return False
        if self.code in ROOM_CODES:
            return (self.details or {}).get("field") != "count"
        return self.status in (0, 429, 502, 503, 504)

    def __str__(self) -> str:
        text = f"[{self.code} {self.status}] {self.message}"
        if self.hint:
            text += f"\nHint: {self.hint}"
        if self.request_id:
            text += f"\nRequest: {self.request_id}"
        return text

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(code={self.code!r}, status={self.status}, "
                f"message={self.message!r}, request_id={self.request_id!r})")

    def __reduce__(self):  # keeps errors picklable across processes
        return (_rebuild, (type(self), self.message, self.__dict__))


def _rebuild(cls: "type[KilnError]", message: str, state: Dict[str, Any]) -> KilnError:
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


APIError = RuntimeAPIError = KilnError


class AuthenticationError(KilnError):
    """401: missing, unknown or revoked API key."""


AuthError = AuthenticationError


class PermissionDeniedError(KilnError):
    """403: the key may not do this (e.g. key management without an admin key)."""


class NotFoundError(KilnError):
    """404: unknown sandbox, process, file, snapshot or route."""


class ConflictError(KilnError):
    """409: the resource's state forbids the call (e.g. `not_running`)."""


class CapacityError(ConflictError):
    """409 `no_capacity` / `quota_exceeded`: no room now; a later try may fit."""


class InvalidRequestError(KilnError):
    """400 / 413 / 422: the request itself is wrong; `details["issues"]` names the fields."""


class RateLimitError(KilnError):
    """429: too many requests."""


class ServiceUnavailableError(KilnError):
    """5xx: the daemon failed or is unavailable."""


class AccountBlockedError(KilnError):
    """`account_blocked`."""


class PaymentRequiredError(KilnError):
    """402: e.g. `spending_limit_reached` once a key's daily limit is spent."""


class ConnectionError(KilnError, builtins.ConnectionError):  # noqa: A001 -- reference name
    """No answer: the connection failed or broke (`code="connection_error"`, status 0)."""


RuntimeConnectionError = ConnectionError


class TimeoutError(KilnError, builtins.TimeoutError):  # noqa: A001 -- reference name
    """The answer did not come within the call's timeout (`code="request_timeout"`)."""


class CommandError(KilnError):
    """`exec(check=True)`: the command failed (`command_failed`) or timed out (`command_timeout`)."""

    def __init__(self, message: str, *, exit_code: Optional[int] = None, stdout: str = "",
                 stderr: str = "", **kw: Any) -> None:
        kw.setdefault("code", "command_failed")
        super().__init__(message, **kw)
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr


class CommandTimeoutError(CommandError, TimeoutError):
    """`exec(check=True)` of a command that hit its `timeout_ms`."""


class ImageBuildError(KilnError):
    """An image build ended `failed`. `image` is the final ImageInfo; `step`, `line`,
    `instruction`, `exit_code` and `log_tail` come from its `error`."""

    def __init__(self, message: str, *, image: Optional[Dict[str, Any]] = None, step: Optional[int] = None,
                 line: Optional[int] = None, instruction: Optional[str] = None,
                 exit_code: Optional[int] = None, log_tail: Optional[list] = None, **kw: Any) -> None:
        kw.setdefault("code", "build_failed")
        super().__init__(message, **kw)
        self.image = image
        self.step = step
        self.line = line
        self.instruction = instruction
        self.exit_code = exit_code
        self.log_tail = log_tail or []

    @classmethod
    def of(cls, image: Dict[str, Any]) -> "ImageBuildError":
        err = image.get("error") or {}
        where = ""
        if err.get("step") is not None:
            where += f" at step {err['step']}"
        if err.get("line") is not None:
            where += f" (Dockerfile line {err['line']})"
        message = f"image {image.get('name')!r} build failed{where}: {err.get('message') or 'no message'}"
        return cls(message, code=str(err.get("code") or "build_failed"), image=image, step=err.get("step"),
                   line=err.get("line"), instruction=err.get("instruction"), exit_code=err.get("exitCode"),
                   log_tail=err.get("logTail"))


_BY_STATUS = {
    401: AuthenticationError, 402: PaymentRequiredError, 403: PermissionDeniedError,
    404: NotFoundError, 409: ConflictError, 400: InvalidRequestError, 413: InvalidRequestError,
    422: InvalidRequestError, 429: RateLimitError,
}


def error_class(code: str, status: int) -> type:
    """The exception class for an error answer."""
    if code == "account_blocked":
        return AccountBlockedError
    if code in ("no_capacity", "quota_exceeded"):
        return CapacityError
    cls = _BY_STATUS.get(status)
    if cls is not None:
        return cls
    if status >= 500:
        return ServiceUnavailableError
    return KilnError


def make_error(status: int, body: Any, request_id: Optional[str] = None,
               retry_after: Optional[str] = None) -> KilnError:
    """Builds the error for a non-2xx answer from its `{"error": {...}}` body."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        err = {"code": f"http_{status}", "message": f"HTTP {status} without an error body"}
    code = str(err.get("code") or f"http_{status}")
    status = int(err.get("status") or status)
    retry_ms = err.get("retryAfterMs")
    if not isinstance(retry_ms, int) and retry_after and retry_after.strip().isdigit():
        retry_ms = int(retry_after.strip()) * 1000
    cls = error_class(code, status)
    return cls(str(err.get("message") or code), code=code, status=status,
               request_id=err.get("requestId") or request_id, details=err.get("details"),
               hint=err.get("hint"), retry_after_ms=retry_ms if isinstance(retry_ms, int) else None)
