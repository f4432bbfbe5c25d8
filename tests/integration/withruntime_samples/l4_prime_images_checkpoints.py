"""The Prime layer's image and checkpoint paths, written as a Prime user would.
CreateSandboxRequest(docker_image=...) builds `FROM <docker_image>`: kiln's
built-in "base", and an image of the key's own built beforehand with
runtime.images.build (Prime's ImageClient is refused by the layer by design,
naming that call), with a start_command whose output get_logs reads.
checkpoint() is a disk snapshot (Prime's filesystem checkpoint):
wait_for_checkpoint / get_checkpoint / list_checkpoints see it DURABLE, and
create(checkpoint_id=..., cpu_cores=, memory_gb=) restores its files at
another size with no process of the source's; delete_checkpoint and
delete_sandbox_checkpoints remove them. No registry image is pulled (no
internet)."""
import time
import uuid

from withruntime import Runtime
from withruntime.prime import CreateSandboxRequest, SandboxClient, StartCommand

runtime = Runtime()
client = SandboxClient()
tag = uuid.uuid4().hex[:6]
tools = runtime.images.build(name="l4-prime-tools-" + tag, dockerfile=(
    "FROM base\nUSER root\nRUN mkdir -p /opt/prime && echo 'tools inside' > /opt/prime/README\nUSER user\n"))
assert tools["state"] == "ready", tools

sandbox_ids = []
image_ids = [tools["id"]]
try:
    plain = client.create(CreateSandboxRequest(name="l4-prime-base-" + tag, docker_image="base", timeout_minutes=30))
    sandbox_ids.append(plain.id)
    client.wait_for_creation(plain.id)
    assert plain.docker_image == "base" and plain.status == "RUNNING", plain
    assert client.execute_command(plain.id, "python3 -c 'print(6 * 7)'").stdout == "42\n"
    image_ids.append(runtime.sandboxes.get(plain.id).info["image"])

    sb = client.create(CreateSandboxRequest(
        name="l4-prime-" + tag, docker_image="l4-prime-tools-" + tag, cpu_cores=1, memory_gb=1, timeout_minutes=30,
        environment_vars={"RUN_MODE": "prime-sample"}, labels=["sample", "l4"],
        start_command=StartCommand(executable="python3", args=["-c", "print('start command ran', flush=True)"])))
    sandbox_ids.append(sb.id)
    client.wait_for_creation(sb.id)
    image_ids.append(runtime.sandboxes.get(sb.id).info["image"])
    print(sb.id, sb.docker_image, sb.cpu_cores, sb.memory_gb, sb.disk_size_gb)
    assert (sb.docker_image, sb.cpu_cores, sb.memory_gb, sb.disk_size_gb) == ("l4-prime-tools-" + tag, 1, 1.0, 5.0), sb
    run = client.execute_command(sb.id, "cat /opt/prime/README; echo $RUN_MODE")
    assert (run.exit_code, run.stdout) == (0, "tools inside\nprime-sample\n"), run
    for _ in range(50):
        if "start command ran" in client.get_logs(sb.id):
            break
        time.sleep(0.1)
    assert client.get_logs(sb.id) == "start command ran\n"

    client.upload_bytes(sb.id, "/workspace/data/results.json", b'{"score": 0.9}', "results.json")
    job = client.start_background_job(sb.id, "sleep 100000")
    assert not client.get_background_job_status(sb.id, job).completed

    checkpoint = client.checkpoint(sb.id)
    print("checkpoint", checkpoint.id, checkpoint.state, checkpoint.disk_size_bytes)
    assert checkpoint.state == "DURABLE" and checkpoint.sandbox_id == sb.id, checkpoint
    assert checkpoint.docker_image == "l4-prime-tools-" + tag, checkpoint
    assert checkpoint.disk_size_bytes == 5 * 1024 ** 3, checkpoint
    assert runtime.snapshots.get(checkpoint.id)["mode"] == "disk"
    assert client.wait_for_checkpoint(checkpoint.id, timeout_seconds=60).id == checkpoint.id
    assert client.get_checkpoint(checkpoint.id).state == "DURABLE"
    assert [c.id for c in client.list_checkpoints(sb.id)] == [checkpoint.id]
    assert client.get_sandbox_statuses([sb.id]).statuses[0].status == "RUNNING"  # the source runs on

    restored = client.create(CreateSandboxRequest(name="l4-prime-restored-" + tag, checkpoint_id=checkpoint.id,
                                                  cpu_cores=2, memory_gb=2, timeout_minutes=30))
    sandbox_ids.append(restored.id)
    client.wait_for_creation(restored.id)
    print(restored.id, restored.docker_image, restored.cpu_cores, restored.memory_gb, restored.disk_size_gb)
    assert (restored.docker_image, restored.cpu_cores, restored.memory_gb, restored.disk_size_gb) == (
        "l4-prime-tools-" + tag, 2, 2.0, 5.0), restored
    assert client.read_file(restored.id, "/workspace/data/results.json").content == '{"score": 0.9}'
    run = client.execute_command(restored.id, "cat /opt/prime/README; nproc; pgrep -x sleep || echo no-sleep")
    assert run.stdout == "tools inside\n2\nno-sleep\n", run

    second = client.checkpoint(sb.id)
    assert len(client.list_checkpoints(sb.id)) == 2
    client.delete_checkpoint(checkpoint.id)
    gone = client.delete_sandbox_checkpoints(sb.id)
    assert gone.deleted == [second.id] and not gone.errors, gone
    assert client.list_checkpoints(sb.id) == []
finally:
    for sandbox_id in sandbox_ids:
        client.delete(sandbox_id)
    for image_id in dict.fromkeys(i for i in image_ids if i):
        runtime.images.delete(image_id)
