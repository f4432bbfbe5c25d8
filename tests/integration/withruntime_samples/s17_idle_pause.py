"""python.md sample 17: idle_pause_seconds at create, then update(...)."""
from withruntime import Sandbox

sbx = Sandbox.create(idle_pause_seconds=600)
try:
    assert sbx.info["idlePauseSeconds"] == 600, sbx.info
    sbx.update(idle_pause_seconds=1800)
    assert sbx.info["idlePauseSeconds"] == 1800, sbx.info
    sbx.stop()
    assert sbx.state == "stopped"
finally:
    sbx.delete()
