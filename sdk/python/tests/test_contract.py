"""The SDK's API contract values (kiln/contract.py) against src/api/kiln/openapi.json."""
import json
from pathlib import Path

import pytest

from kiln import contract

OPENAPI = Path(__file__).resolve().parents[3] / "src" / "api" / "kiln" / "openapi.json"


@pytest.fixture(scope="module")
def doc():
    return json.loads(OPENAPI.read_text())


def _parameter(doc, path, method, name):
    for p in doc["paths"][path][method]["parameters"]:
        if p.get("name") == name:
            return p["schema"]
    raise AssertionError(f"{method.upper()} {path} has no parameter {name}")


def test_exec_timeout_default_and_grace(doc):
    timeout = doc["components"]["schemas"]["ExecRequest"]["properties"]["timeoutMs"]
    assert contract.DEFAULT_EXEC_TIMEOUT_MS == timeout["default"]
    assert contract.EXEC_GRACE_MS == timeout["x-kiln-grace-ms"]


def test_output_wait_maximum(doc):
    wait = _parameter(doc, "/v1/sandboxes/{id}/processes/{pid}/output", "get", "waitMs")
    assert contract.MAX_OUTPUT_WAIT_MS == wait["maximum"]


def test_the_sdk_uses_them():
    """The defaults are used by name, not written again."""
    from kiln import gym, sandbox

    assert sandbox.DEFAULT_EXEC_TIMEOUT_MS is contract.DEFAULT_EXEC_TIMEOUT_MS
    defaults = gym.SandboxEnv.__init__.__kwdefaults__
    assert defaults["exec_timeout_ms"] == contract.DEFAULT_EXEC_TIMEOUT_MS


def test_exec_output_caps(doc):
    for stream in ("stdout", "stderr"):
        prop = doc["components"]["schemas"]["CommandResult"]["properties"][stream]
        assert contract.EXEC_OUTPUT_CAP == prop["x-kiln-max-bytes"]
        assert contract.EXEC_LONG_OUTPUT_CAP == prop["x-kiln-long-max-bytes"]
        assert contract.EXEC_LONG_CAP_AFTER_MS == prop["x-kiln-long-after-timeout-ms"]
    assert contract.exec_output_cap() == 65536
    assert contract.exec_output_cap(60_000) == 65536
    assert contract.exec_output_cap(60_001) == 1 << 20


def test_files_list_parameters(doc):
    names = {p.get("name") for p in doc["paths"]["/v1/sandboxes/{id}/files/list"]["get"]["parameters"]}
    assert {"depth", "glob", "hidden", "limit"} <= names
