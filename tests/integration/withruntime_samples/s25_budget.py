"""python.md sample 25: a create whose first lease would cost more than
max_cost_micros is refused as a ConflictError."""
from withruntime import ConflictError, Runtime

runtime = Runtime()
try:
    sbx = runtime.sandboxes.create(funding="paid", vcpu=2, timeout_seconds=600, max_cost_micros=50)
    sbx.delete()
    raise AssertionError("created over budget")
except ConflictError as error:
    print(error.code, error.message)
    assert error.code == "budget_exceeded" and error.status == 409
