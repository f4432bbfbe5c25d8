"""The Vercel layer's image and snapshot paths, written as a Vercel Sandbox
user would (the sync API). create_sandbox(image=...) starts from a Runtime
image by name (built beforehand with runtime.images.build, as the layer's
refusal of any other image names) at the resources asked; box.snapshot()
keeps the filesystem as a disk snapshot and stops the source;
get_snapshot and query_snapshots find it; create_sandbox(source=
SnapshotSource(...)) starts a copy with the files and fresh processes, which
is persistent: stop() pauses it and the next call resumes it. Snapshot.delete
removes it. GitSource and TarballSource fetch from the internet, which kiln's
sandboxes here have not, so they are not used."""
import time
import uuid
from datetime import timedelta

from withruntime import Runtime
from withruntime.vercel.sandbox import sync as sandbox
from withruntime.vercel.sandbox import SandboxResources, SnapshotSource

runtime = Runtime()
tag = uuid.uuid4().hex[:6]
image_name = "l6-vercel-" + tag
image = runtime.images.build(name=image_name, dockerfile=(
    "FROM base\nUSER root\nRUN mkdir -p /opt/site && echo '<h1>built</h1>' > /opt/site/index.html\nUSER user\n"))
assert image["state"] == "ready", image

boxes = []
snapshot = None
try:
    box = sandbox.create_sandbox(name="l6-vercel-" + tag, image=image_name, tags={"sample": "l6"},
                                 resources=SandboxResources(vcpus=1, memory=1024))
    boxes.append(box)
    print(box.name, box.image, box.vcpus, box.memory)
    assert box.image == image["id"] and (box.vcpus, box.memory) == (1, 1024), (box.image, box.vcpus, box.memory)
    done = box.run_process("cat", ["/opt/site/index.html"], capture_output=True)
    assert (done.returncode, done.stdout) == (0, "<h1>built</h1>\n"), done
    box.fs.write_text("notes/progress.md", "# step 1\n")  # relative: /vercel/sandbox, /workspace on Runtime
    box.create_process("sleep", ["100000"])
    assert box.run_process("pgrep", ["-x", "sleep"], capture_output=True).returncode == 0

    snapshot = box.snapshot(expiration=timedelta(days=1))
    print("snapshot", snapshot.id, snapshot.status, snapshot.source_session_id)
    assert snapshot.status == "created" and snapshot.source_session_id == box.withruntime.id, snapshot
    assert runtime.snapshots.get(snapshot.id)["mode"] == "disk"
    assert box.refresh().status == "stopped"  # Vercel's snapshot stops the source
    assert sandbox.get_snapshot(snapshot_id=snapshot.id).id == snapshot.id
    assert snapshot.id in [s.id for s in sandbox.query_snapshots(name=box.name)]

    copy = sandbox.create_sandbox(source=SnapshotSource(snapshot_id=snapshot.id))
    boxes.append(copy)
    assert copy.fs.read_text("/vercel/sandbox/notes/progress.md") == "# step 1\n"
    done = copy.run_process("sh", ["-c", "cat /opt/site/index.html; pgrep -x sleep || echo fresh"],
                            capture_output=True)
    assert done.stdout == "<h1>built</h1>\nfresh\n", done
    assert copy.persistent and copy.tags.get("sample") == "l6", copy.tags

    # A persistent copy pauses on stop() and resumes on the next call.
    copy.fs.write_text("notes/progress.md", "# step 2\n")
    copy.stop()
    assert copy.refresh().status != "running", copy.status
    assert copy.fs.read_text("notes/progress.md") == "# step 2\n"
    assert copy.run_process("echo", ["resumed"], capture_output=True).stdout == "resumed\n"

    snapshot.delete()
    assert snapshot.status == "deleted", snapshot.status
    snapshot = None
finally:
    for one in boxes:
        one.destroy()
    if snapshot:
        snapshot.delete()
    runtime.images.delete(image["id"])
