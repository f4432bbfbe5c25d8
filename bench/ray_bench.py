#!/opt/kiln/ray-venv/bin/python
"""kiln across hosts: one JSON line per figure on stdout (progress on stderr).
Run with the Ray venv's interpreter (`make ray-env`): Ray 2.60.0.

- snapshot_export / snapshot_import: a sandbox holding 100 MiB in memory is
  snapshotted on kilnd A, exported to a file and imported into kilnd B (wall
  time and MB/s, medians of --reps).
- image_snapshot_*: a snapshot of an image with a 100 MB layer: its first export
  (which computes the layer's digest), later exports, an import that stores the
  layer and flattens the root, and both again with skipLayers (the receiver
  holds the layer).
- ray_overhead_create / ray_overhead_exec: create (+ first answer) and one
  exec through kiln.ray (cluster ids, node routing, keep-alive) against a plain
  kiln.Runtime on the same kilnd, interleaved, medians.
- ray_code_rewards: examples/code_rewards.py's programs scored with
  kiln.ray.map_rollouts over a Ray cluster of 1 node and of 2 nodes (one kilnd
  each), and with kiln.rewards.score_many straight at one kilnd. All share
  this machine's 2 cores: the figure is kiln.ray's overhead, not a speed-up.

Usage: /opt/kiln/ray-venv/bin/python bench/ray_bench.py [--kilnd PATH] [--programs 40] [--reps 5]
"""
import argparse
import functools
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "examples"))
sys.path.insert(0, os.path.join(REPO, "sdk", "python"))
# Ray's workers (started by the raylets this process starts) import the SDK too.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (os.path.join(REPO, "sdk", "python"), os.environ.get("PYTHONPATH")) if p)
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import code_rewards as ex  # noqa: E402
import common  # noqa: E402
import kiln.ray as kray  # noqa: E402
from common import Kilnd, emit, kill_leftovers, log, machine_line, start_subreaper, unmount_under  # noqa: E402
from kiln import Runtime  # noqa: E402
from kiln.rewards import score, score_many  # noqa: E402

SLOTS_MIB = 256
OBJECT_STORE = 80 * 2**20


def median_ms(xs):
    return round(statistics.median(xs) * 1000, 1)


def transfer(a, b, reps):
    ra, rb = Runtime(a.key, a.url), Runtime(b.key, b.url)
    src = ra.sandboxes.create(vcpu=1, memory_mib=512)
    src.spawn("python3 -c 'import time; x = bytearray(100 << 20); x[::4096] = b\"x\" * len(x[::4096]); "
              "time.sleep(3600)'")
    time.sleep(3)
    exp, imp, size = [], [], 0
    with tempfile.TemporaryDirectory(prefix="kiln-bench-transfer-") as d:
        for i in range(reps):
            snap = src.snapshot()
            path = os.path.join(d, f"{i}.tar")
            t = time.monotonic()
            ra.snapshots.export(snap["id"], path)
            exp.append(time.monotonic() - t)
            size = os.path.getsize(path)
            t = time.monotonic()
            rb.snapshots.import_(path)
            imp.append(time.monotonic() - t)
            ra.snapshots.delete(snap["id"])
            rb.snapshots.delete(snap["id"])
            os.unlink(path)
    src.stop()
    mb = size / 1e6
    for name, xs in (("snapshot_export", exp), ("snapshot_import", imp)):
        emit({"bench": name, "value": median_ms(xs), "unit": "ms", "bytes": size, "reps": reps,
              "mbPerS": round(mb / statistics.median(xs), 1)})


