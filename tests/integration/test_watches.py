"""File watches (issue 28 item 4): inotify in the sandbox's agent, read by
cursor (long poll or NDJSON follow). Events, folding, renames, recursion,
bounds (overflow, watches per sandbox, descriptors), ends (stop, timeout,
root removed), errors naming the field, and pause/wake."""
import os
import threading
import time

import pytest

import lib.kilnd
from client import assert_error

W = "/v1/sandboxes/{}/files/watches"


def start(api, sid, path, **fields):
    return api.ok("POST", W.format(sid), json={"path": path, **fields})


def read(api, sid, wid, cursor=0, wait_ms=0):
    return api.ok("GET", W.format(sid) + f"/{wid}/events", query={"cursor": cursor, "waitMs": wait_ms})


def collect(api, sid, wid, cursor=0, until=None, limit_s=20):
    """Reads pages until `until(events, notices)` holds or the watch ended."""
    events, notices, deadline = [], [], time.monotonic() + limit_s
    while time.monotonic() < deadline:
        page = read(api, sid, wid, cursor, wait_ms=2000)
        assert page["nextCursor"] >= cursor or page["events"] == [], page
        events += page["events"]
        notices += page["notices"]
        cursor = page["nextCursor"]
        if page["ended"] or (until and until(events, notices)):
            return events, notices, cursor
    raise AssertionError(f"watch {wid}: condition not met in {limit_s}s: {events[-20:]!r} {notices!r}")


def stop(api, sid, wid):
    return api.ok("DELETE", W.format(sid) + f"/{wid}")


@pytest.fixture(autouse=True)
def no_watches_left(api, sid):
    yield
    for _ in range(2):  # the first DELETE ends a running watch, the second forgets it
        for w in api.ok("GET", W.format(sid))["data"]:
            api.request("DELETE", W.format(sid) + f"/{w['id']}")


def test_create_write_remove_rename_chmod(api, sid):
    api.sh(sid, "mkdir -p /workspace/t1")
    w = start(api, sid, "/workspace/t1", batchMs=50)
    assert w["path"] == "/workspace/t1" and w["recursive"] is False and w["state"] == "running", w
    assert w["cursor"] == 0 and w["id"]
    api.sh(sid, "cd /workspace/t1 && echo a > f && echo b >> f && mv f g && chmod 600 g && rm g && mkdir d")
    events, _, _ = collect(api, sid, w["id"], until=lambda e, n: any(x["path"].endswith("/d") for x in e))
    seen = [(e["type"], e["path"].rsplit("/", 1)[1], e.get("oldPath")) for e in events]
    assert ("create", "f", None) in seen, seen
    assert ("write", "f", None) in seen, seen
    assert ("rename", "g", "/workspace/t1/f") in seen, seen
    assert ("chmod", "g", None) in seen, seen
    assert ("remove", "g", None) in seen, seen
    assert [e for e in events if e["path"] == "/workspace/t1/d"][0]["isDir"] is True
    order = [s[0] for s in seen]
    assert order.index("create") < order.index("rename") < order.index("remove"), seen
    assert stop(api, sid, w["id"]) == {"stopped": True}


def test_writes_fold_with_a_count(api, sid):
    api.sh(sid, "mkdir -p /workspace/t2")
    w = start(api, sid, "/workspace/t2", batchMs=2000, events=["write"])
    # 20 writes 20 ms apart: each reaches the agent as its own IN_MODIFY (the
    # kernel merges identical events only while they wait unread), and the
    # batch folds them into one write with a count.
    api.exec(sid, argv=["python3", "-c",
                        "import os, time\nfd = os.open('/workspace/t2/log', os.O_CREAT | os.O_WRONLY)\n"
                        "for _ in range(20):\n    os.write(fd, b'x'); time.sleep(0.02)\n"])
    events, _, _ = collect(api, sid, w["id"], until=lambda e, n: e)
    assert {e["type"] for e in events} == {"write"}, events  # events=["write"] keeps only writes
    assert len(events) == 1 and events[0]["path"] == "/workspace/t2/log", events
    assert 10 <= events[0]["count"] <= 20, events
    print(f"\nfolding: 20 writes -> {events}")


