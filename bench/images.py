#!/usr/bin/python3
"""Images: one JSON line per figure on stdout (progress on stderr).

  images_build_3step          a 3-step Dockerfile on the built-in image, built
                              cold (cache off) and unchanged (from the cache)
  images_pull_500mb           a ~500 MB image of incompressible layers pulled
                              from a local registry, then pulled again
  images_disk_20_tasks        20 task images sharing one ~100 MB base layer:
                              the image store's unique bytes against 20 copies
  images_create_first_result  create from an image (its warm copy) to the first
                              exec result, beside create from a snapshot

The registry is a real one on 127.0.0.1 (Debian's docker-registry); images are
made here with umoci and pushed with skopeo (tests/integration/oci.py), their
generation outside the timings. Starts its own kilnd (free port, temporary
state dir) and removes everything it made: sandboxes, snapshots, images,
kilnd, the registry and the temporary directory.

Usage: /usr/bin/python3 bench/images.py [--kilnd PATH] [--image-dir DIR] [--quick]
           [--only build,pull,disk,create]
Python standard library only.
"""
import argparse
import datetime
import gzip
import hashlib
import io
import os
import sys
import tarfile
import time

from common import REPO, ApiError, KilndSession, base_rootfs, emit, log, run
from measure import percentile

sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from oci import Registry  # noqa: E402
from oci import run as oci_run  # noqa: E402

BUILD_WAIT = 900
MB = 1_000_000


# --------------------------------------------------------------------------
# Images API


def median(values, digits=3):
    return None if not values else round(percentile(sorted(values), 0.5), digits)


def put_blob(api, path, blob, content_type="application/gzip"):
    """PUT of raw bytes (Api.call sends JSON only)."""
    if api.conn is None or api.conn.sock is None:
        api.connect()
    headers = {"Content-Type": content_type}
    if api.key:
        headers["Authorization"] = f"Bearer {api.key}"
    try:
        api.conn.request("PUT", path, body=blob, headers=headers)
        resp = api.conn.getresponse()
        raw = resp.read()
    except OSError:
        api.close()
        raise
    if resp.will_close:
        api.close()
    if resp.status not in (200, 201, 204):
        raise ApiError(f"PUT {path} -> {resp.status}: {raw[:500]!r}")


