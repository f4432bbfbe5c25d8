"""A disk snapshot through the native client: sbx.snapshot(mode="disk") keeps
the files only (/workspace, /etc, deletions); runtime.sandboxes.create(
snapshot=...) boots a fresh copy from them (no process of the source's), at
the snapshot's shape or another one the create names."""
from withruntime import Runtime

runtime = Runtime()
source = runtime.sandboxes.create(vcpu=1, memory_mib=512, labels={"sample": "s38"})
copies = []
snapshot = None
try:
    source.files.write("/workspace/notes.txt", "kept on disk\n")
    source.exec("mkdir -p /workspace/deep/er && echo deep > /workspace/deep/er/file"
                " && echo changed | sudo tee /etc/motd >/dev/null && sudo rm /etc/issue", check=True)
    sleeper = source.spawn(["sleep", "100000"])
    assert any(p["id"] == sleeper.id and p["state"] == "running" for p in source.processes())

    snapshot = source.snapshot(name="s38-disk", mode="disk", labels={"sample": "s38"})
    print(snapshot["id"], snapshot["mode"], snapshot["state"], snapshot["shape"])
    assert snapshot["mode"] == "disk" and snapshot["state"] == "ready", snapshot
    assert snapshot["name"] == "s38-disk" and snapshot["sourceSandboxId"] == source.id, snapshot
    assert (snapshot["shape"]["vcpu"], snapshot["shape"]["memoryMiB"]) == (1, 512), snapshot
    assert runtime.snapshots.get(snapshot["id"])["mode"] == "disk"
    assert any(s["id"] == snapshot["id"] for s in runtime.snapshots.list(sandbox_id=source.id))
    # The source runs on, its process with it.
    assert source.refresh().state == "running"
    assert any(p["id"] == sleeper.id and p["state"] == "running" for p in source.processes())

    # A copy at the snapshot's shape: the files, none of the processes.
    same = runtime.sandboxes.create(snapshot=snapshot["id"])
    copies.append(same)
    assert same.state == "running" and same.id != source.id
    assert (same.info["vcpu"], same.info["memoryMiB"]) == (1, 512), same.info
    assert same.info["labels"].get("sample") == "s38", same.info  # inherited
    assert same.files.read_text("/workspace/notes.txt") == "kept on disk\n"
    out = same.exec("cat /workspace/deep/er/file /etc/motd; test -e /etc/issue; echo $?")
    assert out.stdout == "deep\nchanged\n1\n", out
    assert sleeper.id not in [p["id"] for p in same.processes()]
    assert same.exec("pgrep -x sleep").exit_code == 1  # booted fresh
    # Its writes are its own.
    same.files.write("/workspace/copy-only.txt", "mine")
    assert source.exec("test -e /workspace/copy-only.txt").exit_code == 1

    # Another shape: more vCPUs, memory and disk.
    bigger = runtime.sandboxes.create(snapshot=snapshot["id"], vcpu=2, memory_mib=1024, disk_mib=8192)
    copies.append(bigger)
    assert (bigger.info["vcpu"], bigger.info["memoryMiB"], bigger.info["diskMiB"]) == (2, 1024, 8192), bigger.info
    assert bigger.exec("nproc").stdout == "2\n"
    assert bigger.files.read_text("/workspace/notes.txt") == "kept on disk\n"
    assert bigger.exec("pgrep -x sleep").exit_code == 1
finally:
    for s in copies + [source]:
        s.delete()
    if snapshot:
        runtime.snapshots.delete(snapshot["id"])