def test_recursive_sees_a_directory_made_later(api, sid):
    api.sh(sid, "mkdir -p /workspace/t3/old/deep")
    w = start(api, sid, "/workspace/t3", recursive=True, batchMs=50)
    assert w["watchedDirs"] == 3, w
    # A tree made at once: its files may come before the new directories'
    # watches; the agent scans each new directory and reports them.
    api.sh(sid, "mkdir -p /workspace/t3/new/a/b && echo 1 > /workspace/t3/new/a/b/f && echo 2 > /workspace/t3/old/deep/g")
    want = {"/workspace/t3/new", "/workspace/t3/new/a", "/workspace/t3/new/a/b",
            "/workspace/t3/new/a/b/f", "/workspace/t3/old/deep/g"}
    events, _, cursor = collect(api, sid, w["id"],
                                until=lambda e, n: want <= {x["path"] for x in e if x["type"] == "create"})
    # Later changes in the new directory arrive by its own watch.
    api.sh(sid, "echo 3 > /workspace/t3/new/a/b/later && mv /workspace/t3/new /workspace/t3/moved")
    events, _, _ = collect(api, sid, w["id"], cursor,
                           until=lambda e, n: any(x["type"] == "rename" for x in e))
    assert ("create", "/workspace/t3/new/a/b/later") in {(e["type"], e["path"]) for e in events}, events
    ren = [e for e in events if e["type"] == "rename"][0]
    assert ren["path"] == "/workspace/t3/moved" and ren["oldPath"] == "/workspace/t3/new" and ren["isDir"], ren
    # The moved tree's watches follow it.
    api.sh(sid, "echo 4 > /workspace/t3/moved/a/b/after")
    events, _, _ = collect(api, sid, w["id"], cursor,
                           until=lambda e, n: any(x["path"] == "/workspace/t3/moved/a/b/after" for x in e))
    assert api.ok("GET", W.format(sid))["data"][0]["watchedDirs"] == 6


def test_include_and_exclude(api, sid):
    api.sh(sid, "mkdir -p /workspace/t4/node_modules/x /workspace/t4/src")
    w = start(api, sid, "/workspace/t4", recursive=True, batchMs=50, include=["*.py"], exclude=["node_modules"])
    assert w["watchedDirs"] == 2, w  # node_modules is not watched at all
    api.sh(sid, "cd /workspace/t4 && echo > node_modules/x/a.py && echo > src/a.txt && echo > src/b.py && echo > c.py")
    events, _, _ = collect(api, sid, w["id"], until=lambda e, n: any(x["path"].endswith("c.py") for x in e))
    paths = {e["path"] for e in events}
    assert paths == {"/workspace/t4/src/b.py", "/workspace/t4/c.py"}, events


def test_long_poll_returns_as_soon_as_an_event_comes(api, sid):
    api.sh(sid, "mkdir -p /workspace/t5")
    w = start(api, sid, "/workspace/t5/", batchMs=0)
    assert w["path"] == "/workspace/t5", w  # one spelling: event paths are path + "/" + name
    t0 = time.monotonic()
    empty = read(api, sid, w["id"], 0, wait_ms=500)
    assert empty["events"] == [] and empty["nextCursor"] == 0 and 0.45 < time.monotonic() - t0 < 5, empty
    api.spawn(sid, command="sleep 1; touch /workspace/t5/now")
    t0 = time.monotonic()
    page = read(api, sid, w["id"], 0, wait_ms=8000)
    took = time.monotonic() - t0
    assert [e["path"] for e in page["events"]] == ["/workspace/t5/now"], page
    assert 0.8 < took < 5.0, f"long poll answered after {took:.2f}s"
    print(f"\nlong poll: event 1 s after the call answered at {took:.3f}s")
    assert page["nextCursor"] == 1 and page["ended"] is False and page["lostBytes"] == 0


def test_follow_streams_ndjson_until_stopped(api, sid):
    api.sh(sid, "mkdir -p /workspace/t6")
    w = start(api, sid, "/workspace/t6", batchMs=20)
    api.spawn(sid, command="sleep 0.5; touch /workspace/t6/a; sleep 0.5; touch /workspace/t6/b")

    def stop_later():
        time.sleep(2.5)
        stop(api, sid, w["id"])
    threading.Thread(target=stop_later, daemon=True).start()
    s = api.stream("GET", W.format(sid) + f"/{w['id']}/events", query={"follow": True, "cursor": 0}, timeout=30)
    assert s.status == 200 and s.headers.get("content-type", "").startswith("application/x-ndjson"), s
    lines = s.events
    batches = [l for l in lines if l["k"] == "events"]
    assert [e["path"] for b in batches for e in b["events"] if e["type"] == "create"] == \
        ["/workspace/t6/a", "/workspace/t6/b"], lines
    assert len(batches) >= 2, "each touch came in its own batch, as it happened"
    assert lines[-1]["k"] == "end" and lines[-1]["reason"] == "stopped", lines
    cursors = [l["cursor"] for l in lines]
    assert cursors == sorted(cursors), lines
    # The arrival times: the first batch came ~0.5 s in, not at the end.
    first_at = [t for t, l in s.timed_events if l["k"] == "events"][0]
    assert first_at < 2.4, s.timed_events


