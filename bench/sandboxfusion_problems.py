#!/usr/bin/python3
"""A generated problem set for bench/sandboxfusion.py: N programs in Python
and C++ (half each), each with hidden tests (stdin -> expected stdout), and
the verdict verl 0.9.1 must give each test. Deterministic for a seed.

A program is a problem's correct solution or one of its kin: wrong (off by
one), crashing (division by zero / abort), looping (never ends: a run
timeout), a Python syntax error (no compile step in SandboxFusion's python:
a runtime error) and a C++ compile error. The mix repeats every 20
programs of a language (kind_cycle below): mostly correct and wrong, as a
rollout's grades are, one loop in 20.

verl's verdicts (verl/utils/reward_score/sandbox_fusion/utils.py,
check_correctness): True pass, False wrong answer, -1 API or sandbox error,
-2 runtime error, -3 run timeout, -4 compile error or compile timeout.
verl_verdict() below is that file's _process_single_case classification,
restated (verl's package imports torch, so it is not imported).

Usage: /usr/bin/python3 bench/sandboxfusion_problems.py [--n 40] [--seed 1]
prints the set as JSON (one program a line).
"""
import argparse
import json
import random

# Each problem: a name, how to make one test's input from an rng, the
# answer (an int) for an input, and its solution in Python and C++ as a
# body that reads the input and leaves the answer in `ans`.
PROBLEMS = [
    {
        "name": "sum_list",
        "input": lambda r: _list_input(r, 1, 30, -1000, 1000),
        "answer": lambda s: sum(_ints(s)[1:]),
        "py": "n = int(input())\na = list(map(int, input().split()))\nans = sum(a)\n",
        "cpp": "long n; std::cin >> n; long ans = 0; for (long i = 0; i < n; i++) { long x; std::cin >> x; ans += x; }\n",
    },
    {
        "name": "max_list",
        "input": lambda r: _list_input(r, 1, 30, -1000, 1000),
        "answer": lambda s: max(_ints(s)[1:]),
        "py": "n = int(input())\na = list(map(int, input().split()))\nans = max(a)\n",
        "cpp": "long n; std::cin >> n; long ans = -(1L << 60); for (long i = 0; i < n; i++) { long x; std::cin >> x; if (x > ans) ans = x; }\n",
    },
    {
        "name": "gcd_pair",
        "input": lambda r: f"{r.randint(1, 10**6)} {r.randint(1, 10**6)}\n",
        "answer": lambda s: _gcd(*_ints(s)),
        "py": "import math\nx, y = map(int, input().split())\nans = math.gcd(x, y)\n",
        "cpp": "long x, y; std::cin >> x >> y; while (y) { long t = x % y; x = y; y = t; } long ans = x;\n",
    },
    {
        "name": "fib_mod",
        "input": lambda r: f"{r.randint(1, 5000)}\n",
        "answer": lambda s: _fib_mod(_ints(s)[0]),
        "py": "n = int(input())\na, b = 0, 1\nfor _ in range(n):\n    a, b = b, (a + b) % 1000000007\nans = a\n",
        "cpp": "long n; std::cin >> n; long a = 0, b = 1; for (long i = 0; i < n; i++) { long t = (a + b) % 1000000007; a = b; b = t; } long ans = a;\n",
    },
    {
        "name": "count_even",
        "input": lambda r: _list_input(r, 1, 40, 0, 10**6),
        "answer": lambda s: sum(1 for x in _ints(s)[1:] if x % 2 == 0),
        "py": "n = int(input())\nans = sum(1 for x in map(int, input().split()) if x % 2 == 0)\n",
        "cpp": "long n; std::cin >> n; long ans = 0; for (long i = 0; i < n; i++) { long x; std::cin >> x; if (x % 2 == 0) ans++; }\n",
    },
    {
        "name": "digit_sum",
        "input": lambda r: f"{r.randint(0, 10**15)}\n",
        "answer": lambda s: sum(int(c) for c in s.strip()),
        "py": "ans = sum(int(c) for c in input().strip())\n",
        "cpp": "std::string s; std::cin >> s; long ans = 0; for (char c : s) ans += c - '0';\n",
    },
]

# Per language, the kinds of programs in the order they repeat (20 each).
KIND_CYCLE = {
    "python": ["correct", "wrong", "correct", "crash", "correct", "wrong", "correct", "syntax",
               "correct", "loop", "correct", "wrong", "correct", "crash", "correct", "correct",
               "wrong", "correct", "crash", "correct"],
    "cpp": ["correct", "wrong", "correct", "crash", "correct", "noncompile", "correct", "wrong",
            "correct", "loop", "correct", "wrong", "correct", "crash", "correct", "noncompile",
            "wrong", "correct", "crash", "correct"],
}

