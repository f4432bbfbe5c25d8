"""Waits that poll with a deadline: nothing in the tests sleeps to assert."""
import time


def wait_for(pred, within, what, every=0.2):
    """Polls pred() until it returns something truthy; returns that value. Fails after
    `within` seconds, naming `what`."""
    deadline = time.monotonic() + within
    while True:
        v = pred()
        if v:
            return v
        assert time.monotonic() < deadline, f"timed out after {within} s waiting for {what}"
        time.sleep(every)


def poll_until(pred, within, every=0.2):
    """Polls pred() until it returns something truthy or `within` seconds pass; returns its
    last value (falsy on a timeout), for a caller that asserts with its own message."""
    deadline = time.monotonic() + within
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(every)


def wait_stopped(api, sid, within):
    """The sandbox's record once it is stopped; fails after `within` seconds with the last
    record seen."""
    box = {}

    def stopped():
        box["info"] = api.sandbox(sid)
        return box["info"]["state"] == "stopped"

    try:
        wait_for(stopped, within, f"sandbox {sid} to stop")
    except AssertionError as e:
        raise AssertionError(f"{e}: last seen {box.get('info')!r}") from None
    return box["info"]