def _agent_rss_kib(api, sid):
    out = api.exec(sid, argv=["cat", "/proc/1/status"], user="root")["stdout"]
    return int([l for l in out.splitlines() if l.startswith("VmRSS:")][0].split()[1])


def _kilnd_rss_kib(kilnd):
    with open(f"/proc/{kilnd.proc.pid}/status") as f:
        return int([l for l in f if l.startswith("VmRSS:")][0].split()[1])


def test_a_flood_overflows_with_a_notice_and_memory_stays_bounded(api, sid, kilnd):
    api.sh(sid, "mkdir -p /workspace/t7")
    w = start(api, sid, "/workspace/t7", batchMs=100)
    agent_before, kilnd_before = _agent_rss_kib(api, sid), _kilnd_rss_kib(kilnd)
    t0 = time.monotonic()
    r = api.exec(sid, argv=["python3", "-c",
                            "for i in range(50000): open(f'/workspace/t7/f{i}', 'w').close()"],
                 timeoutMs=120000, timeout=150)
    assert r["exitCode"] == 0, r
    flood_s = time.monotonic() - t0
    time.sleep(0.5)
    page = read(api, sid, w["id"], 0)
    agent_after, kilnd_after = _agent_rss_kib(api, sid), _kilnd_rss_kib(kilnd)
    over = [n for n in page["notices"] if n["k"] == "overflow"]
    assert over and over[0]["reason"] in ("rate", "kernel"), page["notices"]
    info = page["watch"]
    kept = info["cursor"] - info["firstCursor"]
    assert kept <= 10000, info
    assert info["cursor"] >= 50000 or any(n["reason"] == "kernel" for n in over), info
    rate = [n for n in over if n["reason"] == "rate"]
    if rate:
        assert rate[0]["dropped"] == info["firstCursor"], (rate, info)
    assert len(page["events"]) <= 1000  # one page at most
    print(f"\nflood: 50,000 creates in {flood_s:.1f}s; ring cursor {info['cursor']}, kept {kept}, "
          f"notices {page['notices'][:3]}; agent RSS {agent_before} -> {agent_after} KiB, "
          f"kilnd RSS {kilnd_before} -> {kilnd_after} KiB")
    assert agent_after - agent_before < 32 * 1024, "the agent's memory grew past its bounds"
    assert kilnd_after - kilnd_before < 64 * 1024
    # Reading on from the page's cursor gets the rest, in order, no more drops.
    nxt = read(api, sid, w["id"], page["nextCursor"])
    assert not [n for n in nxt["notices"] if n["k"] == "overflow" and n["reason"] == "rate"], nxt["notices"]
    api.sh(sid, "rm -rf /workspace/t7")


def test_at_most_four_watches_per_sandbox(api, sid):
    api.sh(sid, "mkdir -p /workspace/t8")
    ids = [start(api, sid, "/workspace/t8", id=f"cap-{i}")["id"] for i in range(4)]
    assert ids == ["cap-0", "cap-1", "cap-2", "cap-3"]
    assert_error(api.post(W.format(sid), json={"path": "/workspace/t8"}), 409, "quota_exceeded", mentions=["4"])
    assert_error(api.post(W.format(sid), json={"path": "/workspace/t8", "id": "cap-0"}), 409, "name_taken")
    listed = api.ok("GET", W.format(sid))["data"]
    assert [x["id"] for x in listed] == ids and all(x["state"] == "running" for x in listed)
    stop(api, sid, "cap-0")
    # An ended watch frees its place; its id may be used again.
    assert start(api, sid, "/workspace/t8", id="cap-0")["state"] == "running"


def test_descriptors_per_watch_are_capped(api, sid):
    api.sh(sid, "mkdir -p /workspace/t9 && cd /workspace/t9 && mkdir -p $(seq -f 'd%g' 1 50)")
    w = start(api, sid, "/workspace/t9", recursive=True, maxWatches=10)
    assert w["watchedDirs"] == 10, w
    page = read(api, sid, w["id"], w["cursor"])
    assert {"k": "limit", "watches": 10} in page["notices"], page


