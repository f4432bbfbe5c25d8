"""python.md sample 23: waiting for room. Run against a kilnd that lets a key
run one sandbox (--key-sandbox-limit 1), so the second create meets
409 quota_exceeded. kilnd itself waits in line for the `Prefer: wait=60` the
client sends with a create, so the waiting create below is answered once room
frees, and on_capacity_wait hears a refusal only if that wait runs out."""
import threading
import time

from withruntime import ConflictError, Runtime

runtime = Runtime(wait_for_capacity=600)
holder = runtime.sandboxes.create()

try:  # told at once
    runtime.sandboxes.create(wait_for_capacity=0)
    raise AssertionError("second sandbox started past the key's limit")
except ConflictError as refusal:
    print(refusal.code, refusal.retry_after_ms, refusal.retryable)
    assert refusal.code == "quota_exceeded", refusal

waits = []
threading.Timer(1.5, holder.delete).start()  # room frees while the next create waits
started = time.monotonic()
sbx = runtime.sandboxes.create(on_capacity_wait=lambda refusal, seconds: waits.append((refusal.code, seconds)))
print("waited", round(time.monotonic() - started, 1), "s:", waits)
assert sbx.state == "running"
assert time.monotonic() - started >= 1.0, "did not wait for the holder to go"
assert all(code == "quota_exceeded" for code, _ in waits), waits
sbx.delete()
