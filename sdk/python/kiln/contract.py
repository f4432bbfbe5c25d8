"""Values of the API contract the SDK relies on, each written once here.

sdk/python/tests/test_contract.py checks them against src/api/kiln/openapi.json.
"""

from typing import Optional

#: The server's default ``timeoutMs`` of an exec (ExecRequest.timeoutMs default).
DEFAULT_EXEC_TIMEOUT_MS = 60_000
#: How long past its command's own timeout kilnd may take to answer an exec (killing a large
#: process tree is not instant); a call waits that much longer before giving up
#: (ExecRequest.timeoutMs x-kiln-grace-ms).
EXEC_GRACE_MS = 30_000
#: The longest a read of a process's output may wait for more (the waitMs parameter's maximum).
MAX_OUTPUT_WAIT_MS = 30_000
#: What a non-streamed exec's answer keeps of stdout and of stderr (the rest is dropped and the
#: stream's `*_truncated` flag set): 64 KiB, or 1 MiB when `timeout_ms` is over 60 s
#: (CommandResult.stdout x-kiln-max-bytes / x-kiln-long-max-bytes / x-kiln-long-after-timeout-ms).
EXEC_OUTPUT_CAP = 64 * 1024
EXEC_LONG_OUTPUT_CAP = 1024 * 1024
EXEC_LONG_CAP_AFTER_MS = 60_000


def exec_output_cap(timeout_ms: Optional[int] = None) -> int:
    """The answer's cap per stream for an exec with this `timeout_ms` (None: the default)."""
    ms = DEFAULT_EXEC_TIMEOUT_MS if timeout_ms is None else int(timeout_ms)
    return EXEC_LONG_OUTPUT_CAP if ms > EXEC_LONG_CAP_AFTER_MS else EXEC_OUTPUT_CAP
