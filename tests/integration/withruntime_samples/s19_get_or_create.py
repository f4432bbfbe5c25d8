"""python.md sample 19: one named sandbox, reused by the next call."""
from withruntime import Sandbox

dev = Sandbox.get_or_create("dev", idle_pause_seconds=900)
try:
    assert dev.info["reused"] is False and dev.info["name"] == "dev", dev.info
    assert dev.info["idlePauseSeconds"] == 900
    result = dev.exec("git pull || true")
    print(result.exit_code, result.stderr.strip())
    assert result.exit_code == 0
    again = Sandbox.get_or_create("dev", idle_pause_seconds=900)
    assert again.id == dev.id and again.info["reused"] is True, again.info
finally:
    dev.delete()
