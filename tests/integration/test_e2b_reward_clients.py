"""Trainers' E2B code rewards against a real kilnd (issue 45, item 4), with the calls they
make, word for word, through E2B's published SDKs (e2b 2.63.0, e2b-code-interpreter 2.11.5):
neither trainer is a package PyPI serves whole, so the calls are taken from their sources.

- AReaL's E2B-protocol backend (areal/infra/sandbox/cube_sandbox.py on its main branch):
  batch creation through the SDK's low-level post_sandboxes with a shared ApiClient and
  NewSandbox(template_id, timeout, auto_pause=False, metadata={}, env_vars={}, secure=True,
  allow_internet_access=True); CubeSandboxExecutor.create's AsyncSandbox.create(api_url,
  api_key, template, timeout); run_code(code, timeout) read as logs.stdout, error and text;
  commands.run(command, timeout).
- open-r1's code reward (src/open_r1/utils/code_providers.py, E2BProvider._run_script):
  AsyncSandbox.create(timeout=30, request_timeout=28), run_code of its evaluation script
  under asyncio.wait_for, float(execution.text) as the reward, then kill().
"""
import pytest

from e2b_clients import (GROUP, e2b_create_until_built, e2b_env, e2b_key,  # noqa: F401
                         e2b_python, run_python)

pytestmark = GROUP


@pytest.fixture(scope="module")
def interpreter_ready(kilnd, api, e2b_key):  # noqa: F811
    """code-interpreter-v1, the SDK's default template, built (once per kilnd) before the
    trainers' calls, as a training run's first sandboxes would wait for it."""
    made = e2b_create_until_built(kilnd, e2b_key[1], "code-interpreter-v1")
    api.request("DELETE", f"/v1/sandboxes/{made['sandboxID']}")


AREAL = """
import asyncio, os, time
from e2b_code_interpreter import AsyncSandbox

# create_sandbox_info_sync, as AReaL batch-creates: the low-level API, a shared client.
from httpx import Limits
from e2b.api import ApiClient
from e2b.connection_config import ConnectionConfig
from e2b.api.client.api.sandboxes import post_sandboxes
from e2b.api.client.models import Error, NewSandbox
from e2b.api.client.types import Unset

config = ConnectionConfig()
try:
    client = ApiClient(config, limits=Limits(max_connections=50, max_keepalive_connections=50,
                                             keepalive_expiry=300))
except TypeError:  # as AReaL does: an SDK without the limits argument
    client = ApiClient(config)
client.get_httpx_client()
batch = []
for _ in range(2):
    res = post_sandboxes.sync_detailed(body=NewSandbox(template_id="base", timeout=1800,
        auto_pause=False, metadata={}, env_vars={}, secure=True, allow_internet_access=True),
        client=client)
    assert res.status_code < 300 and not isinstance(res.parsed, Error), res.content
    token = res.parsed.envd_access_token
    batch.append({"id": res.parsed.sandbox_id, "envd": res.parsed.envd_version,
                  "token": None if isinstance(token, Unset) else bool(token)})

async def executor():
    # CubeSandboxExecutor.create, run_code, run_command.
    sb = await AsyncSandbox.create(api_url=os.environ["E2B_API_URL"],
                                   api_key=os.environ["E2B_API_KEY"], timeout=int(300.0))
    execution = await sb.run_code("import math\\nprint('hello areal')\\nmath.factorial(5)",
                                  timeout=int(30.0))
    failed = await sb.run_code("raise ValueError('bad step')", timeout=int(30.0))
    result = await sb.commands.run("echo $((6 * 7))", timeout=int(30.0))
    await sb.kill()
    return {"stdout": "\\n".join(execution.logs.stdout), "error": execution.error,
            "text": execution.text, "failed": str(getattr(failed.error, "value", failed.error)),
            "command": [result.exit_code, result.stdout]}

r = asyncio.run(executor())
from e2b import Sandbox
for b in batch:
    Sandbox.kill(b["id"])
out({"batch": batch, **r})
"""


def test_areal_cube_sandbox_calls(e2b_python, e2b_env, interpreter_ready):  # noqa: F811
    out = run_python(e2b_python, e2b_env, AREAL, timeout=600)
    assert len(out["batch"]) == 2 and all(b["token"] for b in out["batch"]), out
    assert out["stdout"] == "hello areal\n" and out["text"] == "120", out
    assert out["error"] is None and out["failed"] == "bad step", out
    assert out["command"] == [0, "42\n"], out


# open-r1's evaluation script (rewards.py's template, shortened): runs the solution on
# each case in a subprocess and leaves the pass rate as the last expression.
OPEN_R1_SCRIPT = '''
import subprocess
import json

def evaluate_code(code, test_cases):
    passed = 0
    for case in test_cases:
        process = subprocess.run(["python3", "-c", code], input=case["input"], text=True,
                                 capture_output=True, timeout=5)
        if process.returncode == 0 and process.stdout.strip() == case["output"].strip():
            passed += 1
    return passed / len(test_cases)

code_snippet = "print(int(input()) * 2)"
test_cases = json.loads('[{"input": "2", "output": "4"}, {"input": "5", "output": "10"},'
                        ' {"input": "1", "output": "3"}, {"input": "0", "output": "0"}]')
evaluate_code(code_snippet, test_cases)
'''

OPEN_R1 = """
import asyncio
from e2b_code_interpreter import AsyncSandbox

SCRIPT = %r

async def run_script(script, semaphore):
    SANDBOX_TIMEOUT = 30
    MARGIN = 2
    REQUEST_TIMEOUT = SANDBOX_TIMEOUT - MARGIN
    ASYNCIO_TIMEOUT = SANDBOX_TIMEOUT + MARGIN
    async with semaphore:
        sandbox = await AsyncSandbox.create(timeout=SANDBOX_TIMEOUT, request_timeout=REQUEST_TIMEOUT)
        try:
            execution = await asyncio.wait_for(sandbox.run_code(script, language="python"),
                                               timeout=ASYNCIO_TIMEOUT)
            return float(execution.text)
        finally:
            await sandbox.kill()

async def main():
    semaphore = asyncio.Semaphore(2)
    return await asyncio.gather(*[run_script(SCRIPT, semaphore) for _ in range(3)])

out(asyncio.run(main()))
"""


def test_open_r1_code_reward_calls(e2b_python, e2b_env, interpreter_ready):  # noqa: F811
    rewards = run_python(e2b_python, e2b_env, OPEN_R1 % OPEN_R1_SCRIPT, timeout=600)
    assert rewards == [0.75, 0.75, 0.75], rewards
