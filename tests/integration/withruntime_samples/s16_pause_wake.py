"""python.md sample 16: pause, connect again by id, wake with a new lease, extend, stop."""
from withruntime import Sandbox

sbx = Sandbox.create(timeout_seconds=600)
try:
    sbx.exec("echo kept > /workspace/state.txt && python3 -c 'import time; open(\"/tmp/t\", \"w\").write(str(time.time()))'")
    sbx.pause()
    print("paused", sbx.state)
    assert sbx.state == "paused", sbx.info

    again = Sandbox.connect(sbx.id)
    assert again.state == "paused"
    again.wake(timeout_seconds=1200)
    assert again.state == "running", again.info
    assert again.info["expiresAt"] > sbx.info["expiresAt"], again.info  # the new lease counts from the wake
    before = again.info["expiresAt"]
    again.extend(600)
    print("expires", before, "->", again.info["expiresAt"])
    assert again.info["expiresAt"] > before
    assert again.exec("cat /workspace/state.txt").stdout == "kept\n"
    again.stop()
    assert again.state == "stopped"
finally:
    sbx.delete()
