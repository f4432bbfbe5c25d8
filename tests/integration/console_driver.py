"""Drives kiln's web console in a real browser (Debian's chromium through Playwright).

Run by test_console.py with the Playwright venv's interpreter (/opt/kiln/console-venv):
    console_driver.py SCENARIO '{"url": ..., "key": ..., ...}'
It prints one JSON line: {"ok": true, ...figures} or {"ok": false, "error", "screenshot"}.
Every wait is Playwright's own (expect / wait_for with a deadline), never a bare sleep."""
import json
import re
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request

from playwright.sync_api import expect, sync_playwright

T = 30_000  # ms: the default deadline of each wait


def sign_in(page, url, key, route=""):
    page.goto(f"{url}/ui{route}")
    page.get_by_label("API key", exact=True).fill(key)
    page.get_by_role("button", name="Sign in").click()


def signed_in(page):
    expect(page.get_by_role("navigation", name="Main")).to_be_visible(timeout=T)


def call(a, method, path, body=None):
    """kiln's API straight from the driver (to compare what the page shows with what kilnd says)."""
    req = urllib.request.Request(f"{a['url']}{path}", method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {a['key']}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def eventually(page, check, what, timeout=T):
    """Polls `check()` until it returns a true value (which it answers) or the deadline passes."""
    deadline = time.monotonic() + timeout / 1000
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        page.wait_for_timeout(200)


def focused(page):
    """What has the keyboard focus: its tag, accessible name (aria-label or text) and id."""
    return page.evaluate("""() => { const e = document.activeElement;
        return e ? {tag: e.tagName.toLowerCase(), name: (e.getAttribute('aria-label') || e.textContent || '').trim().slice(0, 120),
                    id: e.id || '', inNav: !!e.closest('nav[aria-label=Main]')} : null; }""")


def tab_to(page, want, what, key="Tab", limit=200):
    """Presses Tab (or Shift+Tab) until focus is on an element `want(focused)` accepts; every press must move focus."""
    prev = focused(page)
    for _ in range(limit):
        page.keyboard.press(key)
        now = focused(page)
        if now == prev and now and now["tag"] != "body":
            raise AssertionError(f"{key} did not move focus from {now}")
        if now and want(now):
            return now
        prev = now
    raise AssertionError(f"{key} x{limit} never reached {what}")


def terminal_text(region):
    return region.locator(".xterm-rows").inner_text()


def wait_for_line(region, pattern, timeout=T):
    """Waits until a row of the terminal matches `pattern` in full (a regex); returns the match."""
    deadline = time.monotonic() + timeout / 1000
    rx = re.compile(pattern)
    while True:
        for line in terminal_text(region).splitlines():
            m = rx.fullmatch(line.replace("\xa0", " ").strip())
            if m:
                return m
        if time.monotonic() > deadline:
            raise AssertionError(f"no terminal line matches {pattern!r}; screen:\n{terminal_text(region)}")
        region.page.wait_for_timeout(200)


def scenario_terminal(page, a):
    """Sign in, create a sandbox, see it listed, use its terminal, resize it, stop it."""
    sign_in(page, a["url"], a["key"])
    signed_in(page)
    page.get_by_label("Name", exact=True).fill(a["name"])
    page.get_by_label("Labels").fill(f"suite=console, run={a['name']}")
    page.get_by_role("button", name="Create sandbox").click()
    row = page.locator("table.sandboxes tbody tr", has_text=a["name"])
    expect(row).to_have_count(1, timeout=T)
    expect(row.locator("td.state")).to_have_text("running", timeout=T)
    sid = row.get_attribute("data-id")
    expect(row.get_by_role("link", name=sid)).to_be_visible()  # each row shows its id

    # The label filter finds it; another label does not.
    page.get_by_label("Label", exact=True).fill(f"run:{a['name']}")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("table.sandboxes tbody tr")).to_have_count(1, timeout=T)
    page.get_by_label("Label", exact=True).fill("run:no-such-run")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("table.sandboxes tbody tr")).to_have_count(0, timeout=T)
    expect(page.get_by_text("No sandboxes match.")).to_be_visible()

    page.goto(f"{a['url']}/ui#/sandboxes/{sid}")
    expect(page.get_by_role("heading", name=f"Sandbox {sid}")).to_be_visible(timeout=T)
    page.get_by_role("button", name="Open terminal").click()
    region = page.get_by_role("region", name="Terminal", exact=True)
    expect(page.get_by_text(re.compile(r"Connected: shell process p\d+"))).to_be_visible(timeout=T)
    region.click()
    page.keyboard.type("echo hi\n")
    wait_for_line(region, r"hi")
    host = region.locator(".term-host")
    pid = host.get_attribute("data-process-id")
    cols_before = int(host.get_attribute("data-cols"))

    page.set_viewport_size({"width": 640, "height": 900})
    expect(host).not_to_have_attribute("data-cols", str(cols_before), timeout=T)
    cols_after, rows_after = int(host.get_attribute("data-cols")), int(host.get_attribute("data-rows"))
    region.click()
    page.keyboard.type("stty size\n")
    wait_for_line(region, rf"{rows_after} {cols_after}")
    # The processes table shows the pty's new size too.
    expect(page.locator(f'tr[data-process="{pid}"] td.pty-size')).to_have_text(f"{cols_after}×{rows_after}", timeout=T)

    page.get_by_role("button", name=f"Stop sandbox {sid}").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("cannot be undone")
    dialog.get_by_role("button", name="Stop sandbox").click()
    expect(page.locator("dl.facts")).to_have_attribute("data-state", "stopped", timeout=T)
    page.get_by_role("link", name="Sandboxes", exact=True).first.click()
    page.get_by_label("State").select_option("*")
    row = page.locator(f'table.sandboxes tbody tr[data-id="{sid}"]')
    expect(row.locator("td.state")).to_contain_text("stopped", timeout=T)
    return {"sandboxId": sid, "processId": pid, "colsBefore": cols_before, "colsAfter": cols_after, "rowsAfter": rows_after}


