"""python.md sample 36: client options, and me(), which kiln does not offer
(no accounts or organisations): it answers 404 route_not_found."""
from withruntime import NotFoundError, Runtime

runtime = Runtime(max_retries=4, timeout=120)
assert runtime.sandboxes.list().data is not None
try:
    print(runtime.me()["orgId"])
    raise AssertionError("kiln answered /v1/me: record it as offered")
except NotFoundError as error:
    print("me():", error.code)
    assert error.code == "route_not_found"
runtime.close()
