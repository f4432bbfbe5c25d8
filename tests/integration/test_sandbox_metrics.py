"""GET /v1/sandboxes/{id}/metrics: the meter's readings of a running sandbox (every 5 s),
folded into the range's points, against a real kilnd."""
import time

from client import assert_error


def _metrics(api, sid, **query):
    return api.ok("GET", f"/v1/sandboxes/{sid}/metrics", query=query)


def test_readings_show_cpu_memory_and_disk(api, sandboxes):
    sid = sandboxes.create(vcpu=1, memoryMiB=512, diskMiB=2048)["id"]
    api.sh(sid, "dd if=/dev/urandom of=/workspace/blob bs=1M count=64 status=none; "
                "timeout 7 sh -c 'while :; do :; done'; true", timeoutMs=60000)
    deadline = time.monotonic() + 30
    while True:
        m = _metrics(api, sid)
        busy = [p for p in m["points"] if p["cpuPeakPercent"] > 5]  # idle reads ~0.002
        if busy and m["latest"] and m["latest"]["diskBytes"] >= 60 << 20:
            break
        assert time.monotonic() < deadline, m
        time.sleep(1)
    latest = m["latest"]
    assert latest["cpuCores"] == 1 and latest["memoryLimitBytes"] == 512 << 20, latest
    assert latest["diskLimitBytes"] == 2048 << 20 and 0 < latest["memoryBytes"], latest
    assert 0 <= latest["memoryCacheBytes"] <= latest["memoryBytes"], latest
    # 15m: 10 s points, oldest first, each within its peak.
    ats = [p["at"] for p in m["points"]]
    assert ats == sorted(ats) and len(set(ats)) == len(ats), ats
    for p in m["points"]:
        assert 0 <= p["cpuPercent"] <= p["cpuPeakPercent"] <= 100, p
        assert p["memoryBytes"] <= p["memoryPeakBytes"] and 1 <= p["samples"] <= 3, p
    # A longer range folds the same readings into fewer points.
    day = _metrics(api, sid, range="24h")
    readings = sum(p["samples"] for p in m["points"])
    assert 1 <= len(day["points"]) <= 2 and sum(p["samples"] for p in day["points"]) >= readings, day


def test_a_bad_range_names_the_field_and_another_keys_sandbox_is_404(api, sid):
    assert_error(api.get(f"/v1/sandboxes/{sid}/metrics", query={"range": "2h"}), 400,
                 "invalid_request", issue_path="query.range")
    assert_error(api.get("/v1/sandboxes/no-such-sandbox/metrics"), 404, "not_found")
