"""Drives kiln.ray on a real Ray cluster for test_ray.py (run with the Ray venv's
interpreter, /opt/kiln/ray-venv/bin/python, the SDK on PYTHONPATH).

    ray_driver.py --nodes JSON --temp-dir DIR

JSON: [{"url", "key", "pid", "state_dir"}...], one kilnd per Ray node (the first is the head's).
Prints one line per scenario, `KILNRAY {"scenario": ..., ...}`; the test asserts on them.
"""

import argparse
import functools
import json
import os
import signal
import subprocess
import sys
import time
import traceback

import ray
from ray.cluster_utils import Cluster

import kiln.ray as kray
from kiln.ray.cluster import NAMESPACE, agent_name

OBJECT_STORE = 80 * 2**20
ARGS = None
SEED_CMD = "echo 1000 > /tmp/seed; nohup python3 -c 'import time; time.sleep(3600)' >/dev/null 2>&1 &"


def report(scenario, **fields):
    print("KILNRAY " + json.dumps({"scenario": scenario, **fields}), flush=True)


def rollout(snapshot_id, rt, i):
    """One episode: a sandbox from the batch's snapshot, one command, the reward."""
    sbx = rt.sandboxes.create(snapshot=snapshot_id, vcpu=1, memory_mib=256, timeout_seconds=300)
    r = sbx.exec(f"echo $(( $(cat /tmp/seed) + {i} ))")
    return {"value": int(r.stdout), "sandbox": sbx.id}


def slow_rollout(snapshot_id, rt, i):
    sbx = rt.sandboxes.create(snapshot=snapshot_id, vcpu=1, memory_mib=256, timeout_seconds=300)
    r = sbx.exec(f"sleep 2; echo $(( $(cat /tmp/seed) + {i} ))")
    return {"value": int(r.stdout), "sandbox": sbx.id}


def image_rollout(snapshot_id, rt, i):
    """An episode on the image snapshot: its file from the image, its seed from memory/disk."""
    sbx = rt.sandboxes.create(snapshot=snapshot_id, vcpu=1, memory_mib=256, timeout_seconds=300)
    r = sbx.exec(f"cat /srv/seed >/dev/null && echo $(( $(cat /tmp/seed) + {i} ))")
    return {"value": int(r.stdout), "sandbox": sbx.id, "image": sbx.info.get("image")}


def wait_detached(tag, within=30):
    """Until the node's agent is gone (ray.kill is asynchronous), so attach makes a new one."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            ray.get_actor(agent_name(tag), namespace=NAMESPACE)
        except ValueError:
            return
        time.sleep(0.2)
    raise AssertionError(f"the agent of node {tag} outlived ray.kill by {within} s")


@ray.remote(num_cpus=0, resources={kray.RESOURCE: 1})
class Holder:
    """An actor that owns a sandbox; killing it must stop the sandbox."""

    def make(self):
        sbx = kray.runtime().sandboxes.create(vcpu=1, memory_mib=256, timeout_seconds=600)
        return sbx.id


def state_of(sandbox_id):
    """A sandbox's state without becoming one of its owners."""
    tag, local = sandbox_id.split(".", 1)
    return kray.runtime_for(tag).request("GET", f"/v1/sandboxes/{local}")["state"]


def running(tag):
    rt = kray.runtime_for(tag)
    return [s.id for s in rt.sandboxes.list(state="running")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", required=True)
    ap.add_argument("--temp-dir", required=True)
    ap.add_argument("--slots", type=int, default=4)
    args = ap.parse_args()
    global ARGS
    ARGS = args
    nodes = json.loads(args.nodes)
    t0 = time.monotonic()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "object_store_memory": OBJECT_STORE,
        "temp_dir": args.temp_dir,
        "resources": kray.node_resources(nodes[0]["url"], nodes[0]["key"], memory_mib=256)})
    ray_nodes = [cluster.head_node]
    for n in nodes[1:]:
        ray_nodes.append(cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE,
                                          resources=kray.node_resources(n["url"], n["key"], memory_mib=256)))
    ray.init(address=cluster.address, namespace="kiln-test", log_to_driver=False)
    tags = [kray.attach(n["url"], n["key"], node_id=rn.node_id, owner_timeout=6)
            for n, rn in zip(nodes, ray_nodes)]
    report("cluster", seconds=round(time.monotonic() - t0, 1), tags=tags, attached=kray.nodes(),
           resources={k: v for k, v in ray.cluster_resources().items() if k == kray.RESOURCE})
    try:
        victim = run(cluster, ray_nodes, nodes, tags)
        report("victim", index=victim)
    except Exception:  # noqa: BLE001 -- the test reports it
        report("error", traceback=traceback.format_exc())
    finally:
        for tag in tags:
            kray.detach(tag)
        ray.shutdown()
        cluster.shutdown()
        report("shutdown", seconds=round(time.monotonic() - t0, 1))


