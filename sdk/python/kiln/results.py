"""CommandResult: the answer of an exec."""

from __future__ import annotations

from typing import Any, Dict, Optional

_FIELDS = (
    ("exit_code", "exitCode", None), ("stdout", "stdout", ""), ("stderr", "stderr", ""),
    ("timed_out", "timedOut", False), ("stdout_truncated", "stdoutTruncated", False),
    ("stderr_truncated", "stderrTruncated", False), ("duration_ms", "durationMs", None),
    ("process_id", "processId", None), ("signal", "signal", None), ("replayed", "replayed", False),
)


class CommandResult:
    """What a command did: `exit_code` (None when killed), output, flags and duration."""

    __slots__ = tuple(f[0] for f in _FIELDS)

    exit_code: Optional[int]
    stdout: str
    stderr: str
    timed_out: bool
    stdout_truncated: bool
    stderr_truncated: bool
    duration_ms: Optional[int]
    process_id: Optional[str]
    signal: Optional[str]
    replayed: bool

    def __init__(self, **fields: Any) -> None:
        for name, _, default in _FIELDS:
            setattr(self, name, fields.pop(name, default))
        if fields:
            raise TypeError(f"unknown CommandResult fields: {sorted(fields)}")

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "CommandResult":
        self = cls.__new__(cls)
        get = data.get
        for name, wire, default in _FIELDS:
            setattr(self, name, get(wire, default))
        return self

    def to_dict(self) -> Dict[str, Any]:
        """The camelCase JSON form."""
        return {wire: getattr(self, name) for name, wire, _ in _FIELDS}

    @property
    def ok(self) -> bool:
        """Exit code 0 and not timed out."""
        return self.exit_code == 0 and not self.timed_out

    @property
    def output(self) -> str:
        """stdout followed by stderr."""
        return self.stdout + self.stderr

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CommandResult):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return (f"CommandResult(exit_code={self.exit_code!r}, timed_out={self.timed_out!r}, "
                f"stdout={self.stdout[:80]!r}, stderr={self.stderr[:80]!r}, "
                f"duration_ms={self.duration_ms!r})")
