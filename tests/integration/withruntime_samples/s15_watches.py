"""python.md sample 15: files.watches.start(..., webhook=True, id="sync"),
files.watches.stop("sync"). kiln sends no webhooks: webhook=True is refused
naming the field; the same watch without it runs until stopped."""
from withruntime import InvalidRequestError, Sandbox

with Sandbox.create() as sbx:
    try:
        sbx.files.watches.start("/workspace", recursive=True, webhook=True, timeout_ms=0, id="sync")
        raise AssertionError("webhook=True was accepted")
    except InvalidRequestError as error:
        print(error.code, error)
        assert error.code == "invalid_request" and "webhook" in str(error)
    watch = sbx.files.watches.start("/workspace", recursive=True, timeout_ms=0, id="sync")
    assert watch.id == "sync"
    listed = sbx.files.watches.list()
    assert [(w["id"], w["timeoutMs"], w["state"]) for w in listed] == [("sync", 0, "running")], listed
    assert sbx.files.watches.stop("sync") is True