def image_transfer(a, b, reps):
    """A snapshot of an image with a 100 MB layer moved A -> B: the first export (it computes
    the layer's digest once), later ones, an import that stores the layer and flattens the root,
    and the export and import of another snapshot of the same image when B holds the layer
    already (skipLayers). A key may skip only layers it holds on B (an image or a snapshot of its
    own there), so B keeps the first snapshot while the second arrives without the layer."""
    ra, rb = Runtime(a.key, a.url), Runtime(b.key, b.url)
    image = ra.images.build("bench-layer", recipe={"commands": [
        "head -c 100000000 /dev/urandom > /srv/blob"]}, build={"memoryMiB": 512}, timeout=900)
    src = ra.sandboxes.create(image=image.id, vcpu=1, memory_mib=SLOTS_MIB)
    snap = src.snapshot()
    src.stop()
    sid = snap["id"]
    times = {k: [] for k in ("first", "export", "import", "export_skip", "import_skip")}
    sizes = {}
    with tempfile.TemporaryDirectory(prefix="kiln-bench-image-") as d:
        path = os.path.join(d, "image.tar")
        t = time.monotonic()
        ra.snapshots.export(sid, path)
        times["first"].append(time.monotonic() - t)
        for _ in range(reps):
            t = time.monotonic()
            ra.snapshots.export(sid, path)
            times["export"].append(time.monotonic() - t)
            sizes["full"] = os.path.getsize(path)
            t = time.monotonic()
            rb.snapshots.import_(path)
            times["import"].append(time.monotonic() - t)
            with rb.sandboxes.create(snapshot=sid) as copy:  # it restores on B's root
                assert copy.exec("wc -c < /srv/blob").stdout.strip() == "100000000"
            held = rb.snapshots.layers()
            with ra.sandboxes.create(image=image.id, vcpu=1, memory_mib=SLOTS_MIB) as again:
                other = again.snapshot()["id"]
            t = time.monotonic()
            ra.snapshots.export(other, path, skip_layers=held)
            times["export_skip"].append(time.monotonic() - t)
            sizes["skip"] = os.path.getsize(path)
            t = time.monotonic()
            rb.snapshots.import_(path)
            times["import_skip"].append(time.monotonic() - t)
            with rb.sandboxes.create(snapshot=other) as copy:  # on the layer B already had
                assert copy.exec("wc -c < /srv/blob").stdout.strip() == "100000000"
            for r, snap_id in ((rb, other), (rb, sid), (ra, other)):
                r.snapshots.delete(snap_id)
            rb.request("POST", "/v1/images:prune", json={})  # B forgets the layer again
    ra.snapshots.delete(sid)
    for name, key, size in (("image_snapshot_export_first", "first", sizes["full"]),
                            ("image_snapshot_export", "export", sizes["full"]),
                            ("image_snapshot_import", "import", sizes["full"]),
                            ("image_snapshot_export_skip_layers", "export_skip", sizes["skip"]),
                            ("image_snapshot_import_skip_layers", "import_skip", sizes["skip"])):
        xs = times[key]
        emit({"bench": name, "value": median_ms(xs), "unit": "ms", "bytes": size, "reps": len(xs),
              "mbPerS": round(size / 1e6 / statistics.median(xs), 1)})


def start_cluster(kilnds, workdir):
    # Ray's files (and its address file, which it puts under $RAY_TMPDIR/ray
    # whatever the head's temp_dir) stay in the bench's own folder.
    os.environ["RAY_TMPDIR"] = workdir
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "object_store_memory": OBJECT_STORE,
        "temp_dir": os.path.join(workdir, "ray"),
        "resources": kray.node_resources(kilnds[0].url, kilnds[0].key, memory_mib=SLOTS_MIB)})
    nodes = [cluster.head_node]
    for k in kilnds[1:]:
        nodes.append(cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE,
                                      resources=kray.node_resources(k.url, k.key, memory_mib=SLOTS_MIB)))
    ray.init(address=cluster.address, namespace="kiln-bench", log_to_driver=False)
    tags = [kray.attach(k.url, k.key, node_id=n.node_id) for k, n in zip(kilnds, nodes)]
    return cluster, tags


def stop_cluster(cluster, tags):
    for t in tags:
        kray.detach(t)
    ray.shutdown()
    cluster.shutdown()


