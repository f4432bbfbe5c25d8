"""kiln.ray on a real Ray cluster: three Ray nodes on this machine
(ray.cluster_utils.Cluster), each with its own kilnd (own state directory and
port), driven by ray_driver.py under the Ray venv's interpreter
(/opt/kiln/ray-venv/bin/python, set up by `make ray-env`). One cluster serves
every scenario; each test checks one scenario's report, then that nothing is
left: no running sandbox on any kilnd, no Ray process of this cluster."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import REPO, start_kilnd, stop_kilnd
from client import Client

# In make test's parallel part: its cluster and kilnds are its own (own temp
# and state folders, ports), and nothing here is timed against a neighbour.
RAY_PYTHON = Path(os.environ.get("KILN_RAY_PYTHON", "/opt/kiln/ray-venv/bin/python"))
NODES = 3
DRIVER_TIMEOUT = 900


def _ray_processes(temp_dir):
    out = subprocess.run(["pgrep", "-f", temp_dir], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out if int(p) != os.getpid()]


@pytest.fixture(scope="module")
def run(request):
    if not RAY_PYTHON.exists():
        pytest.fail(f"{RAY_PYTHON} not found: run `make ray-env` (the tests' Ray venv)")
    root = Path(tempfile.mkdtemp(prefix="kiln-ray-", dir="/tmp"))
    # Room for 4 sandboxes of 256 MiB each: the Ray resource is read from it.
    daemons = [start_kilnd(root / f"node{i}", "--host-memory-mib", "256", "--memory-overcommit", "4")
               for i in range(NODES)]
    nodes = [{"url": d.url, "key": d.admin_key, "pid": d.proc.pid, "state_dir": str(d.state_dir)}
             for d in daemons]
    temp_dir = str(root / "ray")
    # RAY_TMPDIR: Ray writes its cluster address file under <RAY_TMPDIR>/ray
    # whatever temp_dir the head node has (/tmp/ray by default, which exists
    # only where Ray ran before); here that is the head node's own temp_dir.
    env = dict(os.environ, PYTHONPATH=str(REPO / "sdk" / "python"), RAY_USAGE_STATS_ENABLED="0",
               RAY_TMPDIR=str(root))
    log = root / "driver.log"
    with open(log, "wb") as out:
        proc = subprocess.run([str(RAY_PYTHON), str(Path(__file__).parent / "ray_driver.py"),
                               "--nodes", json.dumps(nodes), "--temp-dir", temp_dir],
                              stdout=subprocess.PIPE, stderr=out, env=env, timeout=DRIVER_TIMEOUT)
    (root / "driver.out").write_bytes(proc.stdout)
    reports = {}
    for line in proc.stdout.decode(errors="replace").splitlines():
        if line.startswith("KILNRAY "):
            r = json.loads(line[len("KILNRAY "):])
            reports[r["scenario"]] = r
    # The lost node's kilnd comes back (as a rebooted host's would) and finds its sandboxes gone.
    for i, d in enumerate(daemons):
        if d.proc.poll() is not None:
            daemons[i] = start_kilnd(root / f"node{i}", "--host-memory-mib", "256", "--memory-overcommit", "4")
    time.sleep(1)
    leftovers = {}
    for i, d in enumerate(daemons):
        c = Client(d.url, key=d.admin_key)
        listed = c.get("/v1/sandboxes", query={"limit": 500}).json()["data"]
        leftovers[i] = [s["id"] for s in listed if s["state"] != "stopped"]
        for s in listed:
            c.request("DELETE", f"/v1/sandboxes/{s['id']}")
    ray_left = _ray_processes(temp_dir)
    for pid in ray_left:
        os.kill(pid, signal.SIGKILL)
    for d in daemons:
        stop_kilnd(d)
    failed_before = request.session.testsfailed
    yield {"reports": reports, "rc": proc.returncode, "log": log, "leftovers": leftovers,
           "ray_left": ray_left}
    if request.session.testsfailed == failed_before:
        shutil.rmtree(root, ignore_errors=True)


def _report(run, scenario):
    r = run["reports"]
    assert "error" not in r, r["error"]["traceback"]
    assert scenario in r, f"no {scenario} report (driver exit {run['rc']}; log {run['log']})"
    return r[scenario]


def test_each_node_advertises_its_kilnd_capacity_as_a_ray_resource(run):
    c = _report(run, "cluster")
    assert len(c["tags"]) == NODES and sorted(c["attached"]) == sorted(c["tags"])
    # Each kilnd plans with 256 MiB x 4 = 1 GiB: 4 sandboxes of 256 MiB.
    assert c["resources"] == {"kiln_sandbox": 4.0 * NODES}, c


def test_a_batch_from_one_snapshot_spreads_over_the_nodes(run):
    b = _report(run, "batch")
    assert b["values"] == [1000 + i for i in range(40)]
    assert set(b["nodes"]) == set(_report(run, "cluster")["tags"]), b["nodes"]
    # Each sandbox ran on the node of the task that made it; the snapshot came from the head.
    assert b["sandbox_nodes"] == b["nodes"]
    assert b["attempts"] == [1] * 40
    assert all(ids == [] for ids in b["running_after"].values()), b["running_after"]


def test_a_fork_places_its_copies_on_other_nodes(run):
    f = _report(run, "fork")
    assert f["states"] == ["forked-state\n"] * 3
    assert len(set(f["nodes"])) == 3, f["nodes"]
    assert all(c.split(".")[0] == n for c, n in zip(f["copies"], f["nodes"]))
    assert set(f["copies"]) <= set(f["owned"])


def test_a_sandbox_is_stopped_when_the_actor_that_owned_it_dies(run):
    o = _report(run, "owner_died")
    assert o["state"] == "stopped", o


def test_an_image_snapshot_travels_through_the_shared_directory(run):
    s = _report(run, "image_shared")
    assert s["values"] == [2000 + i for i in range(12)]
    # A copy on the head node runs the image; one restored elsewhere from the
    # imported snapshot has no `image` there (the sender's id is provenance
    # only), and its /srv/seed read (image_rollout) shows it runs its root.
    assert set(s["images"]) <= {s["image"], None} and s["image"] in s["images"], s["images"]
    assert len(set(s["nodes"])) >= 2, s["nodes"]  # so some fetched it, layers and all
    # Fetched once into the shared directory (by the first node that needed it), whole.
    local_id = s["snapshot"].split(".", 1)[1]
    assert s["shared"] == [f"{local_id}.tar"], s["shared"]
    assert all(ids == [] for ids in s["running_after"].values()), s["running_after"]


def test_nodes_holding_an_images_layer_fetch_a_snapshot_without_it(run):
    d = _report(run, "image_direct")
    head = _report(run, "cluster")["tags"][0]
    assert d["values"] == [3000 + i for i in range(12)]
    fetched = {tag: f for tag, f in d["fetches"].items() if f}
    assert fetched and head not in fetched, d["fetches"]  # the head made it: nothing to fetch
    for tag, fetches in fetched.items():
        assert [f["how"] for f in fetches] == ["imported"], fetches
        holds = bool(d["held_before"][tag])  # imported the first snapshot, layer and all
        assert (fetches[0]["layersSkipped"], fetches[0]["layersSent"]) == ((1, 0) if holds else (0, 1)), (tag, d)
    assert all(ids == [] for ids in d["running_after"].values()), d["running_after"]


def test_a_lost_node_loses_only_its_episodes_which_are_retried(run):
    n = _report(run, "node_lost")
    assert n["killed"]
    assert n["values"] == [1000 + i for i in range(24)]
    retried = [i for i, a in enumerate(n["attempts"]) if a > 1]
    # Only what ran on the lost node (4 slots) was lost; each ran again elsewhere.
    assert 1 <= len(retried) <= 4, n
    assert all(n["nodes"][i] != n["victim"] for i in retried), n
    assert all(n["lost"][i] for i in retried) and not any(n["lost"][i] for i in range(24) if i not in retried)
    assert n["lost_error"] and "lost" in n["lost_error"] and n["victim"] in n["lost_error"]
    assert all(ids == [] for ids in n["running_after"].values()), n["running_after"]


def test_nothing_is_left_over(run):
    assert "shutdown" in run["reports"], f"driver exit {run['rc']}; log {run['log']}"
    assert run["ray_left"] == [], "Ray processes of the test cluster outlived it"
    assert run["leftovers"] == {i: [] for i in range(NODES)}, run["leftovers"]
