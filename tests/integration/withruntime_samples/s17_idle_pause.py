"""python.md sample 17: idle_pause_seconds at create; update(...) is not
offered by kiln (404 route_not_found)."""
from withruntime import NotFoundError, Sandbox

sbx = Sandbox.create(idle_pause_seconds=600)
try:
    assert sbx.info["idlePauseSeconds"] == 600, sbx.info
    try:
        sbx.update(idle_pause_seconds=1800)
        raise AssertionError("kiln answered :update: record it as offered")
    except NotFoundError as error:
        assert error.code == "route_not_found", error
    sbx.stop()
    assert sbx.state == "stopped"
finally:
    sbx.delete()