def context_tar(files):
    """A gzip'd tar of {path: bytes}; returns (sha256:<hex>, bytes)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as t:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            t.addfile(info, io.BytesIO(data))
    blob = gzip.compress(raw.getvalue(), mtime=0)
    return "sha256:" + hashlib.sha256(blob).hexdigest(), blob


def upload_context(api, files):
    digest, blob = context_tar(files)
    missing = api.call("POST", "/v1/images/context/missing", {"digests": [digest]})["missing"]
    if missing:
        put_blob(api, f"/v1/images/context/{digest}", blob)
    return digest


def wait_image(api, image_id, within=BUILD_WAIT):
    """Follows the build log until the image is done; returns (image, lines)."""
    lines, after = [], 0
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        page = api.call("GET", f"/v1/images/{image_id}/logs?after={after}&follow=true")
        lines += page["lines"]
        after = page["nextAfter"]
        if page["done"]:
            return api.call("GET", f"/v1/images/{image_id}"), lines
    raise ApiError(f"image {image_id} not done within {within} s: "
                   f"{[l['text'] for l in lines[-20:]]}")


class Images:
    """The images a script made, deleted at the end whatever happens."""

    def __init__(self, kilnd):
        self.kilnd = kilnd
        self.ids = []

    def build(self, api, body, want="ready"):
        """POST /v1/images then its log until done; returns (image, lines, seconds)."""
        t0 = time.perf_counter()
        image = api.call("POST", "/v1/images", body, ok=(200, 201, 202))
        self.ids.append(image["id"])
        done, lines = wait_image(api, image["id"])
        seconds = time.perf_counter() - t0
        if want and done["state"] != want:
            raise ApiError(f"image {done['id']} is {done['state']}: {done.get('error')} "
                           f"{[l['text'] for l in lines[-15:]]}")
        return done, lines, seconds

    def delete(self, api, image_id):
        api.call("POST", f"/v1/images/{image_id}:delete", {}, ok=(200, 404))
        if image_id in self.ids:
            self.ids.remove(image_id)

    def delete_all(self):
        if not self.ids or self.kilnd.proc is None or self.kilnd.proc.poll() is not None:
            return
        api = self.kilnd.api(timeout=60)
        for image_id in list(self.ids):
            self.delete(api, image_id)
        api.close()


def warm_seconds(lines):
    """From the build log: the warm copy's share (its boot and snapshot, the
    last thing a build does), from the "warming:" line to the last line."""
    def t(line):
        return datetime.datetime.strptime(line["time"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
    try:
        start = next(l for l in lines if l["text"].startswith("warming"))
        return round(t(lines[-1]) - t(start), 3)
    except (StopIteration, KeyError, ValueError):
        return None


def du_bytes(path):
    """Bytes on disk under path, each inode once (hard links counted once)."""
    r = run(["du", "-s", "--block-size=1", path], capture=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"du {path}: {r.stderr[-300:]}")
    return int(r.stdout.split()[0])


# --------------------------------------------------------------------------
# OCI images made here (umoci, raw layers), outside every timing


def random_layer_tar(path, arcname, nbytes):
    """An uncompressed layer tar holding one file of nbytes of os.urandom."""
    data = path + ".data"
    with open(data, "wb") as f:
        left = nbytes
        while left:
            n = min(left, 1 << 20)
            f.write(os.urandom(n))
            left -= n
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        d = tarfile.TarInfo(os.path.dirname(arcname))
        d.type, d.mode = tarfile.DIRTYPE, 0o755
        t.addfile(d)
        t.add(data, arcname=arcname)
    os.unlink(data)
    return path


def small_layer_tar(path, arcname, data):
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        d = tarfile.TarInfo(os.path.dirname(arcname))
        d.type, d.mode = tarfile.DIRTYPE, 0o755
        t.addfile(d)
        info = tarfile.TarInfo(arcname)
        info.size, info.mode = len(data), 0o644
        t.addfile(info, io.BytesIO(data))
    return path


def new_layout(layout, tag):
    oci_run("umoci", "init", "--layout", layout)
    oci_run("umoci", "new", "--image", f"{layout}:{tag}")


def add_layer(layout, tag, tar, new_tag=None):
    args = ["umoci", "raw", "add-layer", "--image", f"{layout}:{tag}"]
    if new_tag:
        args += ["--tag", new_tag]
    oci_run(*args, tar)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------
# Figures

DOCKERFILE_3STEP = ("FROM base\n"
                    "COPY hello.txt /opt/bench/hello.txt\n"
                    "RUN echo built > /tmp/bench-built.txt\n"
                    "ENV BENCH_IMAGE=3step\n")


def bench_build(kilnd, images, cfg, state):
    api = kilnd.api(timeout=300)
    ctx = upload_context(api, {"hello.txt": b"hello from the build context\n"})
    body = {"name": "bench-3step", "dockerfile": DOCKERFILE_3STEP, "context": ctx}
    # Warm-up (untimed): fills the step cache and wakes the built-in image.
    image, lines, secs = images.build(api, body)
    log(f"build: warm-up build {secs:.1f} s, stepsTotal {image.get('stepsTotal')}")
    cold, cached, cold_warm, cached_warm, cached_runs, cold_runs = [], [], [], [], [], []
    for i in range(cfg["build_n"] * 2):
        if i % 2 == 0:
            image, lines, secs = images.build(api, {**body, "cache": False})
            cold.append(secs)
            cold_warm.append(warm_seconds(lines))
            cold_runs.append(image.get("stepsRun"))
        else:
            image, lines, secs = images.build(api, body)
            cached.append(secs)
            cached_warm.append(warm_seconds(lines))
            cached_runs.append(image.get("stepsRun"))
        log(f"build: {'cold' if i % 2 == 0 else 'cached'} {secs:.2f} s, "
            f"stepsRun {image.get('stepsRun')}, stepsCached {image.get('stepsCached')}")
    if any(r != 0 for r in cached_runs):
        raise ApiError(f"an unchanged build ran steps: stepsRun {cached_runs}")
    state["image"] = image["id"]  # the last (cached) build: figure 4 creates from it
    # The older versions (and their warm copies) go now.
    for image_id in list(images.ids):
        if image_id != image["id"]:
            images.delete(api, image_id)
    emit({"bench": "images_build_3step", "unit": "s", "kiln": True,
          "coldP50": median(cold), "cachedP50": median(cached),
          "ratioColdToCached": round(median(cold) / median(cached), 1) if median(cached) else None,
          "cold": [round(x, 3) for x in cold], "cached": [round(x, 3) for x in cached],
          "cachedStepsRun": max(cached_runs), "coldStepsRun": int(median(cold_runs, 0)),
          "stepsTotal": image.get("stepsTotal"),
          "warmSecondsP50": {"cold": median([w for w in cold_warm if w is not None]),
                             "cached": median([w for w in cached_warm if w is not None])},
          "n": len(cold),
          "what": "POST /v1/images of a Dockerfile (FROM base; COPY of a small file from an "
                  "uploaded context; RUN writing a file; ENV) until GET logs?follow says done "
                  'and the image is ready: cold = "cache": false, cached = the same unchanged '
                  "(every step from the cache); alternating, after one untimed build; both "
                  "include the warm copy (boot once + snapshot), warmSecondsP50 from the log"})
    api.close()


def bench_pull(kilnd, images, cfg, workdir, registry):
    layers, layer_bytes = cfg["pull_layers"], cfg["pull_layer_bytes"]
    total = layers * layer_bytes
    log(f"pull: generating {layers} layers of {layer_bytes / MB:.0f} MB of random data ...")
    t0 = time.monotonic()
    layout = os.path.join(workdir, "layout-big")
    new_layout(layout, "big")
    for i in range(layers):
        tar = random_layer_tar(os.path.join(workdir, f"big-{i}.tar"), f"data/blob-{i}.bin",
                               layer_bytes)
        add_layer(layout, "big", tar)
        os.unlink(tar)
    ref = registry.push(f"{layout}:big", "bench-big:1")
    log(f"pull: image pushed as {ref} in {time.monotonic() - t0:.1f} s")

    api = kilnd.api(timeout=300)
    store = os.path.join(kilnd.state_dir, "image-store")
    before = du_bytes(store)
    first, lines, secs = images.build(api, {"image": ref, "name": "bench-big"})
    log(f"pull: first pull {secs:.2f} s ({total / MB / secs:.0f} MB/s), "
        f"sizeBytes {first.get('sizeBytes')}, layers {first.get('layers')}")
    warm1 = warm_seconds(lines)
    again, lines, secs2 = images.build(api, {"image": ref, "name": "bench-big"})
    warm2 = warm_seconds(lines)
    log(f"pull: second pull {secs2:.2f} s, stepsRun {again.get('stepsRun')}")
    pulled = du_bytes(store) - before
    images.delete(api, again["id"])
    images.delete(api, first["id"])
    pruned = api.call("POST", "/v1/images:prune", {})
    left = du_bytes(store) - before
    log(f"pull: images deleted, prune: {pruned}; store +{pulled} bytes after the pulls, "
        f"+{left} after delete and prune")
    emit({"bench": f"images_pull_{round(total / MB)}mb", "unit": "s", "kiln": True,
          "seconds": round(secs, 3), "MBps": round(total / MB / secs, 1),
          "againSeconds": round(secs2, 3), "againStepsRun": again.get("stepsRun"),
          "warmSeconds": warm1, "againWarmSeconds": warm2,
          "MBpsWithoutWarm": round(total / MB / (secs - warm1), 1) if warm1 else None,
          "dataMB": round(total / MB), "layers": layers, "sizeBytes": first.get("sizeBytes"),
          "storeBytesAfterPulls": pulled, "storeBytesAfterDeleteAndPrune": left,
          "what": f'POST /v1/images {{"image": ref}} of an image of {layers} layers of '
                  f"{layer_bytes / MB:.0f} MB of os.urandom data each (incompressible), pushed "
                  "beforehand with skopeo to a local docker-registry, until ready (fetch, "
                  "verify, unpack, flatten, warm copy); MBps = data MB / seconds; againSeconds = "
                  "a second pull of the same ref (layers already stored); storeBytes = growth "
                  "of du of <state>/image-store after both pulls, then after deleting both "
                  "images and POST /v1/images:prune"})
    api.close()


def bench_disk(kilnd, images, cfg, workdir, registry):
    n, base_bytes = cfg["tasks"], cfg["task_base_bytes"]
    log(f"disk: generating a {base_bytes / MB:.0f} MB base layer and {n} task layers ...")
    t0 = time.monotonic()
    layout = os.path.join(workdir, "layout-tasks")
    new_layout(layout, "base")
    base_tar = random_layer_tar(os.path.join(workdir, "task-base.tar"), "task-base/blob.bin",
                                base_bytes)
    base_diff_id = sha256_file(base_tar)
    add_layer(layout, "base", base_tar)
    os.unlink(base_tar)
    refs = []
    for i in range(n):
        top = small_layer_tar(os.path.join(workdir, f"task-{i}.tar"), "task/task.txt",
                              f"task {i}\n".encode() + os.urandom(4096))
        add_layer(layout, "base", top, new_tag=f"task-{i}")
        os.unlink(top)
        refs.append(registry.push(f"{layout}:task-{i}", f"bench-tasks:task-{i}"))
    log(f"disk: {n} images pushed in {time.monotonic() - t0:.1f} s")

    api = kilnd.api(timeout=300)
    store = os.path.join(kilnd.state_dir, "image-store")
    before = du_bytes(store)
    t0 = time.perf_counter()
    queued = []
    for i, ref in enumerate(refs):
        image = api.call("POST", "/v1/images", {"image": ref, "name": f"bench-task-{i}"},
                         ok=(200, 201, 202))
        images.ids.append(image["id"])
        queued.append(image["id"])
    done = []
    for image_id in queued:
        image, lines = wait_image(api, image_id)
        if image["state"] != "ready":
            raise ApiError(f"image {image_id} is {image['state']}: {image.get('error')}")
        done.append(image)
    pull_all = time.perf_counter() - t0
    after = du_bytes(store)
    unique = after - before
    base_layer = [os.path.join(store, "layers", d) for d in os.listdir(os.path.join(store, "layers"))
                  if base_diff_id in d and not d.endswith(".json")]
    base_on_disk = du_bytes(base_layer[0]) if base_layer else base_bytes
    sizes = [api.call("GET", f"/v1/images/{i['id']}").get("sizeBytes") or 0 for i in done]
    emit({"bench": f"images_disk_{n}_tasks", "unit": "bytes", "kiln": True,
          "uniqueBytes": unique, "naiveBytes": n * base_on_disk,
          "ratioUniqueToNaive": round(unique / (n * base_on_disk), 3),
          "baseLayerBytes": base_on_disk,
          "perImageExtraBytes": round((unique - base_on_disk) / n),
          "sizeBytesSum": sum(sizes), "sizeBytesP50": int(median(sizes, 0)),
          "tasks": n, "pullAllSeconds": round(pull_all, 1),
          "what": f"{n} images, each one shared {base_bytes / MB:.0f} MB base layer of random "
                  "data + a distinct 4 KB top layer, pushed as tags of one repo and all pulled "
                  "(queued together); uniqueBytes = growth of `du -s --block-size=1` of "
                  "<state>/image-store (hard links once: layers, flattened roots, logs); "
                  f"naiveBytes = {n} x the base layer on disk; perImageExtraBytes = "
                  f"(uniqueBytes - one base layer) / {n}; sizeBytesSum = the images' "
                  "sizeBytes (GET /v1/images/{id}) added up, shared layers counted each "
                  "time; warm copies (snapshots) are outside the image store"})
    for image in done:
        images.delete(api, image["id"])
    api.close()


def bench_create(kilnd, images, cfg, state):
    api = kilnd.api(timeout=300)
    image_id = state.get("image")
    if image_id is None:  # --only create: build the image first
        ctx = upload_context(api, {"hello.txt": b"hello from the build context\n"})
        image, _, _ = images.build(api, {"name": "bench-3step", "dockerfile": DOCKERFILE_3STEP,
                                         "context": ctx})
        image_id = image["id"]
    image = api.call("GET", f"/v1/images/{image_id}")
    if not image.get("warm"):
        raise ApiError(f"image {image_id} has no warm copy: {image}")
    # No pools: both restore on demand.
    api.call("POST", f"/v1/images/{image_id}:pool", {"size": 0}, ok=(200, 404, 405))
    src = kilnd.create(api, {"image": image_id})
    snap = kilnd.snapshot(api, src)["id"]
    kilnd.stop_sandbox(api, src)
    kilnd.set_pool(api, snap, 0)

    def first_result(body):
        t0 = time.perf_counter()
        sid = kilnd.create(api, body)
        t1 = time.perf_counter()
        r = api.call("POST", f"/v1/sandboxes/{sid}:exec", {"argv": ["/bin/true"]})
        t2 = time.perf_counter()
        kilnd.stop_sandbox(api, sid)
        if r.get("exitCode") != 0:
            raise ApiError(f"exec /bin/true in {sid}: {r}")
        return (t2 - t0) * 1000, (t1 - t0) * 1000

    first_result({"image": image_id})  # warm-up, untimed
    first_result({"snapshot": snap})
    from_image, from_snap, create_image, create_snap = [], [], [], []
    for i in range(cfg["create_n"] * 2):
        if i % 2 == 0:
            f, c = first_result({"image": image_id})
            from_image.append(f)
            create_image.append(c)
        else:
            f, c = first_result({"snapshot": snap})
            from_snap.append(f)
            create_snap.append(c)
    kilnd.delete_snapshot(api, snap)
    ratio = median(from_image) / median(from_snap)
    emit({"bench": "images_create_first_result", "unit": "ms", "kiln": True,
          "imageP50": median(from_image, 1), "snapshotP50": median(from_snap, 1),
          "ratioImageToSnapshot": round(ratio, 3), "target": 1.2,
          "imageCreateMsP50": median(create_image, 1),
          "snapshotCreateMsP50": median(create_snap, 1),
          "imageMin": round(min(from_image), 1), "snapshotMin": round(min(from_snap), 1),
          "n": len(from_image),
          "what": 'POST /v1/sandboxes {"image": id} (default shape: restores the image\'s warm '
                  'copy) then exec argv ["/bin/true"] until its result, beside the same from '
                  '{"snapshot": id} of a sandbox of that image; no pools, alternating, each '
                  "sandbox stopped after its sample (untimed); image = images_build_3step's"})
    api.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kilnd", default=os.path.join(REPO, "build", "bin", "kilnd"))
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--quick", action="store_true", help="few runs of each, 50 MB pull (smoke test)")
    ap.add_argument("--only", default="", help="comma list: build,pull,disk,create")
    args = ap.parse_args()

    cfg = {"build_n": 3, "pull_layers": 5, "pull_layer_bytes": 100 * MB, "tasks": 20,
           "task_base_bytes": 100 * MB, "create_n": 15}
    if args.quick:
        cfg.update(build_n=1, pull_layer_bytes=10 * MB, tasks=5, task_base_bytes=10 * MB,
                   create_n=3)
    groups = ("build", "pull", "disk", "create")
    only = set(filter(None, args.only.split(","))) or set(groups)
    if only - set(groups):
        ap.error(f"--only: unknown {sorted(only - set(groups))}; choose from {','.join(groups)}")

    base_rootfs(args.image_dir)  # exits if there is none
    # The registry is on loopback: kilnd pulls from it only when told to.
    with KilndSession(args.kilnd, args.image_dir, "kiln-bench-images-",
                      kilnd_args=["--allow-registry", "127.0.0.1"]) as session:
        kilnd, workdir = session.kilnd, session.workdir
        # umoci and skopeo keep their temporary files in our directory (kilnd,
        # started already, does not inherit this).
        os.environ["TMPDIR"] = os.path.join(workdir, "tmp")
        os.makedirs(os.environ["TMPDIR"])
        images = Images(kilnd)
        session.on_exit("delete images", images.delete_all)
        registry = None
        if only & {"pull", "disk"}:
            registry = Registry(os.path.join(workdir, "registry"))
            session.on_exit("stop registry", registry.close)
            log(f"registry on {registry.host}")
        state = {}
        for name, fn, extra in (("build", bench_build, (state,)),
                                ("pull", bench_pull, (workdir, registry)),
                                ("disk", bench_disk, (workdir, registry)),
                                ("create", bench_create, (state,))):
            if name in only:
                t0 = time.monotonic()
                log(f"{name} ...")
                fn(kilnd, images, cfg, *extra)
                log(f"{name} done in {time.monotonic() - t0:.1f} s")
    return session.rc


if __name__ == "__main__":
    sys.exit(main())
