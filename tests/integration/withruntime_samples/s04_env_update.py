"""python.md sample 4: env at create, its names in the info; update(env=...)
sets one variable and removes another; delete."""
from withruntime import Runtime

runtime = Runtime()
sbx = runtime.sandboxes.create(env={"MODE": "serve", "QUEUE_URL": "https://queue.internal/jobs"})
try:
    print(sbx.info["envNames"])
    assert sorted(sbx.info["envNames"]) == ["MODE", "QUEUE_URL"]
    assert sbx.exec("echo $MODE").stdout == "serve\n"
    sbx.update(env={"MODE": "drain", "QUEUE_URL": None})
    assert sbx.info["envNames"] == ["MODE"], sbx.info
    assert sbx.exec("echo $MODE-${QUEUE_URL:-unset}").stdout == "drain-unset\n"
finally:
    sbx.delete()
