"""Harbor (PyPI `harbor[e2b]` 0.25.0, the terminal-bench harness that SkyRL, rLLM, TRL and
NeMo-Gym hand their environments to) running tasks on kiln through its `e2b` environment,
with nothing but E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY pointed at a real kilnd
(issue 44, item 6): `harbor run -p TASKS -a oracle -e e2b`, no --ek overrides, no prebuilt
images. Each trial builds its task's template (E2B's template-build protocol, the task's
Dockerfile FROM a Docker Hub name served by a local registry through --registry-mirror),
creates a sandbox with a day's lease, uploads and runs the oracle's solution and the tests
as root, reads the reward back and kills the sandbox.

Harbor needs Python >= 3.12, which Debian 12 lacks (3.11): the test uses the machine's own
(python3.12 on PATH, or pyenv's, as on kiln's build machines) and names it; on a machine
with none it is skipped with that reason."""
import glob
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from client import Client
from hub_images import hub_layout, push_hub_images
from lib.kilnd import own_kilnd
from lib.venvs import setup_venv_or_fresh
from oci import Registry

pytestmark = pytest.mark.xdist_group("harbor")

HERE = Path(__file__).resolve().parent
TASKS = HERE / "harbor_tasks"
HARBOR = ["harbor[e2b]==0.25.0", "e2b==2.63.0"]
HUB_NAMES = ["ubuntu:24.04", "python:3.12-slim-bookworm"]


def python_312():
    """A Python >= 3.12 of this machine's that runs: pyenv's installed versions first (pyenv's
    shims on PATH answer only for the version selected), else one on PATH; None for none."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates = sorted(glob.glob(str(root / "versions" / "3.1[2-9]*" / "bin" / "python3")))
    candidates += [p for n in ("python3.12", "python3.13", "python3.14") if (p := shutil.which(n))]
    for path in candidates:
        r = subprocess.run([path, "-c", "import sys; print(sys.version_info >= (3, 12))"],
                           capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip() == "True":
            return path
    return None


@pytest.fixture(scope="module")
def harbor():
    """The `harbor` command of a venv on the machine's Python >= 3.12: the one `make setup`
    keeps (/opt/kiln/harbor-venv), else a fresh one."""
    python = python_312()
    if not python:
        pytest.skip("Harbor 0.25.0 needs Python >= 3.12 and this machine has none (Debian 12's "
                    "is 3.11; install one, e.g. with pyenv, to run these tests)")
    version = subprocess.run([python, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"Harbor runs on {python} ({version})")
    with setup_venv_or_fresh("/opt/kiln/harbor-venv", HARBOR, "kiln-harbor-venv-", python=python,
                             timeout=1200) as d:
        yield f"{d}/bin/harbor"


@pytest.fixture(scope="module")
def kiln():
    """A kilnd whose Docker Hub is a local registry holding the tasks' base images, and a key
    of its own for Harbor."""
    root = Path(tempfile.mkdtemp(prefix="kiln-harbor-"))
    with Registry(root / "registry") as reg:
        push_hub_images(reg, hub_layout(root / "hub"), HUB_NAMES)
        with own_kilnd() as start:
            d = start("--registry-mirror", f"docker.io=http://{reg.host}")
            admin = Client(d.url, key=d.admin_key)
            secret = admin.ok("POST", "/v1/keys", json={"name": "harbor"})["secret"]
            yield d, admin, "e2b_" + secret[len("kiln_"):]
    shutil.rmtree(root, ignore_errors=True)


def run_harbor(harbor, kiln, jobs):
    """`harbor run` of every task on kiln; each trial's result by task name."""
    d, _, key = kiln
    env = dict(os.environ, E2B_API_URL=d.url + "/e2b", E2B_SANDBOX_URL=d.url + "/e2b/sandbox",
               E2B_API_KEY=key, LITELLM_LOCAL_MODEL_COST_MAP="True")
    for name in ("E2B_DOMAIN", "E2B_DEBUG", "E2B_ACCESS_TOKEN"):
        env.pop(name, None)
    p = subprocess.run([harbor, "run", "-p", str(TASKS), "-a", "oracle", "-e", "e2b", "-n", "4",
                        "-o", str(jobs), "-y"], env=env, capture_output=True, text=True,
                       timeout=900, cwd=jobs.parent)
    results = {}
    for f in glob.glob(str(jobs / "*" / "*" / "result.json")):
        r = json.loads(Path(f).read_text())
        results[r["task_name"]] = r
    assert len(results) == 4, f"exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return results


def reward(result):
    return ((result.get("verifier_result") or {}).get("rewards") or {}).get("reward")


def templates(admin):
    """The images Harbor's trials built: (name, state) by id."""
    listed = admin.ok("GET", "/v1/images", query={"limit": 100})["data"]
    return {i["id"]: (i["name"], i["state"]) for i in listed if "__" in (i["name"] or "")}


def test_harbor_runs_tasks_on_kiln_with_e2bs_environment(harbor, kiln, tmp_path):
    d, admin, _ = kiln
    results = run_harbor(harbor, kiln, tmp_path / "jobs")
    assert reward(results["count-words"]) == 1.0, results["count-words"]
    assert reward(results["reverse-file"]) == 1.0, results["reverse-file"]
    assert reward(results["wrong-answer"]) == 0.0, results["wrong-answer"]  # scored, and wrong
    for name in ("count-words", "reverse-file", "wrong-answer"):
        assert results[name]["exception_info"] is None, results[name]
    failed = results["failing-run"]
    assert reward(failed) is None and failed["exception_info"], failed
    why = json.dumps(failed["exception_info"])
    # The failing RUN, in E2B's numbering: the Dockerfile's RUN is the template's 4th step
    # (after USER root, WORKDIR / and WORKDIR /app, which E2B's Dockerfile reader adds).
    assert "BuildException" in why and "step 4" in why and "exit code 7" in why, why
    built = templates(admin)
    ready = sorted(name.split("__")[0] for name, state in built.values() if state == "ready")
    assert ready == ["count-words", "reverse-file", "wrong-answer"], built
    # Harbor tries a failed template build twice; each try is a failed image of that task.
    assert all(name.startswith("failing-run__") for name, state in built.values()
               if state != "ready"), built
    # Each trial's sandbox (created with Harbor's day-long lease, which kiln used to refuse)
    # was killed at its end: none is left.
    assert admin.ok("GET", "/v1/sandboxes")["data"] == []


def test_a_second_run_reuses_the_templates_it_built(harbor, kiln, tmp_path):
    d, admin, _ = kiln
    before = templates(admin)
    results = run_harbor(harbor, kiln, tmp_path / "jobs")
    assert [reward(results[n]) for n in ("count-words", "reverse-file", "wrong-answer")] == \
        [1.0, 1.0, 0.0], results
    after = templates(admin)
    new = {i: v for i, v in after.items() if i not in before}
    # Only the task whose environment never built is built again (and fails again).
    assert new and all(name.startswith("failing-run__") and state == "failed"
                       for name, state in new.values()), (before, after)
