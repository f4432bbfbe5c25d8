"""python.md sample 22: idempotency keys on create and exec."""
import uuid

from withruntime import Runtime

runtime = Runtime()
job = "job-42-" + uuid.uuid4().hex[:8]
sbx = runtime.sandboxes.create(idempotency_key=f"{job}-sandbox")
try:
    same = runtime.sandboxes.create(idempotency_key=f"{job}-sandbox")
    assert same.id == sbx.id and same.info.get("replayed") is True, same.info
    first = sbx.exec(["python3", "-c", "import uuid; print(uuid.uuid4())"], idempotency_key=f"{job}-step-1")
    again = sbx.exec(["python3", "-c", "import uuid; print(uuid.uuid4())"], idempotency_key=f"{job}-step-1")
    print(first.stdout, again.stdout, again.replayed)
    assert again.stdout == first.stdout and again.replayed is True
finally:
    sbx.delete()
