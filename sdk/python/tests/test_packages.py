"""The packages' surface, without a daemon."""
import importlib.util
import re
from pathlib import Path

import kiln

SDK_DIR = Path(__file__).resolve().parents[1]


def test_the_distribution_installs_only_kiln_and_all_of_it():
    # A top-level `withruntime` would overwrite the files of the public runtime's own package.
    text = (SDK_DIR / "pyproject.toml").read_text()
    listed = re.search(r'^packages = \[(.*)\]$', text, re.M)
    assert listed, text
    packages = set(re.findall(r'"([^"]+)"', listed.group(1)))
    assert all(p == "kiln" or p.startswith("kiln.") for p in packages), packages
    # Every package under kiln/ ships (kiln.ray once did not: setuptools takes the list as is).
    on_disk = {".".join(d.relative_to(SDK_DIR).parts) for d in (SDK_DIR / "kiln").rglob("*")
               if d.is_dir() and (d / "__init__.py").exists()} | {"kiln"}
    assert packages == on_disk, (packages, on_disk)
    assert not (SDK_DIR / "withruntime").exists()


def test_withruntime_is_not_kiln():
    spec = importlib.util.find_spec("withruntime")
    if spec is not None:  # the vendor's package may be installed; it must not be ours
        assert "sdk/python" not in (spec.origin or "")


def test_public_names():
    for name in ("Runtime", "AsyncRuntime", "Sandbox", "AsyncSandbox", "NotFoundError", "ConflictError",
                 "RuntimeAPIError", "CommandResult"):
        assert hasattr(kiln, name), name