def scenario_build_log(page, a):
    """Follows an image build's log to its end."""
    sign_in(page, a["url"], a["key"], f"#/images/{a['imageId']}")
    signed_in(page)
    log = page.get_by_role("log", name="Build log")
    expect(page.locator(".log-state")).to_have_attribute("data-done", "true", timeout=180_000)
    expect(page.locator(".log-state")).to_have_text(re.compile(r"the build is ready"))
    expect(log).to_contain_text(a["marker"])
    expect(log.locator("li.failed-step")).to_have_count(0)
    lines = log.locator("li").count()
    return {"lines": lines}


def scenario_failed_build(page, a):
    """A failed build's failing step is highlighted and named in an alert."""
    sign_in(page, a["url"], a["key"], f"#/images/{a['imageId']}")
    signed_in(page)
    log = page.get_by_role("log", name="Build log")
    expect(page.locator(".log-state")).to_have_text(re.compile(r"the build is failed"), timeout=180_000)
    failed = log.locator("li.failed-step")
    expect(failed.first).to_be_visible(timeout=T)
    expect(failed.first).to_contain_text("exit 3")
    # The step that passed is in the log, not highlighted.
    expect(log.locator("li", has_text=a["okMarker"]).first).to_be_visible()
    expect(failed.filter(has_text=a["okMarker"])).to_have_count(0)
    expect(page.locator(".build-failed[role=alert]")).to_contain_text("failed with exit code 3")
    return {"failedLines": failed.count()}


def scenario_usage(page, a):
    """The usage chart has data after a run, and the daily limit shows as a bar."""
    sign_in(page, a["url"], a["key"], "#/usage")
    signed_in(page)
    chart = page.locator("figure.chart-cpu")
    deadline = time.monotonic() + 90
    while True:
        expect(chart).to_be_visible(timeout=T)
        if int(chart.get_attribute("data-nonzero") or 0) > 0:
            break
        assert time.monotonic() < deadline, "the CPU chart never had a point above zero"
        page.get_by_role("button", name="Show").click()
        page.wait_for_timeout(1000)
    expect(chart.locator("svg[role=img] circle").first).to_be_attached()
    meter = page.get_by_role("meter", name="Daily limit used")
    expect(meter).to_be_visible(timeout=T)
    return {"points": int(chart.get_attribute("data-nonzero")), "meter": meter.get_attribute("aria-valuetext")}


def scenario_non_admin(page, a):
    sign_in(page, a["url"], a["key"])
    signed_in(page)
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Sandboxes")).to_be_visible()
    expect(nav.get_by_role("link", name="Keys")).to_have_count(0)
    page.goto(f"{a['url']}/ui#/keys")
    expect(page.get_by_role("alert")).to_contain_text("admin key", timeout=T)
    expect(page.locator("table.keys")).to_have_count(0)
    return {}


