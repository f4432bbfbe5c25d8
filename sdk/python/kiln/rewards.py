"""Execution-based code rewards: run a program on stdin cases in a sandbox and compare its
stdout with the expected outputs here, in the SDK (expected outputs never enter the sandbox)."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .runtime import Runtime, default_runtime
from .sandbox import Sandbox

__all__ = ["Case", "CaseResult", "ScoreResult", "score", "score_many", "compare", "LANGUAGES"]

# language → (file name, argv); the file is written to /workspace.
LANGUAGES: Dict[str, Tuple[str, List[str]]] = {
    "python": ("main.py", ["python3", "main.py"]),
    "python3": ("main.py", ["python3", "main.py"]),
    "bash": ("main.sh", ["bash", "main.sh"]),
    "sh": ("main.sh", ["sh", "main.sh"]),
}
MODES = ("exact", "whitespace", "float")
CaseLike = Union["Case", Tuple[str, str], Mapping[str, str]]


class Case:
    """One test: `stdin` given to the program, `expected` stdout."""

    __slots__ = ("stdin", "expected")

    def __init__(self, stdin: str, expected: str) -> None:
        self.stdin, self.expected = stdin, expected

    @classmethod
    def of(cls, case: CaseLike) -> "Case":
        if isinstance(case, Case):
            return case
        if isinstance(case, Mapping):
            stdin = case.get("stdin", case.get("input", ""))
            expected = case.get("expected", case.get("output", case.get("stdout")))
            if expected is None:
                raise ValueError(f"case without 'expected': {dict(case)!r}")
            return cls(str(stdin), str(expected))
        stdin, expected = case
        return cls(str(stdin), str(expected))

    def __repr__(self) -> str:
        return f"Case(stdin={self.stdin[:40]!r}, expected={self.expected[:40]!r})"


class CaseResult:
    """How one case went. `reason`: ok, wrong_answer, runtime_error, timeout, output_truncated."""

    __slots__ = ("index", "passed", "reason", "exit_code", "timed_out", "stdout", "stderr", "duration_ms")

    def __init__(self, index: int, passed: bool, reason: str, exit_code: Optional[int], timed_out: bool,
                 stdout: str, stderr: str, duration_ms: Optional[int]) -> None:
        self.index, self.passed, self.reason = index, passed, reason
        self.exit_code, self.timed_out = exit_code, timed_out
        self.stdout, self.stderr, self.duration_ms = stdout, stderr, duration_ms

    def to_dict(self) -> Dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self) -> str:
        return f"CaseResult(index={self.index}, passed={self.passed}, reason={self.reason!r})"


class ScoreResult:
    """`score` = fraction of cases passed (0.0 with no cases); `cases` has the details."""

    __slots__ = ("score", "passed", "total", "cases", "sandbox_id")

    def __init__(self, cases: List[CaseResult], sandbox_id: Optional[str] = None) -> None:
        self.cases = cases
        self.total = len(cases)
        self.passed = sum(1 for c in cases if c.passed)
        self.score = self.passed / self.total if self.total else 0.0
        self.sandbox_id = sandbox_id

    @property
    def fraction(self) -> float:
        return self.score

    reward = fraction

    def __float__(self) -> float:
        return self.score

    def to_dict(self) -> Dict[str, Any]:
        return {"score": self.score, "passed": self.passed, "total": self.total,
                "cases": [c.to_dict() for c in self.cases]}

    def __repr__(self) -> str:
        return f"ScoreResult(score={self.score:.3f}, passed={self.passed}/{self.total})"


def _float_or_none(token: str) -> Optional[float]:
    try:
        return float(token)
    except ValueError:
        return None


def compare(actual: str, expected: str, mode: str = "exact", rel_tol: float = 1e-6,
            abs_tol: float = 1e-9) -> bool:
    """exact: equal strings. whitespace: equal whitespace-separated tokens. float: tokens equal,
    numbers within rel_tol/abs_tol (math.isclose)."""
    if mode == "exact":
        return actual == expected
    a, e = actual.split(), expected.split()
    if mode == "whitespace":
        return a == e
    if mode != "float":
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if len(a) != len(e):
        return False
    for x, y in zip(a, e):
        if x == y:
            continue
        fx, fy = _float_or_none(x), _float_or_none(y)
        if fx is None or fy is None or not math.isclose(fx, fy, rel_tol=rel_tol, abs_tol=abs_tol):
            return False
    return True


def score(program: str, cases: Sequence[CaseLike], mode: str = "exact", rel_tol: float = 1e-6,
          language: str = "python", *, abs_tol: float = 1e-9, timeout_ms: int = 10_000,
          argv: Optional[Sequence[str]] = None, filename: Optional[str] = None,
          files: Optional[Mapping[str, Union[str, bytes]]] = None, env: Optional[Mapping[str, str]] = None,
          runtime: Optional[Runtime] = None, sandbox: Optional[Sandbox] = None,
          snapshot: Optional[str] = None, vcpu: int = 1, memory_mib: int = 512,
          labels: Optional[Mapping[str, str]] = None, stop_on_failure: bool = False) -> ScoreResult:
    """Runs `program` once per case with the case's stdin (each run limited to `timeout_ms`)
    and compares stdout with the expected output in `mode`. A case passes only when the
    program exits 0 within its time and its stdout matches. Uses `sandbox` when given (left
    running), else a new sandbox (from `snapshot` if given) that is always stopped."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if argv is None and language not in LANGUAGES:
        raise ValueError(f"unknown language {language!r}: pass argv= (and filename=), or one of {sorted(LANGUAGES)}")
    name, default_argv = LANGUAGES.get(language, ("main", []))
    name = filename or name
    run_argv = list(argv) if argv is not None else default_argv
    tests = [Case.of(c) for c in cases]
    if sandbox is not None:
        return _run(sandbox, program, name, run_argv, tests, mode, rel_tol, abs_tol, timeout_ms, files, env,
                    stop_on_failure)
    rt = runtime or default_runtime()
    with rt.sandboxes.create(vcpu=vcpu, memory_mib=memory_mib, snapshot=snapshot, labels=labels) as sbx:
        return _run(sbx, program, name, run_argv, tests, mode, rel_tol, abs_tol, timeout_ms, files, env,
                    stop_on_failure)


