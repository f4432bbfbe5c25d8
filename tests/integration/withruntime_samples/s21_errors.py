"""python.md sample 21: NotFoundError and the base error's code, hint and request_id."""
import withruntime
from withruntime import NotFoundError, Sandbox

try:
    Sandbox.connect("00000000-0000-4000-8000-000000000000")
    raise AssertionError("no error")
except NotFoundError as error:
    print(error.code, error.status, error.request_id)
    assert error.code == "not_found" and error.status == 404
    assert error.request_id and error.request_id.startswith("req_")

with Sandbox.create() as sbx:
    try:
        sbx.files.read_text("/workspace/missing.txt")
        raise AssertionError("no error")
    except withruntime.RuntimeAPIError as error:
        print(error.code, error.hint, error.request_id)
        assert isinstance(error, NotFoundError) and error.code == "file_not_found"
        assert error.request_id
        assert error.hint is None or isinstance(error.hint, str)
    try:
        sbx.exec("true", timeout_ms=-5)
        raise AssertionError("no error")
    except withruntime.RuntimeError as error:
        print(error.code, error.status, error.details)
        assert isinstance(error, withruntime.InvalidRequestError) and error.code == "invalid_request"
        assert error.details["issues"][0]["path"] == "body.timeoutMs"
