"""python.md sample 6: exec a shell string, then an argv with cwd, env and a
long timeout (streamed by the client)."""
from withruntime import Sandbox

with Sandbox.create() as sbx:
    made = sbx.exec("mkdir -p /workspace/app && echo ready > /workspace/app/status.txt")
    assert made.exit_code == 0, made
    result = sbx.exec(
        ["python3", "-c", "import os, sys; print(open('status.txt').read().strip(), os.environ['MODE']); "
                          "print('warn', file=sys.stderr); sys.exit(3)"],
        cwd="/workspace/app",
        env={"MODE": "test"},
        timeout_ms=120_000,
    )
    print(result.exit_code, result.stdout, result.stderr)
    assert result.exit_code == 3, result
    assert result.stdout == "ready test\n", result
    assert result.stderr == "warn\n", result
    assert result.timed_out is False