def run(cluster, ray_nodes, nodes, tags):
    head = kray.runtime_for(tags[0])

    # A batch of 40 rollouts from one snapshot taken on the head node's kilnd.
    base = head.sandboxes.create(vcpu=1, memory_mib=256)
    base.exec(SEED_CMD)
    snap = base.snapshot()
    base.stop()
    t = time.monotonic()
    res = kray.map_rollouts(functools.partial(rollout, snap["id"]), range(40))
    report("batch", seconds=round(time.monotonic() - t, 1), values=[r["value"] for r in res],
           nodes=res.nodes, attempts=res.attempts, snapshot=snap["id"],
           sandbox_nodes=[r["sandbox"].split(".")[0] for r in res],
           running_after={tag: running(tag) for tag in tags})

    # A fork of a running sandbox, its copies spread by a placement group.
    src = head.sandboxes.create(vcpu=1, memory_mib=256)
    src.exec("echo forked-state > /tmp/state")
    copies = kray.fork(src, 3, strategy="STRICT_SPREAD")
    report("fork", copies=[c.id for c in copies], nodes=[c.node for c in copies],
           states=[c.exec("cat /tmp/state").stdout for c in copies],
           owned=kray.owned())
    for c in copies + [src]:
        c.stop()

    # An actor that dies: the sandbox it owned is stopped by its node's agent.
    holder = Holder.remote()
    sid = ray.get(holder.make.remote())
    ray.kill(holder)
    t = time.monotonic()
    state = None
    while time.monotonic() - t < 60:
        state = state_of(sid)
        if state == "stopped":
            break
        time.sleep(0.5)
    report("owner_died", sandbox=sid, state=state, seconds=round(time.monotonic() - t, 1))

    # A snapshot of an image built on the head node, its layers fetched by the other nodes
    # through a shared directory (the agents attached again with one).
    shared = os.path.join(os.path.dirname(ARGS.temp_dir), "shared")
    os.makedirs(shared, exist_ok=True)
    for n, rn, tag in zip(nodes, ray_nodes, tags):
        kray.detach(tag)
        wait_detached(tag)
        kray.attach(n["url"], n["key"], node_id=rn.node_id, owner_timeout=6, shared_dir=shared)
    image = head.images.build("ray-image", recipe={"files": [{"path": "/srv/seed", "content": "2000\n"}]},
                              timeout=300)
    src = head.sandboxes.create(image=image.id, vcpu=1, memory_mib=256)
    src.exec("cp /srv/seed /tmp/seed")
    image_snap = src.snapshot()
    src.stop()
    res = kray.map_rollouts(functools.partial(image_rollout, image_snap["id"]), range(12))
    report("image_shared", values=[r["value"] for r in res], images=[r["image"] for r in res],
           nodes=res.nodes, image=image.id, shared=sorted(os.listdir(shared)),
           snapshot=image_snap["id"], running_after={tag: running(tag) for tag in tags})
    held = {tag: kray.runtime_for(tag).snapshots.layers() for tag in tags}

    # Agents without a shared directory: a second snapshot of the same image is fetched
    # directly, and nodes that hold its layer leave it out of the tar they ask for.
    for n, rn, tag in zip(nodes, ray_nodes, tags):
        kray.detach(tag)
        wait_detached(tag)
        kray.attach(n["url"], n["key"], node_id=rn.node_id, owner_timeout=6)
    src = head.sandboxes.create(image=image.id, vcpu=1, memory_mib=256)
    src.exec("echo 3000 > /tmp/seed")
    second = src.snapshot()
    src.stop()
    res = kray.map_rollouts(functools.partial(image_rollout, second["id"]), range(12))
    report("image_direct", values=[r["value"] for r in res], nodes=res.nodes, held_before=held,
           fetches={tag: ray.get(kray.agent(tag).fetches.remote()) for tag in tags},
           running_after={tag: running(tag) for tag in tags})

    # A node lost mid-batch: its episodes fail and are retried on the others.
    # Not the head (it holds Ray's control store) nor the node this driver is attached to.
    here = ray.get_runtime_context().get_node_id()
    victim = next(i for i in range(len(nodes) - 1, 0, -1) if ray_nodes[i].node_id != here)
    lost_sbx = kray.runtime_for(tags[victim]).sandboxes.create(vcpu=1, memory_mib=256)
    killer_done = {}

    def kill_later():
        time.sleep(6)
        # The host dies: its kilnd and every gVisor process of its sandboxes.
        os.kill(nodes[victim]["pid"], signal.SIGKILL)
        subprocess.run(["pkill", "-9", "-f", nodes[victim]["state_dir"] + "/"], check=False)
        cluster.remove_node(ray_nodes[victim], allow_graceful=False)
        killer_done["at"] = time.monotonic()

    import threading
    threading.Thread(target=kill_later, daemon=True).start()
    t = time.monotonic()
    res = kray.map_rollouts(functools.partial(slow_rollout, snap["id"]), range(24), retries=3)
    try:
        lost_sbx.exec("true")
        lost_error = None
    except kray.NodeLostError as e:
        lost_error = str(e)
    report("node_lost", seconds=round(time.monotonic() - t, 1), values=[r["value"] for r in res],
           nodes=res.nodes, attempts=res.attempts, lost=res.lost, victim=tags[victim], lost_error=lost_error,
           killed=bool(killer_done),
           running_after={tag: running(tag) for i, tag in enumerate(tags) if i != victim})
    return victim


if __name__ == "__main__":
    sys.exit(main())
