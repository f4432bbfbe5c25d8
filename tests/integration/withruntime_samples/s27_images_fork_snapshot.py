"""python.md sample 27 without volumes: build an image from a recipe, start a
sandbox from it, fork it, snapshot it and start from the snapshot.
The recipe installs nothing from the network (the docs' pip/apt lines would
need an index); it writes a module and runs a command instead."""
import uuid

from withruntime import Runtime

runtime = Runtime()
name = "data-" + uuid.uuid4().hex[:6]
lines = []
image = runtime.images.build(
    name=name,
    recipe={
        "files": [{"path": "/opt/data/stats.py", "content": "def mean(xs):\n    return sum(xs) / len(xs)\n"}],
        "commands": ["python3 -c 'print(6 * 7)' > /opt/data/answer.txt"],
        "env": {"PYTHONPATH": "/opt/data"},
    },
    on_log=lambda line: lines.append(line),
)
print(image["id"], image["state"], image["version"], len(lines), "log lines")
assert image["state"] == "ready" and image["version"] == 1
assert lines, "on_log heard nothing"

base = runtime.sandboxes.create(image=image["id"])
copies = []
restored = None
snapshot = None
try:
    out = base.exec("python3 -c 'import stats; print(stats.mean([1, 2, 3]))' && cat /opt/data/answer.txt")
    print(out.stdout)
    assert out.exit_code == 0 and out.stdout == "2.0\n42\n", out
    base.exec("echo step-1 > /workspace/progress.txt")

    copies = base.fork(count=2, funding="trial")
    assert len(copies) == 2 and all(c.state == "running" for c in copies)
    for fork in copies:
        assert fork.exec("cat /workspace/progress.txt").stdout == "step-1\n"
        fork.stop()
        assert fork.state == "stopped"

    snapshot = base.snapshot(name=name + "-snap", retention_days=7)
    print(snapshot["id"], snapshot["state"])
    assert snapshot["state"] == "ready" and snapshot["name"] == name + "-snap"
    assert base.refresh().state == "running"

    restored = runtime.sandboxes.create(snapshot=snapshot["id"])
    assert restored.exec("cat /workspace/progress.txt").stdout == "step-1\n"
finally:
    for s in copies + [base] + ([restored] if restored else []):
        s.delete()
    if snapshot:
        runtime.snapshots.delete(snapshot["id"])