# The verdict verl gives each test of a program of each kind.
EXPECTED = {"correct": True, "wrong": False, "crash": -2, "syntax": -2, "loop": -3,
            "noncompile": -4}


def _ints(s):
    return [int(x) for x in s.split()]


def _gcd(x, y):
    while y:
        x, y = y, x % y
    return x


def _fib_mod(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % 1000000007
    return a


def _list_input(r, nmin, nmax, lo, hi):
    n = r.randint(nmin, nmax)
    return f"{n}\n{' '.join(str(r.randint(lo, hi)) for _ in range(n))}\n"


def python_program(problem, kind):
    body = problem["py"]
    if kind == "correct":
        return body + "print(ans)\n"
    if kind == "wrong":
        return body + "print(ans + 1)\n"
    if kind == "crash":
        return body + "print(ans // (ans - ans))\n"
    if kind == "syntax":
        return body + "print(ans\n"
    if kind == "loop":
        return body + "while True:\n    ans += 1\nprint(ans)\n"
    raise ValueError(kind)


def cpp_program(problem, kind):
    head = "#include <iostream>\n#include <string>\n#include <cstdlib>\nint main() {\n"
    body = problem["cpp"]
    if kind == "correct":
        tail = "std::cout << ans << std::endl; return 0; }\n"
    elif kind == "wrong":
        tail = "std::cout << ans + 1 << std::endl; return 0; }\n"
    elif kind == "crash":
        tail = "if (ans == ans) std::abort(); std::cout << ans << std::endl; return 0; }\n"
    elif kind == "noncompile":
        tail = "std::cout << ans << undeclared_name << std::endl; return 0; }\n"
    elif kind == "loop":
        tail = "volatile long spin = ans; for (;;) spin++; }\n"
    else:
        raise ValueError(kind)
    return head + body + tail


def generate(n, seed=1, tests=(2, 4)):
    """n programs (alternating python and cpp), each a dict: {id, language,
    problem, kind, code, tests: [{stdin, expected_output, verdict}]}."""
    r = random.Random(seed)
    out = []
    count = {"python": 0, "cpp": 0}
    for i in range(n):
        lang = "python" if i % 2 == 0 else "cpp"
        kind = KIND_CYCLE[lang][count[lang] % len(KIND_CYCLE[lang])]
        count[lang] += 1
        problem = r.choice(PROBLEMS)
        code = python_program(problem, kind) if lang == "python" else cpp_program(problem, kind)
        cases = []
        for _ in range(r.randint(*tests)):
            stdin = problem["input"](r)
            cases.append({"stdin": stdin, "expected_output": f"{problem['answer'](stdin)}\n",
                          "verdict": EXPECTED[kind]})
        out.append({"id": i, "language": lang, "problem": problem["name"], "kind": kind,
                    "code": code, "tests": cases})
    return out


def verl_verdict(api_response, expected_output, error=None):
    """verl 0.9.1's classification of one test's answer (_process_single_case):
    True, False, -1 (API error or SandboxError), -2, -3, -4."""
    if error is not None or not api_response:
        return -1
    status = api_response.get("status")
    compile_result = api_response.get("compile_result")
    run_result = api_response.get("run_result")
    compile_status = compile_result.get("status") if compile_result else None
    run_status = run_result.get("status") if run_result else None
    if status == "SandboxError":
        return -1
    if status == "Failed":
        if compile_result and (compile_status in ("Error", "TimeLimitExceeded") or
                               (compile_status == "Finished" and compile_result.get("return_code") != 0)):
            return -4
        if run_result:
            if run_status == "TimeLimitExceeded":
                return -3
            if run_status == "Error" or (run_status == "Finished" and run_result.get("return_code") != 0):
                return -2
            return -1
        return -1
    if status == "Success":
        if run_result and run_status == "Finished":
            actual = run_result.get("stdout") or ""
            if expected_output is None or str(actual).rstrip("\n") == str(expected_output).rstrip("\n"):
                return True
            return False
        return -1
    return -1


def program_verdicts(verdicts):
    """verl's check_correctness post-processing: after the first compile
    error, every later test of the program is -4 too."""
    out = list(verdicts)
    if -4 in out:
        first = out.index(-4)
        out[first:] = [-4] * (len(out) - first)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    for p in generate(args.n, args.seed):
        print(json.dumps(p))


if __name__ == "__main__":
    main()