def scenario_admin_keys(page, a):
    sign_in(page, a["url"], a["key"], "#/keys")
    signed_in(page)
    page.get_by_label("Key name").fill(a["name"])
    page.get_by_role("button", name="Create key").click()
    secret = page.get_by_role("status").locator("output.secret")
    expect(secret).to_have_text(re.compile(r"\S{16,}"), timeout=T)
    value = secret.inner_text()
    expect(page.locator("table.keys tbody tr", has_text=a["name"])).to_have_count(1, timeout=T)
    page.get_by_role("button", name="I have kept it: hide the secret").click()
    expect(page.get_by_text(value)).to_have_count(0)
    return {"secret": value}


def scenario_wrong_key(page, a):
    sign_in(page, a["url"], "kiln_wrong_key_0000")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("refused", timeout=T)
    text = alert.inner_text()
    expect(page.get_by_role("navigation", name="Main")).to_have_count(0)
    expect(alert.get_by_role("button", name="Try again")).to_be_visible()
    stored = page.evaluate("() => sessionStorage.length")
    return {"alert": text, "stored": stored}


def scenario_vanished(page, a):
    """Its sandbox is deleted while its view is open (the test deletes it when told)."""
    sign_in(page, a["url"], a["key"], f"#/sandboxes/{a['sandboxId']}")
    signed_in(page)
    expect(page.locator("dl.facts")).to_have_attribute("data-state", "running", timeout=T)
    print(json.dumps({"ready": True}), flush=True)
    sys.stdin.readline()  # the test deletes the sandbox, then writes a line
    alert = page.get_by_role("alert").filter(has_text="no longer exists")
    expect(alert).to_be_visible(timeout=T)
    expect(alert.get_by_role("button", name="Retry")).to_be_visible()
    return {"alert": alert.inner_text()}


def scenario_drop(page, a):
    """The terminal's WebSocket drops (the test stops kilnd) while it is open."""
    sign_in(page, a["url"], a["key"], f"#/sandboxes/{a['sandboxId']}")
    signed_in(page)
    page.get_by_role("button", name="Open terminal").click()
    expect(page.get_by_text(re.compile(r"Connected: shell process p\d+"))).to_be_visible(timeout=T)
    print(json.dumps({"ready": True}), flush=True)
    sys.stdin.readline()  # the test stops kilnd, then writes a line
    panel = page.locator(".terminal-panel")
    alert = panel.get_by_role("alert")
    expect(alert).to_be_visible(timeout=T)
    expect(alert).to_contain_text(re.compile(r"dropped|failed|refused"))
    expect(alert.get_by_role("button", name=re.compile(r"Reconnect|Retry"))).to_be_visible()
    return {"alert": alert.inner_text()}


def scenario_measure(page, a):
    """First load over loopback, transfer size, and the sandboxes view's polling cost."""
    requests = []
    page.on("requestfinished", lambda r: requests.append(r))
    t0 = time.monotonic()
    page.goto(f"{a['url']}/ui", wait_until="load")
    expect(page.get_by_label("API key", exact=True)).to_be_visible(timeout=T)
    first_load_ms = (time.monotonic() - t0) * 1000
    nav = page.evaluate("""() => { const n = performance.getEntriesByType('navigation')[0];
        const r = performance.getEntriesByType('resource');
        return {domContentLoaded: n.domContentLoadedEventEnd, load: n.loadEventEnd,
                transfer: n.transferSize + r.reduce((s, x) => s + x.transferSize, 0),
                body: n.encodedBodySize + r.reduce((s, x) => s + x.encodedBodySize, 0)}; }""")
    # No horizontal scrolling at 360 px.
    page.set_viewport_size({"width": 360, "height": 740})
    page.get_by_label("API key", exact=True).fill(a["key"])
    page.get_by_role("button", name="Sign in").click()
    signed_in(page)
    expect(page.locator("table.sandboxes")).to_be_visible(timeout=T)
    overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    unnamed = page.evaluate("""() => [...document.querySelectorAll('button, a[href], input, select')]
        .filter(e => !(e.getAttribute('aria-label') || e.textContent.trim() || (e.labels && e.labels.length)))
        .map(e => e.outerHTML.slice(0, 80))""")
    # Polling: what the sandboxes view asks for while visible, over 10 s.
    requests.clear()
    page.wait_for_timeout(10_000)
    polls = [r for r in requests if "/v1/" in r.url]
    sizes = [r.sizes()["responseBodySize"] + r.sizes()["responseHeadersSize"] for r in polls]
    # A hidden tab polls nothing (document.hidden, as a background tab reports it).
    page.evaluate("""() => { Object.defineProperty(document, 'hidden', {value: true, configurable: true});
        document.dispatchEvent(new Event('visibilitychange')); }""")
    page.wait_for_timeout(500)  # a poll already in flight ends
    requests.clear()
    page.wait_for_timeout(7_000)
    hidden = len([r for r in requests if "/v1/" in r.url])
    return {"hiddenRequests7s": hidden, "firstLoadMs": round(first_load_ms, 1), "navigation": nav, "overflow360": overflow, "unnamed": unnamed,
            "pollRequests10s": len(polls), "pollBytes": sizes}