def test_stop_then_forget(api, sid):
    api.sh(sid, "mkdir -p /workspace/t10")
    w = start(api, sid, "/workspace/t10", id="stopme")
    assert stop(api, sid, "stopme") == {"stopped": True}
    page = read(api, sid, "stopme", 0)
    assert page["ended"] is True and page["notices"] == [{"k": "end", "reason": "stopped"}], page
    assert page["watch"]["state"] == "ended" and page["watch"]["endReason"] == "stopped"
    assert stop(api, sid, "stopme") == {"stopped": False}
    assert_error(api.request("DELETE", W.format(sid) + "/stopme"), 404, "not_found", mentions=["stopme"])
    assert_error(api.get(W.format(sid) + "/stopme/events"), 404, "not_found", mentions=["stopme"])


def test_timeout_ends_a_watch(api, sid):
    api.sh(sid, "mkdir -p /workspace/t11")
    w = start(api, sid, "/workspace/t11", timeoutMs=700)
    t0 = time.monotonic()
    _, notices, _ = collect(api, sid, w["id"])
    assert notices == [{"k": "end", "reason": "timeout"}] and 0.5 < time.monotonic() - t0 < 5, notices


def test_removing_the_root_ends_a_watch(api, sid):
    api.sh(sid, "mkdir -p /workspace/t12/sub && touch /workspace/t12/sub/x")
    w = start(api, sid, "/workspace/t12", recursive=True, batchMs=50)
    api.sh(sid, "rm -rf /workspace/t12")
    events, notices, _ = collect(api, sid, w["id"])
    assert notices[-1] == {"k": "end", "reason": "root-removed"}, notices
    assert ("remove", "/workspace/t12/sub/x") in {(e["type"], e["path"]) for e in events}, events


def test_errors_name_the_field(api, sid):
    base = W.format(sid)
    cases = [
        ({"path": "workspace"}, "body.path"),
        ({}, "body.path"),
        ({"path": "/workspace", "batchMs": -1}, "body.batchMs"),
        ({"path": "/workspace", "timeoutMs": 86400001}, "body.timeoutMs"),
        ({"path": "/workspace", "maxWatches": 0}, "body.maxWatches"),
        ({"path": "/workspace", "events": ["open"]}, "body.events"),
        ({"path": "/workspace", "id": "no spaces"}, "body.id"),
        ({"path": "/workspace", "id": "x" * 65}, "body.id"),
        ({"path": "/workspace", "include": [""]}, "body.include"),
        ({"path": "/workspace", "webhook": True}, "body.webhook"),
        ({"path": "/workspace", "recursive": "yes"}, "body.recursive"),
        ({"path": "/workspace", "bogus": 1}, "body.bogus"),
    ]
    for body, field in cases:
        assert_error(api.post(base, json=body), 400, "invalid_request", issue_path=field)
    assert_error(api.post(base, json={"path": "/workspace/missing-dir"}), 404, "file_not_found",
                 mentions=["/workspace/missing-dir"])
    assert_error(api.get(base + "/nope/events"), 404, "not_found", mentions=["nope"])
    w = start(api, sid, "/workspace")
    assert_error(api.get(base + f"/{w['id']}/events", query={"waitMs": 8001}), 400, "invalid_request",
                 mentions=["waitMs"])
    assert_error(api.get(base + f"/{w['id']}/events", query={"cursor": -1}), 400, "invalid_request",
                 mentions=["cursor"])
    assert_error(api.get(base + f"/{w['id']}/events", query={"follow": "maybe"}), 400, "invalid_request",
                 mentions=["follow"])
    assert_error(api.get(f"/v1/sandboxes/sb-none/files/watches"), 404, "not_found")


