"""python.md sample 4: env at create, its names in the info; update(env=...)
is not offered by kiln (no :update; 404 route_not_found), so it stops there."""
from withruntime import NotFoundError, Runtime

runtime = Runtime()
sbx = runtime.sandboxes.create(env={"MODE": "serve", "QUEUE_URL": "https://queue.internal/jobs"})
try:
    print(sbx.info["envNames"])
    assert sorted(sbx.info["envNames"]) == ["MODE", "QUEUE_URL"]
    assert sbx.exec("echo $MODE").stdout == "serve\n"
    try:
        sbx.update(env={"MODE": "drain", "QUEUE_URL": None})
        raise AssertionError("kiln answered :update: record it as offered")
    except NotFoundError as error:
        assert error.code == "route_not_found", error
finally:
    sbx.delete()
