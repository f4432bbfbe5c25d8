"""The Modal layer's image and snapshot paths, written as a Modal user would:
an Image recipe (from_registry, env, run_commands, add_local_file,
add_local_dir, dockerfile_commands, workdir) built when Sandbox.create needs
it; Image.publish and Image.from_name / from_id; snapshot_filesystem() (a disk
snapshot: a new sandbox from that Image has the files, no processes) and
_experimental_snapshot() / _experimental_from_snapshot (memory: the running
entrypoint goes on). The base is kiln's built-in "base" image: debian_slim()
and pip_install/apt_install pull from the internet, which the build has not.
"""
import json
import os
import tempfile
import time
import uuid

from withruntime import Runtime, modal

runtime = Runtime()
tag = uuid.uuid4().hex[:6]
app = modal.App.lookup("l1-modal-" + tag, create_if_missing=True)

local = tempfile.mkdtemp(prefix="kiln-l1-")
with open(os.path.join(local, "config.json"), "w") as f:
    json.dump({"answer": 42}, f)
os.makedirs(os.path.join(local, "lib", "pkg"))
with open(os.path.join(local, "lib", "pkg", "__init__.py"), "w") as f:
    f.write("def double(x):\n    return 2 * x\n")

image = (modal.Image.from_registry("base", setup_dockerfile_commands=["USER root"])
         .env({"GREETING": "hello from the image", "PYTHONPATH": "/opt/app/lib"})
         .run_commands("mkdir -p /opt/app", "python3 -c 'print(6 * 7)' > /opt/app/answer.txt")
         .add_local_file(os.path.join(local, "config.json"), "/opt/app/config.json", copy=True)
         .add_local_dir(os.path.join(local, "lib"), "/opt/app/lib", copy=True)
         .dockerfile_commands(["RUN echo built-by-dockerfile-commands > /opt/app/step.txt"])
         .workdir("/opt/app"))

sandboxes = []
snapshots = []
images = []
try:
    sb = modal.Sandbox.create(app=app, image=image, timeout=600)
    sandboxes.append(sb)
    images.append(image.object_id)
    print("image", image.object_id, "sandbox", sb.object_id)

    p = sb.exec("bash", "-c", "cat answer.txt step.txt; echo $GREETING; pwd;"
                " python3 -c 'import json, pkg; print(pkg.double(json.load(open(\"config.json\"))[\"answer\"]))'")
    p.wait()
    out = p.stdout.read()
    assert p.returncode == 0, (out, p.stderr.read())
    assert out == "42\nbuilt-by-dockerfile-commands\nhello from the image\n/opt/app\n84\n", out

    # The same recipe published under a name, found again by name and by id.
    name = "l1-modal-img-" + tag
    image.publish(name)
    by_name = modal.Image.from_name(name).hydrate()
    images.append(by_name.object_id)
    assert by_name.object_id, by_name
    assert runtime.images.get(by_name.object_id)["name"] == name
    assert modal.Image.from_id(image.object_id).hydrate().object_id == image.object_id
    named = modal.Sandbox.create(app=app, image=modal.Image.from_name(name))
    sandboxes.append(named)
    p = named.exec("cat", "/opt/app/answer.txt")
    p.wait()
    assert p.stdout.read() == "42\n"

    # snapshot_filesystem: the files, not the processes.
    sb.filesystem.write_text("progress: step 1\n", "/workspace/progress.txt")
    sleeper = sb.exec("sleep", "100000")
    fs_image = sb.snapshot_filesystem()
    snapshots.append(fs_image.object_id)
    print("filesystem snapshot", fs_image.object_id)
    assert runtime.snapshots.get(fs_image.object_id)["mode"] == "disk"
    copy = modal.Sandbox.create(app=app, image=fs_image)
    sandboxes.append(copy)
    p = copy.exec("bash", "-c", "cat /workspace/progress.txt /opt/app/answer.txt; pgrep -x sleep || echo no-sleep")
    p.wait()
    assert p.stdout.read() == "progress: step 1\n42\nno-sleep\n"
    assert sleeper.poll() is None  # the source runs on, its process with it
    sleeper.kill()

    # _experimental_snapshot: memory too, so the entrypoint is still running.
    counter = modal.Sandbox.create(
        "python3", "-c", "import os, time\ni = 0\nwhile True:\n    i += 1\n"
        "    open('/workspace/.count', 'w').write(str(i))\n    os.replace('/workspace/.count', '/workspace/count')\n"
        "    time.sleep(0.05)", app=app, image=image)
    sandboxes.append(counter)
    for _ in range(100):  # until it has counted
        check = counter.exec("test", "-s", "/workspace/count")
        if check.wait() == 0:
            break
        time.sleep(0.1)
    memory = counter._experimental_snapshot()
    snapshots.append(memory.object_id)
    assert runtime.snapshots.get(memory.object_id)["mode"] == "memory"
    assert modal.SandboxSnapshot.from_id(memory.object_id).object_id == memory.object_id
    restored = modal.Sandbox._experimental_from_snapshot(memory)
    sandboxes.append(restored)
    assert restored.poll() is None, "the entrypoint did not go on running"
    first = int(restored.filesystem.read_text("/workspace/count"))
    time.sleep(0.5)
    later = int(restored.filesystem.read_text("/workspace/count"))
    assert later > first, (first, later)
finally:
    for s in sandboxes:
        s.terminate()
    for snapshot_id in snapshots:
        runtime.snapshots.delete(snapshot_id)
    for image_id in dict.fromkeys(i for i in images if i):
        runtime.images.delete(image_id)
