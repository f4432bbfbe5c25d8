"""Values of the API contract the SDK relies on, each written once here.

sdk/python/tests/test_contract.py checks them against src/api/openapi.json.
"""

#: The server's default ``timeoutMs`` of an exec (ExecRequest.timeoutMs default).
DEFAULT_EXEC_TIMEOUT_MS = 60_000
#: How long past its command's own timeout kilnd may take to answer an exec (killing a large
#: process tree is not instant); a call waits that much longer before giving up
#: (ExecRequest.timeoutMs x-kiln-grace-ms).
EXEC_GRACE_MS = 30_000
#: The longest a read of a process's output may wait for more (the waitMs parameter's maximum).
MAX_OUTPUT_WAIT_MS = 30_000