def overhead(k, tag, reps):
    plain, via = Runtime(k.key, k.url), kray.runtime_for(tag)
    times = {"plain": ([], []), "ray": ([], [])}
    for _ in range(reps):
        for name, rt in (("plain", plain), ("ray", via)):
            t = time.monotonic()
            sbx = rt.sandboxes.create(vcpu=1, memory_mib=SLOTS_MIB)
            t1 = time.monotonic()
            sbx.exec("true")
            t2 = time.monotonic()
            sbx.stop()
            times[name][0].append(t1 - t)
            times[name][1].append(t2 - t1)
    for i, what in enumerate(("create", "exec")):
        p, r = median_ms(times["plain"][i]), median_ms(times["ray"][i])
        emit({"bench": f"ray_overhead_{what}", "value": r, "unit": "ms", "plainMs": p,
              "overheadMs": round(r - p, 1), "ratio": round(r / p, 3), "reps": reps})


def rewards_episode(program, cases, timeout_ms, rt, _item):
    return score(program, cases, mode="whitespace", timeout_ms=timeout_ms, memory_mib=SLOTS_MIB,
                 runtime=rt, stop_on_failure=True).score


def code_rewards(kilnds, programs, cases, timeout_ms, nodes, workdir):
    cluster, tags = start_cluster(kilnds[:nodes], workdir)
    try:
        t = time.monotonic()
        items = list(range(len(programs)))
        res = kray.map_rollouts(lambda rt, i: rewards_episode(programs[i][1], cases, timeout_ms, rt, i), items)
        wall = time.monotonic() - t
        bad = [i for i, (c, _) in enumerate(programs) if (res[i] == 1.0) != (c == "correct")]
        emit({"bench": "ray_code_rewards", "nodes": nodes, "value": round(len(programs) / wall, 3),
              "unit": "programs/s", "wallS": round(wall, 2), "programs": len(programs),
              "perNode": {t: res.nodes.count(t) for t in tags}, "wrongVerdicts": len(bad)})
        if nodes == 1:
            overhead(kilnds[0], tags[0], 10)
    finally:
        stop_cluster(cluster, tags)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kilnd", default=os.path.join(REPO, "build", "bin", "kilnd"))
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--programs", type=int, default=40)
    ap.add_argument("--timeout-ms", type=int, default=3000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    start_subreaper()
    common.RUNSC = common.runsc_of(args.kilnd)  # Kilnd.shutdown cleans up with kilnd's runsc
    workdir = tempfile.mkdtemp(prefix="kiln-bench-ray-")
    kilnds = [Kilnd(args.kilnd, args.image_dir, os.path.join(workdir, f"k{i}"),
                    ["--host-memory-mib", "1024", "--memory-overcommit", "2"]) for i in range(2)]
    rc = 0
    try:
        for k in kilnds:
            os.makedirs(os.path.dirname(k.state_dir), exist_ok=True)
            k.start()
        emit(machine_line(kilnds[0].version) | {"ray": ray.__version__})
        transfer(kilnds[0], kilnds[1], args.reps)
        image_transfer(kilnds[0], kilnds[1], 3)
        rng = random.Random(7)
        cases = ex.make_cases(rng)
        programs = ex.make_programs(args.programs, rng)
        t = time.monotonic()
        direct = score_many([src for _, src in programs], cases, concurrency=8, mode="whitespace",
                            timeout_ms=args.timeout_ms, memory_mib=SLOTS_MIB, stop_on_failure=True,
                            runtime=Runtime(kilnds[0].key, kilnds[0].url))
        wall = time.monotonic() - t
        emit({"bench": "direct_code_rewards", "value": round(len(programs) / wall, 3), "unit": "programs/s",
              "wallS": round(wall, 2), "programs": len(programs), "concurrency": 8,
              "wrongVerdicts": sum((r.score == 1.0) != (c == "correct") for (c, _), r in zip(programs, direct))})
        for nodes in (1, 2):
            code_rewards(kilnds, programs, cases, args.timeout_ms, nodes, workdir)
    except BaseException as e:  # noqa: BLE001 -- report, then clean up
        log(f"FAILED: {type(e).__name__}: {e}")
        rc = 1
    finally:
        for k in kilnds:
            try:
                k.shutdown()
            except Exception as e:  # noqa: BLE001
                log(f"kilnd shutdown: {e}")
                rc = 1
        kill_leftovers(workdir)
        unmount_under(workdir)
        shutil.rmtree(workdir, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
