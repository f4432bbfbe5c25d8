"""A snapshot-based rollout loop: prepare one environment, snapshot it, run
every episode in a fresh copy, score it outside, throw the copy away."""
from withruntime import Runtime

runtime = Runtime()
env = runtime.sandboxes.create(memory_mib=512, labels={"role": "rollout-env"})
env.files.write("/workspace/task.py", "import sys\nx = int(sys.argv[1])\nprint(x * x)\n")
snapshot = env.snapshot(name="rollout-env")
env.delete()
try:
    rewards = []
    for episode, action in enumerate([3, 4, 5]):
        with runtime.sandboxes.create(snapshot=snapshot["id"], labels={"episode": str(episode)}) as sbx:
            # Each copy starts from the same state: earlier episodes left nothing.
            assert not sbx.files.exists("/workspace/episode.txt")
            sbx.files.write("/workspace/episode.txt", str(episode))
            out = sbx.exec(["python3", "/workspace/task.py", str(action)])
            rewards.append(1.0 if out.stdout.strip() == str(action * action) else 0.0)
    print("rewards", rewards)
    assert rewards == [1.0, 1.0, 1.0]
finally:
    runtime.snapshots.delete(snapshot["id"])
