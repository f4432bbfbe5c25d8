"""The Morph layer's image and snapshot paths, written as a Morph user would.
snapshots.create(image_id=..., vcpus, memory, disk_size, digest) makes a
bootable disk snapshot of an image (Morph's base image, which is kiln's
default, and a Runtime image built beforehand: Morph's own images and
as_container are refused by the layer by design, naming that call); a digest
finds it again. Snapshot.setup and build run commands on a copy and keep the
result under a chain digest, reused on a repeat. instances.start starts a
copy; instances.boot starts a disk snapshot at another size, fresh;
instance.snapshot keeps memory too (a copy goes on counting); instance.branch
forks it, keeping the snapshot the copies came from. Snapshot metadata
updates (:update) and boot of a memory snapshot at another size (:resize) are
calls kiln does not offer, so they are not used."""
import time
import uuid

from withruntime import Runtime
from withruntime.morph import MorphCloudClient
from withruntime.morph.api import InstanceStatus, Snapshot, SnapshotStatus

runtime = Runtime()
morph = MorphCloudClient()
tag = uuid.uuid4().hex[:6]
image_name = "l5-morph-" + tag
image = runtime.images.build(name=image_name, dockerfile=(
    "FROM base\nUSER root\nRUN mkdir -p /opt/morph && echo from-the-image > /opt/morph/origin\nUSER user\n"))
assert image["state"] == "ready", image

snapshots = []
instances = []
try:
    assert [i.id for i in morph.images.list()] == ["morphvm-minimal"]
    minimal = morph.snapshots.create(vcpus=1, memory=512, disk_size=4096)
    snapshots.append(minimal)
    assert minimal.status == SnapshotStatus.READY and minimal.refs.image_id == "morphvm-minimal", minimal

    digest = "l5-base-" + tag
    base = morph.snapshots.create(image_id=image_name, vcpus=1, memory=512, disk_size=4096, digest=digest,
                                  metadata={"sample": "l5"})
    snapshots.append(base)
    print("base snapshot", base.id, base.status, base.spec, base.digest)
    assert base.status == SnapshotStatus.READY and base.digest == digest, base
    assert (base.spec.vcpus, base.spec.memory, base.spec.disk_size) == (1, 512, 4096), base.spec
    assert base.refs.image_id == image_name and base.metadata == {"sample": "l5"}, base
    assert base.native["mode"] == "disk"
    assert morph.snapshots.create(image_id=image_name, digest=digest).id == base.id  # found by its digest
    assert [s.id for s in morph.snapshots.list(digest=digest)] == [base.id]
    assert base.id in [s.id for s in morph.snapshots.list(metadata={"sample": "l5"})]

    # start: a copy of the disk snapshot, at its size, booted fresh.
    fresh = morph.instances.start(base.id, metadata={"role": "fresh"})
    instances.append(fresh)
    assert fresh.status == InstanceStatus.READY and fresh.refs.snapshot_id == base.id, fresh
    assert (fresh.spec.vcpus, fresh.spec.memory, fresh.spec.disk_size) == (1, 512, 4096), fresh.spec
    assert fresh.refs.image_id == image_name and fresh.metadata == {"role": "fresh"}, fresh
    assert fresh.exec("cat /opt/morph/origin").stdout == "from-the-image\n"
    assert fresh.id in [i.id for i in morph.instances.list(metadata={"role": "fresh"})]

    # boot: a disk snapshot at another size, booted fresh.
    big = morph.instances.boot(base.id, vcpus=2, memory=1024, disk_size=8192)
    instances.append(big)
    assert (big.spec.vcpus, big.spec.memory, big.spec.disk_size) == (2, 1024, 8192), big.spec
    out = big.exec("nproc; cat /opt/morph/origin; test -e /workspace/setup.txt || echo no-setup")
    assert out.stdout == "2\nfrom-the-image\nno-setup\n", out

    # setup: a command run once on a copy, kept under a chain digest.
    step = "echo configured > /workspace/setup.txt"
    configured = base.setup(step)
    snapshots.append(configured)
    assert configured.id != base.id and configured.native["state"] == "ready", configured
    assert configured.digest == Snapshot.compute_chain_hash(digest, base._effect_identifier_for_step(step))
    assert base.setup("echo configured > /workspace/setup.txt").id == configured.id  # cached
    # build: its first step is that setup, reused; the second is new.
    built = base.build(["echo configured > /workspace/setup.txt", "echo second >> /workspace/setup.txt"])
    snapshots.append(built)
    assert built.id not in (base.id, configured.id)
    assert base.build(["echo configured > /workspace/setup.txt", "echo second >> /workspace/setup.txt"]).id == built.id

    instance = morph.instances.start(built.id, metadata={"role": "worker"})
    instances.append(instance)
    assert instance.status == InstanceStatus.READY and instance.refs.snapshot_id == built.id, instance
    assert instance.refs.image_id == image_name and instance.metadata == {"role": "worker"}, instance
    out = instance.exec("cat /workspace/setup.txt /opt/morph/origin")
    assert (out.exit_code, out.stdout) == (0, "configured\nsecond\nfrom-the-image\n"), out

    # instance.snapshot keeps memory: a copy goes on counting.
    instance.native.spawn(["python3", "-c", "import os, time\ni = 0\nwhile True:\n    i += 1\n"
                           "    open('/workspace/.count', 'w').write(str(i))\n"
                           "    os.replace('/workspace/.count', '/workspace/count')\n    time.sleep(0.05)"])
    for _ in range(100):  # until it has counted
        if instance.exec("test -s /workspace/count").exit_code == 0:
            break
        time.sleep(0.1)
    running = instance.snapshot(metadata={"state": "counting"})
    snapshots.append(running)
    assert running.native["mode"] == "memory" and running.refs.image_id == image_name, running
    copy = morph.instances.start(running.id)
    instances.append(copy)
    first = int(copy.exec("cat /workspace/count").stdout)
    time.sleep(0.5)
    assert int(copy.exec("cat /workspace/count").stdout) > first, "the process did not go on running"

    # branch: copies of the running instance and the snapshot they came from.
    kept, branches = instance.branch(2)
    snapshots.append(kept)
    instances.extend(branches)
    assert len(branches) == 2 and all(b.refs.snapshot_id == kept.id for b in branches), (kept, branches)
    assert all(b.exec("cat /workspace/setup.txt").stdout == "configured\nsecond\n" for b in branches)
finally:
    for instance in instances:
        instance.stop()
    # What a step left behind when it failed is found by the image it came from.
    left = [s for s in morph.snapshots.list() if s.refs.image_id == image_name and s not in snapshots]
    for snapshot in snapshots + left:
        snapshot.delete()
    runtime.images.delete(image["id"])
