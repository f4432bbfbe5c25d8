"""python.md sample 24: the key's limits."""
from withruntime import Runtime

runtime = Runtime()
limits = runtime.limits.get()
print(limits["access"], limits["daily"]["remainingMicros"])
assert limits["access"] == "full"
assert limits["daily"]["window"] == "24h"
assert "remainingMicros" in limits["daily"]
