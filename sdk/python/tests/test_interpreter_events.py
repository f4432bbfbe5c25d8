"""interpreter.run's streamed events handed to callbacks (no daemon)."""
import pytest

from kiln import errors
from kiln.interpreter import dispatch, http_timeout, run_body


def test_events_reach_their_callbacks_and_the_execution_ends_it():
    seen = []
    cbs = dict(on_stdout=lambda t: seen.append(("out", t)), on_stderr=lambda t: seen.append(("err", t)),
               on_result=lambda r: seen.append(("res", r)), on_error=lambda e: seen.append(("error", e)))
    assert dispatch({"k": "start", "id": "x"}, **cbs) is None
    assert dispatch({"k": "stdout", "text": "a"}, **cbs) is None
    assert dispatch({"k": "stderr", "text": "b"}, **cbs) is None
    dispatch({"k": "result", "main": True, "data": {"text/plain": "2"}, "refs": []}, **cbs)
    dispatch({"k": "error", "name": "E", "value": "v", "traceback": "tb"}, **cbs)
    assert seen == [("out", "a"), ("err", "b"), ("res", {"main": True, "data": {"text/plain": "2"}, "refs": []}),
                    ("error", {"name": "E", "value": "v", "traceback": "tb"})]
    assert dispatch({"k": "execution", "execution": {"status": "ok"}}, **cbs) == {"status": "ok"}
    # A callback left out is skipped.
    assert dispatch({"k": "stdout", "text": "a"}, None, None, None, None) is None


def test_a_failure_raises_the_api_error():
    with pytest.raises(errors.ConflictError) as e:
        dispatch({"k": "failure", "code": "busy", "message": "a run is going", "status": 409}, None, None, None, None)
    assert e.value.code == "busy"


def test_bodies_and_deadlines():
    assert run_body("1", None, None, None) == {"code": "1"}
    assert run_body("1", "python", "c", 0) == {"code": "1", "language": "python", "context": "c", "timeoutMs": 0}
    assert run_body("1", "r", None, None, {"A": "b"}) == {"code": "1", "language": "r", "env": {"A": "b"}}
    assert http_timeout(None) == 120.0 and http_timeout(1000) == 61.0 and http_timeout(0) > 86400
