"""SandboxEnv: a gymnasium-style environment whose actions are shell commands run in a
fresh sandbox per episode (started from a snapshot). gymnasium is optional: when it is
importable the env subclasses `gymnasium.Env` and uses `gymnasium.spaces.Text`."""

from __future__ import annotations

import string
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from .contract import DEFAULT_EXEC_TIMEOUT_MS
from .results import CommandResult
from .runtime import Runtime, default_runtime
from .sandbox import Sandbox

try:  # optional
    import gymnasium as _gym
    from gymnasium import spaces as _spaces
except ImportError:  # pragma: no cover - exercised where gymnasium is absent
    _gym = None
    _spaces = None

__all__ = ["SandboxEnv", "TextSpace", "CHARSET", "HAVE_GYMNASIUM"]

HAVE_GYMNASIUM = _gym is not None
# Observations and actions are printable ASCII plus tab and newline; other characters in an
# observation are written as Python escapes (\xe9, \u20ac, \x1b).
CHARSET = frozenset(string.printable) - {"\r", "\x0b", "\x0c"}
_CONTROL = {c: f"\\x{c:02x}" for c in list(range(32)) + [127] if chr(c) not in CHARSET}

RewardFn = Callable[[Sandbox, CommandResult], float]
DoneFn = Callable[[Sandbox, CommandResult], bool]


class TextSpace:
    """Stand-in for gymnasium.spaces.Text when gymnasium is not installed."""

    def __init__(self, max_length: int, *, min_length: int = 0, charset: frozenset = CHARSET) -> None:
        self.max_length, self.min_length, self.character_set = max_length, min_length, frozenset(charset)

    def contains(self, x: Any) -> bool:
        return (isinstance(x, str) and self.min_length <= len(x) <= self.max_length
                and all(c in self.character_set for c in x))

    __contains__ = contains

    def __repr__(self) -> str:
        return f"TextSpace({self.min_length}, {self.max_length})"


def _space(max_length: int, min_length: int) -> Any:
    if _spaces is not None:
        return _spaces.Text(max_length, min_length=min_length, charset=CHARSET)
    return TextSpace(max_length, min_length=min_length)


def to_observation(text: str, max_length: int) -> str:
    """Escapes characters outside CHARSET and keeps the head and tail within max_length."""
    if not text.isascii():
        text = text.encode("ascii", "backslashreplace").decode("ascii")
    text = text.translate(_CONTROL)
    if len(text) > max_length:
        marker = "\n[...]\n"
        if max_length <= len(marker):
            return text[:max_length]
        keep = max_length - len(marker)
        head = keep // 2
        text = text[:head] + marker + text[len(text) - (keep - head):]
    return text


def default_observation(result: CommandResult) -> str:
    """stdout, then stderr, then `[exit N]` when the command failed or `[timed out]`."""
    text = result.stdout + result.stderr
    if result.timed_out:
        text += "[timed out]\n"
    elif result.exit_code != 0:
        text += f"[exit {result.exit_code}]\n"
    return text


_Base: Any = _gym.Env if _gym is not None else object


class SandboxEnv(_Base):  # type: ignore[misc,valid-type]
    """One episode = one sandbox created from `snapshot` (or a fresh one when None).

    step(action) runs the shell command `action`; the observation is its output (see
    `observation_fn`), the reward `reward_fn(sandbox, result)` (0.0 when unset), the episode
    terminates when `terminated_fn(sandbox, result)` is true and truncates after `max_steps`.
    reset(options={"snapshot": ID}) switches the snapshot; the previous sandbox is stopped."""

    metadata: Dict[str, Any] = {"render_modes": []}
    render_mode = None

    def __init__(self, snapshot: Optional[str] = None, *, runtime: Optional[Runtime] = None,
                 reward_fn: Optional[RewardFn] = None, terminated_fn: Optional[DoneFn] = None,
                 max_steps: int = 32, create: Optional[Mapping[str, Any]] = None,
                 exec_timeout_ms: int = DEFAULT_EXEC_TIMEOUT_MS, cwd: Optional[str] = None,
                 env: Optional[Mapping[str, str]] = None,
                 observation_fn: Optional[Callable[[CommandResult], str]] = None,
                 reset_command: Optional[str] = None, max_observation_length: int = 16_384,
                 max_action_length: int = 4096) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.snapshot = snapshot
        self.runtime = runtime or default_runtime()
        self.reward_fn = reward_fn
        self.terminated_fn = terminated_fn
        self.max_steps = max_steps
        self.create_fields = dict(create or {})
        self.exec_timeout_ms = exec_timeout_ms
        self.cwd = cwd
        self.env = dict(env or {})
        self.observation_fn = observation_fn or default_observation
        self.reset_command = reset_command
        self.max_observation_length = max_observation_length
        self.observation_space = _space(max_observation_length, 0)
        self.action_space = _space(max_action_length, 1)
        self.sandbox: Optional[Sandbox] = None
        self.steps = 0
        self.seed_value: Optional[int] = None

    def reset(self, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[str, Dict[str, Any]]:
        """Stops the previous sandbox, starts a new one; returns (observation, info). The
        observation is the output of `reset_command` when set, else ""."""
        if _gym is not None:
            super().reset(seed=seed)
        self.seed_value = seed
        options = dict(options or {})
        snapshot = options.get("snapshot", self.snapshot)
        self._stop()
        self.steps = 0
        fields = dict(self.create_fields)
        if snapshot is not None:
            fields["snapshot"] = snapshot
        self.sandbox = self.runtime.sandboxes.create(**fields)
        obs = ""
        if self.reset_command is not None:
            obs = self.observation_fn(self._run(self.reset_command))
        info = {"sandbox_id": self.sandbox.id, "snapshot": snapshot, "seed": self.seed_value}
        return to_observation(obs, self.max_observation_length), info

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        if self.sandbox is None:
            raise RuntimeError("call reset() before step()")
        if not isinstance(action, str):
            raise TypeError(f"an action is a shell command string, not {type(action).__name__}")
        result = self._run(action)
        self.steps += 1
        reward = float(self.reward_fn(self.sandbox, result)) if self.reward_fn else 0.0
        terminated = bool(self.terminated_fn(self.sandbox, result)) if self.terminated_fn else False
        truncated = not terminated and self.steps >= self.max_steps
        obs = to_observation(self.observation_fn(result), self.max_observation_length)
        info = {"exit_code": result.exit_code, "timed_out": result.timed_out,
                "stdout_truncated": result.stdout_truncated, "stderr_truncated": result.stderr_truncated,
                "steps": self.steps}
        return obs, reward, terminated, truncated, info

    def _run(self, command: str) -> CommandResult:
        assert self.sandbox is not None
        env = dict(self.env)
        if self.seed_value is not None:  # an explicitly seeded episode tells its commands
            env.setdefault("KILN_SEED", str(self.seed_value))
        return self.sandbox.exec(command, cwd=self.cwd, env=env or None, timeout_ms=self.exec_timeout_ms)

    def render(self) -> None:
        return None

    def _stop(self) -> None:
        sbx, self.sandbox = self.sandbox, None
        if sbx is not None:
            try:
                sbx.stop()
            except Exception:  # noqa: BLE001 -- a dead sandbox is as good as a stopped one
                pass

    def close(self) -> None:
        """Stops the current sandbox; safe to call twice."""
        self._stop()
        if _gym is not None:
            super().close()
