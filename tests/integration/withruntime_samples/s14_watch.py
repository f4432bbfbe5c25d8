"""python.md sample 14: files.watch, an exec, get_new_events, stop."""
from withruntime import Sandbox

with Sandbox.create() as sbx:
    sbx.files.mkdir("/workspace/app/node_modules")
    watch = sbx.files.watch("/workspace", recursive=True, exclude=["node_modules"])
    sbx.exec("cd /workspace/app && echo hi > main.py && echo x > node_modules/dep.js && mv main.py app.py")
    events, waited = [], 0
    while not any(e["type"] == "rename" for e in events) and waited < 10:
        events += watch.get_new_events(wait_ms=2000)
        waited += 1
    print([(e["type"], e["path"]) for e in events])
    seen = {(e["type"], e["path"]) for e in events}
    assert ("create", "/workspace/app/main.py") in seen, events
    assert ("rename", "/workspace/app/app.py") in seen, events
    assert not [e for e in events if "node_modules/" in e["path"]], events
    assert watch.notices == [] and watch.exit_reason is None
    assert watch.stop() is True
    assert watch.get_new_events() == [] and watch.exit_reason == "stopped"