def scenario_capacity(page, a):
    """Counts, the memory and vCPU meters against GET /v1/capacity, and a snapshot's warm pool once ready."""
    sign_in(page, a["url"], a["key"], "#/capacity")
    signed_in(page)
    running = page.locator(".count-card", has_text="Running").locator(".count-num")
    expect(running).to_have_text(re.compile(r"[1-9]\d*"), timeout=T)
    pools = page.get_by_role("region", name="Warm pools table")
    row = pools.locator("tbody tr", has_text=a["snapshotId"])
    expect(row).to_have_count(1, timeout=T)
    # Ready | Size columns (the pool restores its copy in the background).
    expect(row.locator("td").nth(1)).to_have_text("1", timeout=120_000)
    expect(row.locator("td").nth(2)).to_have_text("1")
    meters = {"memory": page.get_by_role("meter", name="Memory reserved"), "vcpu": page.get_by_role("meter", name="vCPUs reserved")}

    def matches():
        _, cap = call(a, "GET", "/v1/capacity")
        shown = {k: {f: float(m.get_attribute(f"aria-value{f}")) for f in ("now", "max")} for k, m in meters.items()}
        want = {"memory": {"now": cap["memoryMiB"]["reserved"], "max": cap["memoryMiB"]["budget"]},
                "vcpu": {"now": cap["vcpus"]["reserved"], "max": cap["vcpus"]["budget"]}}
        ok = all(abs(shown[k][f] - want[k][f]) < 1e-6 for k in want for f in ("now", "max")) \
            and running.inner_text().strip() == str(cap["running"])
        return ok and {"shown": shown, "capacity": cap}
    got = eventually(page, matches, "the meters to match GET /v1/capacity")
    reading = meters["vcpu"].get_attribute("aria-valuetext")
    return {**got, "vcpuText": reading, "memoryText": meters["memory"].get_attribute("aria-valuetext")}


def scenario_actions(page, a):
    """From the sandboxes list: snapshot, fork, pause, wake; then the snapshot's pool and delete in its view."""
    sid = a["sandboxId"]
    sign_in(page, a["url"], a["key"])
    signed_in(page)
    row = page.locator(f'table.sandboxes tbody tr[data-id="{sid}"]')
    expect(row.locator("td.state")).to_have_text("running", timeout=T)
    note = page.locator("main p.status")

    row.get_by_role("button", name=f"Snapshot sandbox {sid}").click()
    expect(note).to_have_text(re.compile(r"Snapshot \S+ of .* is ready\."), timeout=60_000)
    snap = re.search(r"Snapshot (\S+) of", note.inner_text()).group(1)

    row.get_by_role("button", name=f"Fork sandbox {sid}").click()
    expect(note).to_have_text(re.compile(r"Forked .*: \S+\."), timeout=60_000)
    fork = re.search(r": (\S+)\.$", note.inner_text()).group(1)
    expect(page.locator(f'table.sandboxes tbody tr[data-id="{fork}"] td.state')).to_have_text("running", timeout=T)

    row.get_by_role("button", name=f"Pause sandbox {sid}").click()
    expect(row.locator("td.state")).to_have_text("paused", timeout=60_000)
    assert call(a, "GET", f"/v1/sandboxes/{sid}")[1]["state"] == "paused"
    row.get_by_role("button", name=f"Wake sandbox {sid}").click()
    expect(row.locator("td.state")).to_have_text("running", timeout=60_000)
    expect(row.get_by_role("button", name=f"Pause sandbox {sid}")).to_be_visible(timeout=T)

    # The snapshot taken above is listed in Snapshots and pools; its pool size control sets the size.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Snapshots and pools").click()
    srow = page.locator(f'table.snapshots tbody tr[data-id="{snap}"]')
    expect(srow).to_have_count(1, timeout=T)
    expect(srow.locator("td").first).to_have_text(a.get("mode", "memory"))
    expect(srow.get_by_role("link", name=sid)).to_be_visible()
    srow.get_by_label(f"Pool size for snapshot {snap}").fill("1")
    srow.get_by_role("button", name=f"Set pool size of snapshot {snap}").click()
    expect(note).to_have_text(f"Pool of {snap} set to 1.", timeout=T)
    pool = call(a, "GET", f"/v1/snapshots/{snap}")[1].get("pool") or {}
    assert pool.get("size") == 1, pool
    expect(srow).to_contain_text(re.compile(r"\d/1 ready"), timeout=T)

    # Delete asks first: Cancel keeps it, confirming deletes it.
    srow.get_by_role("button", name=f"Delete snapshot {snap}").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text(f"Delete snapshot {snap}?")
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    assert call(a, "GET", f"/v1/snapshots/{snap}")[0] == 200
    srow.get_by_role("button", name=f"Delete snapshot {snap}").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete snapshot").click()
    expect(srow).to_have_count(0, timeout=T)
    return {"snapshotId": snap, "forkId": fork, "poolAfterSet": pool}