def test_a_watch_lasts_across_pause_and_wake(api, sandboxes):
    sid = sandboxes.create(vcpu=1, memoryMiB=256, autoWake=True)["id"]
    api.sh(sid, "mkdir -p /workspace/p")
    w = start(api, sid, "/workspace/p", recursive=True, batchMs=20, id="survivor")
    api.sh(sid, "touch /workspace/p/before")
    events, _, cursor = collect(api, sid, "survivor", until=lambda e, n: e)
    # A follow running when the sandbox pauses ends with `paused`.
    followed = {}
    t = threading.Thread(target=lambda: followed.update(s=api.stream(
        "GET", W.format(sid) + "/survivor/events", query={"follow": True, "cursor": cursor}, timeout=60)))
    t.start()
    time.sleep(1)
    assert api.ok("POST", f"/v1/sandboxes/{sid}:pause", json={})["state"] == "paused"
    t.join(30)
    assert followed["s"].status == 200 and followed["s"].events[-1] == {"k": "paused", "cursor": cursor}, followed
    # Reading never wakes: a paused notice, the cursor kept.
    page = read(api, sid, "survivor", cursor, wait_ms=1000)
    assert page["notices"] == [{"k": "paused", "cursor": cursor}] and page["nextCursor"] == cursor, page
    assert page["ended"] is False and page["events"] == []
    s = api.stream("GET", W.format(sid) + "/survivor/events", query={"follow": True, "cursor": cursor})
    assert s.status == 200 and s.events == [{"k": "paused", "cursor": cursor}], s
    assert api.sandbox(sid)["state"] == "paused", "a read woke the sandbox"
    assert api.ok("POST", f"/v1/sandboxes/{sid}:wake", json={})["state"] == "running"
    listed = api.ok("GET", W.format(sid))["data"]
    assert [(x["id"], x["state"], x["cursor"]) for x in listed] == [("survivor", "running", cursor)], listed
    t0 = time.monotonic()
    api.sh(sid, "mkdir /workspace/p/after-dir && touch /workspace/p/after /workspace/p/after-dir/x")
    events, notices, _ = collect(api, sid, "survivor", cursor,
                                 until=lambda e, n: {"/workspace/p/after", "/workspace/p/after-dir/x"}
                                 <= {x["path"] for x in e})
    print(f"\npause/wake: the watch kept working; events after wake in {time.monotonic() - t0:.2f}s")
    assert not [n for n in notices if n["k"] == "end"], notices


def test_a_fork_carries_the_watch(api, sandboxes):
    src = sandboxes.create(vcpu=1, memoryMiB=256)["id"]
    api.sh(src, "mkdir -p /workspace/f")
    start(api, src, "/workspace/f", batchMs=20, id="carried")
    r = api.ok("POST", f"/v1/sandboxes/{src}:fork", json={"count": 1})
    copy = r["sandboxes"][0]["id"]
    sandboxes.ids.append(copy)
    assert [w["id"] for w in api.ok("GET", W.format(copy))["data"]] == ["carried"]
    api.sh(copy, "touch /workspace/f/in-copy")
    events, _, _ = collect(api, copy, "carried", until=lambda e, n: e)
    assert [e["path"] for e in events] == ["/workspace/f/in-copy"], events
    # The source's watch is its own: it saw nothing of the copy's file.
    assert read(api, src, "carried", 0)["events"] == []


def test_a_follow_ends_with_continue_after_110_s(api, sid):
    api.sh(sid, "mkdir -p /workspace/t13")
    w = start(api, sid, "/workspace/t13")
    api.spawn(sid, command="sleep 1; touch /workspace/t13/x")
    s = api.stream("GET", W.format(sid) + f"/{w['id']}/events", query={"follow": True, "cursor": 0}, timeout=150)
    assert s.status == 200, s
    t_end, last = s.timed_events[-1]
    assert last["k"] == "continue" and last["cursor"] >= 1, s.events
    assert 105 < t_end < 125, t_end
    assert [l["k"] for l in s.events] == ["events", "continue"], s.events
    # Reading on from the continue's cursor misses nothing and repeats nothing.
    assert read(api, sid, w["id"], last["cursor"])["events"] == []


@pytest.fixture
def own_kilnd():
    """lib.kilnd.OwnKilnds with one kilnd started. At the end each still alive deletes its
    sandboxes and must exit 0."""
    with lib.kilnd.own_kilnd("kiln-watch-", delete_sandboxes=True, check_exit=True,
                             unmount=True) as kilnds:
        kilnds()
        yield kilnds


def test_a_watch_outlives_a_kilnd_restart(own_kilnd):
    from client import Client
    kilnds = own_kilnd
    d = kilnds.started[0]
    api = Client(d.url, key=d.admin_key)
    sid = api.create(vcpu=1, memoryMiB=256)["id"]
    api.sh(sid, "mkdir -p /workspace/k")
    start(api, sid, "/workspace/k", batchMs=20, id="kept")
    api.sh(sid, "touch /workspace/k/before")
    d.proc.kill()  # SIGKILL: kilnd forgets everything it held in memory
    d.proc.wait()
    d2 = kilnds(state=d.state_dir, log_path=d.log_path)
    api = Client(d2.url, key=d2.admin_key)
    api.sh(sid, "touch /workspace/k/after")
    events, _, _ = collect(api, sid, "kept", until=lambda e, n: len(e) >= 2)
    assert [e["path"] for e in events] == ["/workspace/k/before", "/workspace/k/after"], events
