"""python.md sample 18: a persistent sandbox with a lifetime cap; keep_alive
(the client's own loop of GET and :extend) and its release; update(persistent=False); stop."""
import time
from datetime import datetime

from withruntime import Sandbox


def seconds_left(info):
    return datetime.fromisoformat(info["expiresAt"].replace("Z", "+00:00")).timestamp() - time.time()


sbx = Sandbox.create(funding="paid", persistent=True, max_total_cost_micros=50_000_000, timeout_seconds=600)
try:
    assert sbx.info["persistent"] is True and sbx.info["maxTotalCostMicros"] == 50_000_000
    sbx.update(persistent=False)
    assert sbx.info["persistent"] is False, sbx.info
    release = sbx.keep_alive(margin_seconds=1800)
    deadline = time.monotonic() + 20
    while seconds_left(sbx.refresh().info) < 1700 and time.monotonic() < deadline:
        time.sleep(0.2)
    print("lease left", round(seconds_left(sbx.info)))
    assert seconds_left(sbx.info) >= 1700, sbx.info
    release()
    sbx.stop()
    assert sbx.state == "stopped"
finally:
    sbx.delete()