def scenario_sandbox_detail(page, a):
    """One sandbox's processes, files (browse /tmp, download a file) and egress log."""
    sid = a["sandboxId"]
    sign_in(page, a["url"], a["key"], f"#/sandboxes/{sid}")
    signed_in(page)
    proc = page.get_by_role("region", name="Processes table").locator(f'tr[data-process="{a["processId"]}"]')
    expect(proc).to_contain_text(a["command"], timeout=T)
    expect(proc).to_contain_text("running")

    folder = page.get_by_label("Folder", exact=True)
    folder.fill("/tmp")
    page.get_by_role("button", name="Open folder", exact=True).click()
    files = page.get_by_role("region", name="Files table")
    name = a["path"].rsplit("/", 1)[1]
    expect(files.locator("tbody tr", has_text=name)).to_have_count(1, timeout=T)
    with page.expect_download(timeout=T) as dl:
        files.get_by_role("button", name=f"Download {a['path']}").click()
    d = dl.value
    content = open(d.path(), "rb").read().decode()
    # A folder opens with its button; Parent folder goes back up.
    page.get_by_role("button", name="Parent folder").click()
    expect(files.get_by_role("button", name="Open folder /tmp")).to_be_visible(timeout=T)

    egress = page.get_by_role("region", name="Egress table")
    entry = egress.locator("tbody tr", has_text=a["host"])
    expect(entry.first).to_be_visible(timeout=T)
    expect(entry.first.locator("td.verdict")).to_have_text(a["verdict"])
    return {"downloaded": content, "filename": d.suggested_filename, "egressRows": egress.locator("tbody tr").count()}


def scenario_images(page, a):
    """The images list shows versions and tags; an image's page lists its versions and sets its pool."""
    sign_in(page, a["url"], a["key"], "#/images")
    signed_in(page)
    table = page.get_by_role("region", name="Images table")
    for img in a["images"]:
        row = table.locator(f'tbody tr[data-id="{img["id"]}"]')
        expect(row).to_have_count(1, timeout=T)
        expect(row.get_by_role("link")).to_have_text(a["name"])
        expect(row.locator("td").nth(0)).to_have_text(str(img["version"]))
        expect(row.locator("td").nth(1)).to_have_text(", ".join(img["tags"]))
    target = a["images"][0]
    table.locator(f'tbody tr[data-id="{target["id"]}"]').get_by_role("link").click()
    expect(page.get_by_role("heading", name=f"Image {a['name']}@{target['version']}")).to_be_visible(timeout=T)
    versions = page.locator("ul.versions li")
    expect(versions).to_have_count(len(a["images"]), timeout=T)
    for img in a["images"]:
        expect(versions.filter(has_text=f"{a['name']}@{img['version']}")).to_have_count(1)
    expect(page.get_by_role("link", name=f"{a['name']}@{target['version']}")).to_have_attribute("aria-current", "page")
    for t in target["tags"]:
        expect(page.locator("ul.tags")).to_contain_text(t)
    size = page.get_by_label("Pool size", exact=True)
    expect(size).to_have_value("0", timeout=T)
    size.fill("1")
    page.get_by_role("button", name="Set pool size").click()
    expect(page.locator("main p.status:not(.log-state)")).to_have_text(re.compile(r"Pool size set to 1 \(\d ready\)\."), timeout=T)
    expect(page.locator("dl.facts")).to_contain_text(re.compile(r"\d ready of 1"), timeout=T)
    return {}