def _run(sbx: Sandbox, program: str, name: str, argv: List[str], tests: List[Case], mode: str,
         rel_tol: float, abs_tol: float, timeout_ms: int, files: Optional[Mapping[str, Union[str, bytes]]],
         env: Optional[Mapping[str, str]], stop_on_failure: bool) -> ScoreResult:
    for path, content in (files or {}).items():
        sbx.files.write(path if path.startswith("/") else f"/workspace/{path}", content)
    sbx.files.write(f"/workspace/{name}", program)
    results: List[CaseResult] = []
    for i, case in enumerate(tests):
        if stop_on_failure and results and not results[-1].passed:
            results.append(CaseResult(i, False, "skipped", None, False, "", "", None))
            continue
        # A case whose output passes the cap has failed: stop it there, not at its timeout.
        r = sbx.exec(argv, stdin=case.stdin, timeout_ms=timeout_ms, env=env, cwd="/workspace",
                     stop_at_output_cap=True)
        if r.timed_out:
            reason = "timeout"
        elif r.stdout_truncated:
            reason = "output_truncated"  # killed at the cap, or exited after passing it
        elif r.exit_code != 0:
            reason = "runtime_error"
        elif compare(r.stdout, case.expected, mode, rel_tol, abs_tol):
            reason = "ok"
        else:
            reason = "wrong_answer"
        results.append(CaseResult(i, reason == "ok", reason, r.exit_code, r.timed_out, r.stdout, r.stderr,
                                  r.duration_ms))
    return ScoreResult(results, sbx.id)


def score_many(programs: Sequence[str], cases: Sequence[CaseLike], concurrency: int = 4,
               **kwargs: Any) -> List[ScoreResult]:
    """`score` for each program, `concurrency` at a time, one sandbox per program (always
    stopped); results in the order of `programs`. Same keyword arguments as `score`."""
    if "sandbox" in kwargs:
        raise TypeError("score_many makes one sandbox per program; it takes no sandbox=")
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if kwargs.get("runtime") is None:
        kwargs["runtime"] = default_runtime()
    tests = [Case.of(c) for c in cases]
    with ThreadPoolExecutor(max_workers=min(concurrency, max(1, len(programs)))) as pool:
        futures = [pool.submit(score, p, tests, **kwargs) for p in programs]
        return [f.result() for f in futures]
