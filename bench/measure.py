"""Measuring helpers shared by bench/run.py's figure groups: percentiles,
timing loops and the abort flag that load threads watch."""
import threading
import time

from common import ApiError

# Set on failure or Ctrl-C: load threads finish their iteration and stop, and
# cleanup waits for them before it deletes what they made.
ABORT = threading.Event()


def percentile(sorted_values, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_values:
        return None
    k = (len(sorted_values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def stats(values, digits=3):
    v = sorted(values)
    r = lambda x: None if x is None else round(x, digits)
    return {"p50": r(percentile(v, 0.5)), "p90": r(percentile(v, 0.9)),
            "p99": r(percentile(v, 0.99)), "min": r(v[0]) if v else None,
            "max": r(v[-1]) if v else None, "n": len(v)}


def ms(seconds):
    return seconds * 1000.0


def exec_true(api, sid):
    r = api.call("POST", f"/v1/sandboxes/{sid}:exec", {"argv": ["true"]})
    if r.get("exitCode") != 0:
        raise ApiError(f"exec true: {r}")
    return r


def timed(fn, n, warmup=0):
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(ms(time.perf_counter() - t0))
    return out


def stop_load_threads():
    ABORT.set()
    for t in threading.enumerate():
        if t is not threading.current_thread() and not t.daemon:
            t.join(timeout=120)