def scenario_keyboard(page, a):
    """Sign in, the main nav and a sandbox row's action with the keyboard only (no mouse)."""
    sid = a["sandboxId"]
    page.goto(f"{a['url']}/ui")
    key = page.get_by_label("API key", exact=True)
    expect(key).to_be_focused(timeout=T)  # the sign-in field has focus on load
    page.keyboard.type(a["key"])
    page.keyboard.press("Enter")
    signed_in(page)
    expect(page.locator(f'table.sandboxes tbody tr[data-id="{sid}"]')).to_have_count(1, timeout=T)

    # Tab reaches the nav's links in order; Enter follows one and focus moves to the view.
    seen = []

    def images_link(f):
        if f["inNav"]:
            seen.append(f["name"])
        return f["inNav"] and f["name"] == "Images"
    tab_to(page, images_link, "the Images link")
    assert seen[0] == "Sandboxes", seen
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"#/images$"), timeout=T)
    expect(page.get_by_role("heading", name="Images", exact=True)).to_be_visible(timeout=T)
    expect(page.locator("main#main")).to_be_focused()
    tab_to(page, lambda f: f["inNav"] and f["name"] == "Sandboxes", "the Sandboxes link", key="Shift+Tab")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"#/sandboxes$"), timeout=T)
    expect(page.locator("main#main")).to_be_focused()
    row = page.locator(f'table.sandboxes tbody tr[data-id="{sid}"]')
    expect(row).to_have_count(1, timeout=T)

    # Tab on to the row's Extend action; Enter extends the lease.
    before = call(a, "GET", f"/v1/sandboxes/{sid}")[1]["expiresAt"]
    name = f"Extend the lease of sandbox {sid} by 10 minutes"
    tab_to(page, lambda f: f["name"] == name, "the row's Extend button")
    page.keyboard.press("Enter")
    expect(page.locator("main p.status")).to_have_text(re.compile(r"^Extended "), timeout=T)
    after = call(a, "GET", f"/v1/sandboxes/{sid}")[1]["expiresAt"]
    # Focus stays on the button that was pressed, so the next Tab goes on from the row.
    expect(row.get_by_role("button", name=name)).to_be_focused(timeout=T)

    # Shift+Tab to Pause, Enter: paused, and the focus moves to the row's Wake; Enter wakes it.
    tab_to(page, lambda f: f["name"] == f"Pause sandbox {sid}", "the row's Pause button", key="Shift+Tab", limit=3)
    page.keyboard.press("Enter")
    expect(row.locator("td.state")).to_have_text("paused", timeout=60_000)
    expect(row.get_by_role("button", name=f"Wake sandbox {sid}")).to_be_focused(timeout=T)
    page.keyboard.press("Enter")
    expect(row.locator("td.state")).to_have_text("running", timeout=60_000)
    expect(row.get_by_role("button", name=f"Pause sandbox {sid}")).to_be_focused(timeout=T)
    return {"navSeen": seen, "expiresBefore": before, "expiresAfter": after,
            "stateAfter": call(a, "GET", f"/v1/sandboxes/{sid}")[1]["state"]}


def main():
    name, args = sys.argv[1], json.loads(sys.argv[2])
    shot = tempfile.mktemp(prefix=f"kiln-console-{name}-", suffix=".png")
    errors = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
            page.on("console", lambda m: m.type == "error" and "script-src" in m.text and errors.append(m.text))
            try:
                out = globals()[f"scenario_{name}"](page, args)
                if errors:
                    raise AssertionError("page errors: " + "; ".join(errors))
                print(json.dumps({"ok": True, **out}), flush=True)
            except Exception as e:  # noqa: BLE001 -- reported to the test as JSON
                try:
                    page.screenshot(path=shot, full_page=True)
                except Exception:  # noqa: BLE001
                    shot = None
                print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"[:4000], "screenshot": shot,
                                  "trace": traceback.format_exc()[-3000:], "pageErrors": errors}), flush=True)
        finally:
            browser.close()


if __name__ == "__main__":
    main()
