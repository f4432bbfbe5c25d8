"""The E2B layer's image and snapshot paths, written as an E2B user would. An
E2B template is a Runtime image of that name (E2B's Template builder is
refused by the layer by design, naming `images build --dockerfile
e2b.Dockerfile --name <template>`): built once from the template's Dockerfile,
then Sandbox.create("<template>"), also as "team/<template>:<tag>", with
get_info() naming it. create_snapshot() keeps the whole machine (a copy from
Sandbox.create(snapshot_id) has the background command still running);
create_snapshot(mode="filesystem") keeps the files only (a copy boots fresh);
delete_snapshot removes them; create(template, timeout=) ends in E2B's kill.
The sandboxes are created without a timeout (E2B's 300 s, ending in a pause)
until the last. The Dockerfile starts from kiln's "base" image
(no internet to pull E2B's)."""
import time
import uuid

from withruntime import Runtime
from withruntime.e2b import Sandbox, SandboxQuery

runtime = Runtime()
template = "l2-e2b-" + uuid.uuid4().hex[:6]
e2b_dockerfile = ("FROM base\n"
                  "USER root\n"
                  "RUN mkdir -p /opt/tools && printf '#!/bin/sh\\necho tool says $1\\n' > /opt/tools/tool"
                  " && chmod +x /opt/tools/tool\n"
                  "ENV PATH=/opt/tools:$PATH\n"
                  "USER user\n")
image = runtime.images.build(name=template, dockerfile=e2b_dockerfile, tags=["latest", "v1"])
assert image["state"] == "ready" and image["name"] == template, image

boxes = []
snapshots = []
try:
    sbx = Sandbox.create(template, metadata={"sample": "l2"})
    boxes.append(sbx)
    info = sbx.get_info()
    print(sbx.sandbox_id, info.template_id, info.cpu_count, info.memory_mb)
    assert info.template_id == template and info.metadata == {"sample": "l2"}, info
    assert (info.cpu_count, info.memory_mb) == (2, 512), info  # E2B's default machine
    assert sbx.commands.run("tool hi").stdout == "tool says hi\n"
    # ENV PATH=/opt/tools:$PATH extends the base image's PATH, as Docker's does.
    path = sbx.commands.run("echo $PATH").stdout.strip().split(":")
    assert path[0] == "/opt/tools" and "/usr/bin" in path, path
    assert sbx.runtime.info["image"] in (image["id"], template), sbx.runtime.info
    found = [i.sandbox_id for i in Sandbox.list(query=SandboxQuery(template=template)).next_items()]
    assert sbx.sandbox_id in found, found

    # E2B's team/name:tag form: the team is dropped, the tag is the image's.
    tagged = Sandbox.create(f"my-team/{template}:v1")
    boxes.append(tagged)
    assert tagged.commands.run("tool tagged").stdout == "tool says tagged\n"

    # The whole machine: files, memory and the running command.
    sbx.files.write("/home/user/progress.txt", "step 1\n")
    counter = sbx.commands.run(
        "python3 -c \"import os, time\ni = 0\nwhile True:\n    i += 1\n"
        "    open('/workspace/.count', 'w').write(str(i))\n    os.replace('/workspace/.count', '/workspace/count')\n"
        "    time.sleep(0.05)\"", background=True)
    for _ in range(100):  # until it has counted
        if sbx.files.exists("/workspace/count"):
            break
        time.sleep(0.1)
    full = sbx.create_snapshot()
    snapshots.append(full.snapshot_id)
    assert runtime.snapshots.get(full.snapshot_id)["mode"] == "memory"
    copy = Sandbox.create(full.snapshot_id)
    boxes.append(copy)
    assert copy.files.read("/home/user/progress.txt") == "step 1\n"
    assert counter.pid in [p.pid for p in copy.commands.list()], "the command did not go on running"
    first = int(copy.files.read("/workspace/count"))
    time.sleep(0.5)
    assert int(copy.files.read("/workspace/count")) > first

    # The files only: a copy has them and boots fresh.
    fs = sbx.create_snapshot(mode="filesystem")
    snapshots.append(fs.snapshot_id)
    assert runtime.snapshots.get(fs.snapshot_id)["mode"] == "disk"
    fresh = Sandbox.create(fs.snapshot_id)
    boxes.append(fresh)
    assert fresh.files.read("/home/user/progress.txt") == "step 1\n"
    assert counter.pid not in [p.pid for p in fresh.commands.list()]
    assert fresh.commands.run("pgrep -f [/]workspace/count || echo none").stdout == "none\n"
    assert fresh.commands.run("tool fresh").stdout == "tool says fresh\n"  # the template's files too

    for snapshot_id in snapshots:
        assert Sandbox.delete_snapshot(snapshot_id) is True
    assert Sandbox.delete_snapshot(snapshots[0]) is False  # already gone
    snapshots = []

    # A template sandbox with a time limit (E2B's kill at the end: the layer
    # sends on_lease_end "delete").
    limited = Sandbox.create(template, timeout=600)
    boxes.append(limited)
    assert limited.get_info().lifecycle.on_timeout == "kill"
    assert limited.commands.run("tool limited").stdout == "tool says limited\n"
finally:
    for box in boxes:
        box.kill()
    for snapshot_id in snapshots:
        Sandbox.delete_snapshot(snapshot_id)
    runtime.images.delete(image["id"])
