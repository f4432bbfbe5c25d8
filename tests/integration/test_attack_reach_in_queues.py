"""The reach-in queues as their attacker (issue 42): one key floods SandboxFusion's queue
with waiting programs of 16 MiB each while a second key's program must still answer within
2x its idle latency, and one key fills the capacity line past --key-waiting-creates. Real
kilnds of their own (a small SandboxFusion front; a host with room for one sandbox), real
gVisor sandboxes; each attack is measured by a Gauge (reach_in_attacks.py: RSS at most
+64 MiB during, back to the baseline after). Requests that wait are Held: each on its own
raw connection, sent and answered on a thread of its own."""
import json
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

import pytest

from client import Client, metric
from conftest import start_kilnd, stop_kilnd
from reach_in_attacks import MiB, Gauge, raw_socket, read_head, request_bytes, until

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python"))
from kiln import Runtime  # noqa: E402


class Held:
    """One HTTP request on a connection of its own, sent (body and all) by a thread; the
    answer (status, head, body) is read by that thread; close() leaves."""

    def __init__(self, daemon, raw_head, body=b""):
        self.sock = raw_socket(daemon, timeout=120)
        self.head, self.body = raw_head, body
        self.status = self.answer_head = self.answer = self.error = None
        self.head_sent = threading.Event()
        self.done = threading.Event()
        self.t0 = time.monotonic()
        self.elapsed = None
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        try:
            self.sock.sendall(self.head)
            self.head_sent.set()
            if self.body:
                self.sock.sendall(memoryview(self.body))
            self.status, self.answer_head, rest = read_head(self.sock)
            self.elapsed = time.monotonic() - self.t0
            length = self.header("content-length")
            while length is not None and len(rest) < int(length):
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                rest += chunk
            self.answer = rest
        except OSError as e:
            self.error = e
        finally:
            self.head_sent.set()
            self.done.set()

    def header(self, name):
        """The answer's header `name` (lower case), or None."""
        for line in (self.answer_head or "").split("\r\n")[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == name:
                return v.strip()
        return None

    def answered(self):
        return self.status is not None

    def waiting(self):
        return not self.done.is_set()

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


# ---- 3. SandboxFusion's queue flooded by one key ------------------------------------------------

SF_CONCURRENCY = 4  # --sandboxfusion-concurrency; a key holds at most 3 (three quarters)
SF_KEY_SLOTS = 3
SF_QUEUE = 40       # --sandboxfusion-queue: the 40 bodies fill it
SF_SLACK_S = 3.0    # this VM's noise beside 2x the idle latency
SF_BODY = 16 * MiB
# What may stay after the flood: the burst of ~43 request threads leaves the sanitized kilnd's
# allocator 23-37 MiB it keeps (ASan's per-thread caches and its 16 MiB quarantine; seven runs,
# 2026-12-04), and four rounds in one kilnd grew no further than ~2.5 MiB a round. A kept body
# would be 16 MiB each, 640 MiB for the 40: far past this.
SF_AFTER_MARGIN_MIB = 64
# Past the queue: 504 in SandboxFusion's shape, "rate_limited: ..." with Retry-After (kilnd
# --help): SandboxFusion's clients (verl) retry a 504 and nothing else.
SF_QUEUE_FULL_STATUS = 504


@pytest.fixture(scope="module")
def sf_front(tmp_path_factory):
    """A kilnd whose SandboxFusion front runs 4 programs at once (3 per key), queues 40 per
    key, keeps no warm pools (every launch is alike, idle or not), and an operator language
    image built under its admin key. The image needs only python and /workspace (as
    test_sandboxfusion.py's own-image test builds), not the core set's compilers."""
    d = start_kilnd(tmp_path_factory.mktemp("sf-reach") / "state",
                    "--sandboxfusion-concurrency", str(SF_CONCURRENCY), "--sandboxfusion-queue", str(SF_QUEUE),
                    "--sandboxfusion-pool", "0", "--pool-memory-mib", "0")
    try:
        Runtime(d.url, d.admin_key).images.build(name="sandboxfusion", recipe={"workdir": "/workspace"},
                                                 timeout=600)
        admin = Client(d.url, key=d.admin_key)
        keys = [admin.ok("POST", "/v1/keys", json={"name": f"sf-{n}"})["secret"] for n in ("a", "b")]
        yield d, admin, keys
    finally:
        stop_kilnd(d)


def _run_code(daemon, key, body):
    """(head, body) of a run_code request; `body` is a dict or the JSON bytes themselves."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    raw = request_bytes(daemon, "POST", f"/sandboxfusion/{key}/run_code", None,
                        headers=["Content-Type: application/json"], body=data)
    return raw[:-len(data)], data


def close_past_guard(gauge, holds, stop):
    """Closes every held request once kilnd grew past the guard (a kilnd that reads the
    waiting bodies must not take the machine with it); the test fails on the growth."""
    def run():
        while not stop.is_set():
            if gauge.over_guard():
                for h in list(holds):
                    h.close()
                return
            stop.wait(0.05)
    threading.Thread(target=run, daemon=True).start()


@pytest.mark.serial  # times key B's program against its idle latency
def test_one_keys_queue_flood_of_sandboxfusion_leaves_another_key_its_slot(sf_front):
    """Attack: key A fills its slots with time.sleep(60) programs, then sends 40 run_code
    requests of 16 MiB each, which wait; then one more. Checks: the waiting bodies are not read
    (kilnd's RSS grows at most 64 MiB); past --sandboxfusion-queue waiting requests of A, the
    next answers 504 at once in SandboxFusion's shape (rate_limited, with Retry-After: verl
    retries it); key B's small program still answers within 2x its idle latency (plus a small
    constant); after A leaves, A's sandboxes go and kilnd's RSS and threads come back."""
    d, admin, (key_a, key_b) = sf_front
    small = {"code": "print(int(input()) * 2)", "language": "python", "stdin": "21\n"}

    def b_runs(timeout):
        t0 = time.monotonic()
        r = Client(d.url, timeout=timeout).post(f"/sandboxfusion/{key_b}/run_code", json=small)
        took = time.monotonic() - t0
        assert r.status == 200, r
        out = r.json()
        assert out["status"] == "Success" and out["run_result"]["stdout"] == "42\n", out
        return took

    b_runs(120)  # the first launch of the image
    idle = statistics.median(b_runs(120) for _ in range(3))

    a_client = Client(d.url, key=key_a)
    held, stop_guard = [], threading.Event()
    try:
        for _ in range(SF_KEY_SLOTS):
            held.append(Held(d, *_run_code(d, key_a, {"code": "import time\ntime.sleep(60)\nprint(1)",
                                                      "language": "python", "run_timeout": 90})))

        def a_running():
            boxes = a_client.get("/v1/sandboxes").json()["data"]
            return sum(1 for s in boxes if s["state"] == "running") >= SF_KEY_SLOTS

        until("A's sleeping programs hold its slots", a_running, 60)
        gauge = Gauge(d, f"SandboxFusion: key A's {SF_QUEUE} waiting bodies of 16 MiB").start()
        big = json.dumps({"code": "print(1)\n#" + "x" * SF_BODY, "language": "python"}).encode()
        head = _run_code(d, key_a, big)[0]
        close_past_guard(gauge, held, stop_guard)
        bigs = []
        for _ in range(SF_QUEUE):
            bigs.append(Held(d, head, big))
            held.append(bigs[-1])
        for h in bigs:
            assert h.head_sent.wait(10), "a request's head did not go out"
        # Past the queue: A's next answers 504 at once. A probe that found room (its head may
        # have come before some of the 40) waits with them; the next is past the cap.
        probes, refused = [], None
        for _ in range(3):
            p = Held(d, *_run_code(d, key_a, small))
            held.append(p)
            probes.append(p)
            p.done.wait(3)
            if p.answered():
                refused = p
                break
        waiting_a = sum(1 for h in bigs + probes if h.waiting())
        b_during = b_runs(2 * idle + SF_SLACK_S + 30)
        gauge.stop()
        a_waiting_at_end = sum(1 for h in bigs + probes if h.waiting())
    finally:
        stop_guard.set()
        for h in held:
            h.close()
    until("key A's sandboxes go once its clients left",
          lambda: not [s for s in a_client.get("/v1/sandboxes").json()["data"] if s["state"] == "running"], 60)
    f = gauge.check(after_margin_mib=SF_AFTER_MARGIN_MIB, idleLatencyS=round(idle, 2),
                    duringLatencyS=round(b_during, 2),
                    latencyRatio=round(b_during / idle, 2), aWaiting=waiting_a, aWaitingAtEnd=a_waiting_at_end,
                    refusedStatus=refused.status if refused else None,
                    refusedAfterS=round(refused.elapsed, 2) if refused else None,
                    refusedRetryAfter=refused.header("retry-after") if refused else None,
                    refusedAnswer=refused.answer[:300].decode(errors="replace") if refused else None)
    assert refused is not None, f"A's requests past {SF_QUEUE} waiting ones were not refused at once: {f}"
    assert refused.status == SF_QUEUE_FULL_STATUS, \
        f"A's request past the queue: HTTP {refused.status} {refused.answer[:300]!r}"
    shape = json.loads(refused.answer.decode(errors="replace") or "{}")
    assert shape.get("status") == "SandboxError" and shape.get("message", "").startswith("rate_limited:"), shape
    assert (refused.header("retry-after") or "").isdigit(), f"the 504 has no Retry-After: {refused.answer_head}"
    assert refused.elapsed < 3, f"the 504 took {refused.elapsed:.1f} s"
    assert waiting_a == SF_QUEUE, f"{waiting_a} of A's requests waited at once (queue {SF_QUEUE}): {f}"
    assert b_during <= 2 * idle + SF_SLACK_S, \
        f"key B's program took {b_during:.1f} s beside A's flood, idle {idle:.1f} s: {f}"


# ---- 11. the capacity line per key -------------------------------------------------------------

WAITING_CAP = 4  # --key-waiting-creates


@pytest.fixture(scope="module")
def small_host(tmp_path_factory):
    """A kilnd planning with 300 MiB of memory and no overcommit, no warm pools: one sandbox
    of 256 MiB fills it, and creates of 128 MiB wait for room."""
    d = start_kilnd(tmp_path_factory.mktemp("small-host") / "state", "--host-memory-mib", "300",
                    "--memory-overcommit", "1", "--pool-memory-mib", "0",
                    "--key-waiting-creates", str(WAITING_CAP))
    try:
        yield d
    finally:
        stop_kilnd(d)


def test_a_key_past_its_waiting_creates_gets_429_at_once(small_host):
    """Attack: with the host full, key A sends creates that wait for room (Prefer: wait=60)
    until --key-waiting-creates of them wait, then 40 more. Checks: every create past the cap
    answers 429 at once (in kiln's error shape) while A's waiting ones keep their places; key
    B still gets into the line (no 429: its own wait ends in 409 no_capacity); once A's
    clients leave, the line is empty and kilnd's RSS and threads come back."""
    d = small_host
    admin = Client(d.url, key=d.admin_key)
    key_a, key_b = (admin.ok("POST", "/v1/keys", json={"name": f"line-{n}"})["secret"] for n in ("a", "b"))
    filler = admin.create(memoryMiB=256, vcpu=1)["id"]
    try:
        gauge = Gauge(d, f"capacity line: key A past {WAITING_CAP} waiting creates").start()
        body = json.dumps({"memoryMiB": 128, "vcpu": 1}).encode()

        def create_head(key, wait):
            return request_bytes(d, "POST", "/v1/sandboxes", key, body=body, headers=[
                "Content-Type: application/json", f"Prefer: wait={wait}"])

        waiters, past = [], []
        try:
            for _ in range(WAITING_CAP):
                waiters.append(Held(d, create_head(key_a, 60)))
            until("A's creates wait in line",
                  lambda: metric(admin, "kiln_capacity_queue_length") == WAITING_CAP, 20, every=0.1)
            for _ in range(5):  # one by one: each must answer at once
                past.append(Held(d, create_head(key_a, 60)))
                if not past[-1].done.wait(5):
                    break  # it waits: the test fails below; no need to queue 40 more
            lock = threading.Lock()
            burst = []

            def more():
                for _ in range(5):
                    h = Held(d, create_head(key_a, 60))
                    with lock:
                        burst.append(h)
                    h.done.wait(5)
            threads = [threading.Thread(target=more) for _ in range(7 if all(h.answered() for h in past) else 0)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            past += burst
            b = Client(d.url, key=key_b).post("/v1/sandboxes", json={"memoryMiB": 128, "vcpu": 1},
                                              headers={"Prefer": "wait=1"}, timeout=30)
            still_waiting = sum(1 for w in waiters if w.waiting())
            gauge.stop()
        finally:
            for h in waiters + past:
                h.close()
        until("the line is empty once A's clients left",
              lambda: metric(admin, "kiln_capacity_queue_length") == 0, 15, every=0.2)
        statuses = sorted({h.status for h in past}, key=str)
        slowest = max((h.elapsed or 99) for h in past)
        shape = json.loads(past[0].answer or b"{}") if past[0].answered() else {}
        err = shape.get("error") or {}
        f = gauge.check(pastCap=len(past), pastStatuses=statuses, slowestRefusalS=round(slowest, 2),
                        refusalCode=err.get("code"), aStillWaiting=still_waiting, keyB=b.status)
        unanswered = [h for h in past if not h.answered()]
        assert not unanswered, f"{len(unanswered)} of A's {len(past)} creates past the cap were not answered at once: {f}"
        assert statuses == [429], f"creates past the cap: {statuses}: {f}"
        assert err.get("status") == 429 and err.get("code") and err.get("message"), shape
        assert slowest < 3, f"a refusal took {slowest:.1f} s"
        assert still_waiting == WAITING_CAP, f"A's waiting creates lost their places: {still_waiting}"
        assert b.status == 409 and b.json()["error"]["code"] == "no_capacity", f"key B: {b!r}"
    finally:
        admin.request("DELETE", f"/v1/sandboxes/{filler}")
