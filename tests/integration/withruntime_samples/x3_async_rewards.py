"""Rewards scored outside the sandboxes: candidates run at once under
AsyncRuntime, their outputs scored here with asyncio.gather."""
import asyncio

from withruntime import AsyncRuntime

CANDIDATES = {
    "right": "def add(a, b):\n    return a + b\n",
    "wrong": "def add(a, b):\n    return a - b\n",
    "crash": "def add(a, b):\n    raise ValueError('no')\n",
}
TESTS = "from solution import add\nprint(sum(add(a, b) == a + b for a, b in [(1, 2), (3, 4), (0, 0), (5, -5)]))\n"


async def run(runtime, name, source):
    async with await runtime.sandboxes.create(memory_mib=256, labels={"candidate": name}) as sbx:
        await sbx.files.write("/workspace/solution.py", source)
        await sbx.files.write("/workspace/tests.py", TESTS)
        return name, await sbx.exec("python3 tests.py", cwd="/workspace", timeout_ms=30_000)


def score(result):
    return int(result.stdout.strip()) / 4 if result.exit_code == 0 else 0.0


async def main():
    async with AsyncRuntime() as runtime:
        results = await asyncio.gather(*(run(runtime, n, s) for n, s in CANDIDATES.items()))
    rewards = {name: score(result) for name, result in results}
    print(rewards)
    assert rewards == {"right": 1.0, "wrong": 0.25, "crash": 0.0}, rewards


asyncio.run(main())
