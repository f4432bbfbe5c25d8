"""The Daytona layer's image and snapshot paths, written as a Daytona user
would. A Daytona snapshot is a Runtime image: daytona.snapshot.create(
CreateSnapshotParams(name, image=Image...)) builds the declarative Image
(base, dockerfile_commands, run_commands, env, add_local_file, add_local_dir,
workdir), snapshot.get/list find it, and create(CreateSandboxFromSnapshotParams(
snapshot=name)) starts from it; create(CreateSandboxFromImageParams(image=...,
resources=...)) builds (or reuses) the image itself at the size asked.
sandbox.create_snapshot(name) keeps the running sandbox as a Runtime snapshot
that create(snapshot=name) continues, a session's running command and all. The base is
kiln's built-in "base" image: Image.debian_slim() and pip_install pull from
the internet, which the build has not."""
import os
import tempfile
import time
import uuid

from withruntime import Runtime
from withruntime.daytona import (CreateSandboxFromImageParams, CreateSandboxFromSnapshotParams, CreateSnapshotParams,
                                 Daytona, DaytonaNotFoundError, Image, Resources, SessionExecuteRequest)

runtime = Runtime()
daytona = Daytona()
tag = uuid.uuid4().hex[:6]

local = tempfile.mkdtemp(prefix="kiln-l3-")
with open(os.path.join(local, "settings.toml"), "w") as f:
    f.write("answer = 42\n")
os.makedirs(os.path.join(local, "lib", "helpers"))
with open(os.path.join(local, "lib", "helpers", "__init__.py"), "w") as f:
    f.write("def triple(x):\n    return 3 * x\n")

image = (Image.base("base")
         .dockerfile_commands(["USER root"])
         .run_commands("mkdir -p /opt/app", "echo built > /opt/app/stamp")
         .env({"APP_MODE": "daytona-sample", "PYTHONPATH": "/opt/app/lib"})
         .add_local_file(os.path.join(local, "settings.toml"), "/opt/app/settings.toml")
         .add_local_dir(os.path.join(local, "lib"), "/opt/app/lib")
         .dockerfile_commands(["RUN chown -R user /opt/app", "USER user"])
         .workdir("/opt/app"))

name = "l3-daytona-" + tag
CREATE_TIMEOUT = 180
sandboxes = []
state_snapshot = None
images = []
try:
    logs = []
    snap = daytona.snapshot.create(CreateSnapshotParams(name=name, image=image), on_logs=logs.append)
    images.append(snap.id)
    print("snapshot", snap.id, snap.name, snap.state, len(logs), "log lines")
    assert snap.name == name and snap.state == "active", snap
    assert logs, "on_logs heard nothing"
    assert daytona.snapshot.get(name).id == snap.id
    assert snap.id in [s.id for s in daytona.snapshot.list().items]

    # timeout: Daytona's 60 s bounds the create; in CI, beside other groups' image builds on two
    # cores, the first cold boot of a fresh image took 69 s (2026-12-07, startMs 212 of it).
    sandbox = daytona.create(CreateSandboxFromSnapshotParams(snapshot=name, labels={"sample": "l3"}),
                             timeout=CREATE_TIMEOUT)
    sandboxes.append(sandbox)
    run = sandbox.process.exec("cat stamp settings.toml; echo $APP_MODE; pwd; id -un;"
                               " python3 -c 'import helpers; print(helpers.triple(14))'", cwd="/opt/app")
    assert run.exit_code == 0, run.result
    assert run.result == "built\nanswer = 42\ndaytona-sample\n/opt/app\nuser\n42\n", run.result

    # Straight from the Image, at another size: the same image, built once.
    sized = daytona.create(CreateSandboxFromImageParams(image=image, resources=Resources(cpu=2, memory=2, disk=4)),
                           timeout=CREATE_TIMEOUT)
    sandboxes.append(sized)
    images.append(sized.withruntime.info["image"])
    assert (sized.cpu, sized.memory, sized.disk) == (2, 2, 4), (sized.cpu, sized.memory, sized.disk)
    assert sized.process.exec("cat /opt/app/stamp; nproc").result == "built\n2\n"

    # A running sandbox kept as a snapshot, and a sandbox continuing it.
    sandbox.fs.upload_file(b"step 1\n", "progress.txt")
    sandbox.process.create_session("counter")
    sandbox.process.execute_session_command("counter", SessionExecuteRequest(
        command="python3 -c \"import os, time\ni = 0\nwhile True:\n    i += 1\n"
                "    open('/workspace/.count', 'w').write(str(i))\n"
                "    os.replace('/workspace/.count', '/workspace/count')\n    time.sleep(0.05)\"", run_async=True))
    for _ in range(100):  # until it has counted
        if sandbox.process.exec("test -s /workspace/count").exit_code == 0:
            break
        time.sleep(0.1)
    state_name = "l3-state-" + tag
    sandbox.create_snapshot(state_name)
    found = runtime.snapshots.list(name=state_name).data
    assert len(found) == 1 and found[0]["state"] == "ready", found
    state_snapshot = found[0]["id"]
    later = daytona.create(CreateSandboxFromSnapshotParams(snapshot=state_name), timeout=CREATE_TIMEOUT)
    sandboxes.append(later)
    assert later.fs.download_file("progress.txt") == b"step 1\n"
    first = int(later.fs.download_file("/workspace/count"))
    time.sleep(0.5)
    assert int(later.fs.download_file("/workspace/count")) > first, "the process did not go on running"

    # A Daytona snapshot deleted is gone by name.
    daytona.snapshot.delete(name)
    images.remove(snap.id)
    try:
        daytona.snapshot.get(name)
        raise AssertionError("a deleted snapshot was found")
    except DaytonaNotFoundError:
        pass
finally:
    for sandbox in sandboxes:
        sandbox.delete()
    if state_snapshot:
        runtime.snapshots.delete(state_snapshot)
    for image_id in dict.fromkeys(images):
        runtime.images.delete(image_id)
