"""The packages' surface, without a daemon."""
import importlib.util
import re
from pathlib import Path

import kiln

SDK_DIR = Path(__file__).resolve().parents[1]


def test_the_distribution_installs_only_kiln():
    # A top-level `withruntime` would overwrite the files of the public runtime's own package.
    text = (SDK_DIR / "pyproject.toml").read_text()
    assert re.search(r'^packages = \["kiln"\]$', text, re.M), text
    assert not (SDK_DIR / "withruntime").exists()


def test_withruntime_is_not_kiln():
    spec = importlib.util.find_spec("withruntime")
    if spec is not None:  # the vendor's package may be installed; it must not be ours
        assert "sdk/python" not in (spec.origin or "")


def test_public_names():
    for name in ("Runtime", "AsyncRuntime", "Sandbox", "AsyncSandbox", "NotFoundError", "ConflictError",
                 "RuntimeAPIError", "CommandResult"):
        assert hasattr(kiln, name), name
