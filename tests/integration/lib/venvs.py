"""Venvs holding the vendors' own clients from PyPI: the one `make setup` keeps under
/opt/kiln when it holds the pinned versions (so a run does not reinstall them), else a fresh
one made by the test that needs it."""
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

# What pip says when the package index is out of reach: the test is then skipped, saying so.
UNREACHABLE = ("Failed to establish a new connection", "Temporary failure in name resolution",
               "Network is unreachable", "Could not fetch URL", "Connection refused",
               "Max retries exceeded", "ConnectTimeoutError", "ReadTimeoutError",
               "ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED")


@contextlib.contextmanager
def venv_with(packages, prefix, python=sys.executable, timeout=900):
    """`with venv_with(["pkg==1.0"], "kiln-x-venv-") as d:` a fresh venv of `python` holding
    `packages` (d/bin/python, d/bin/<script>), removed at the end. Skips the test when pip
    cannot reach the package index; fails it when the install fails otherwise."""
    d = tempfile.mkdtemp(prefix=prefix)
    try:
        subprocess.run([python, "-m", "venv", d], check=True, timeout=120)
        pip = subprocess.run([f"{d}/bin/pip", "install", "-q", "--disable-pip-version-check",
                              *packages], capture_output=True, text=True, timeout=timeout)
        if pip.returncode != 0:
            words = pip.stdout + pip.stderr
            if any(u in words for u in UNREACHABLE):
                pytest.skip(f"pip cannot reach the package index for {' '.join(packages)}: "
                            f"{words[-300:]}")
            pytest.fail(f"pip install {' '.join(packages)} failed:\n{words}")
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _pins_hold(python, packages):
    """Whether `python`'s environment has each "name[extras]==version" of `packages`."""
    pins = {re.sub(r"\[.*\]", "", p.split("==")[0]): p.split("==")[1] for p in packages}
    check = ("import importlib.metadata as m, sys\n"
             f"sys.exit(any(m.version(n) != v for n, v in {pins!r}.items()))")
    try:
        return subprocess.run([python, "-c", check], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@contextlib.contextmanager
def setup_venv_or_fresh(kept, packages, prefix, python=sys.executable, timeout=900):
    """`kept` (a venv that `make setup` made, e.g. /opt/kiln/e2b-venv) when it holds exactly
    `packages`, used as it is; else a fresh venv_with(packages)."""
    if os.path.exists(f"{kept}/bin/python") and _pins_hold(f"{kept}/bin/python", packages):
        yield kept
        return
    with venv_with(packages, prefix, python=python, timeout=timeout) as d:
        yield d
