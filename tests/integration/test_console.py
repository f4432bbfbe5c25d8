"""kiln's web console (/ui) in a real browser: Debian's chromium driven by Playwright.

Playwright lives in its own venv (/opt/kiln/console-venv, set up by `make setup`); each
scenario runs there as console_driver.py SCENARIO ARGS and answers one JSON line, so this
module runs under /usr/bin/python3 like every other. The console is built from console/
into build/console (console/build.sh) when missing or older than its sources, and served by a
kilnd of this module's own (--console-dir). The terminal tickets' API-level checks are in
test_console_api.py."""
import json
from datetime import datetime
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from client import Client
from conftest import REPO, start_kilnd, stop_kilnd
from lib.waits import wait_for

VENV_PY = Path("/opt/kiln/console-venv/bin/python")
DRIVER = Path(__file__).with_name("console_driver.py")
CONSOLE_SRC = REPO / "console"
CONSOLE_DIR = REPO / "build" / "console"

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; font-src 'self'; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


SECRETS = []  # keys this module's tests made, checked against kilnd's log at the end


def _stale():
    built = CONSOLE_DIR / "app.js"
    if not all((CONSOLE_DIR / f).exists() for f in ("index.html", "app.js", "app.css")):
        return True
    newest = max(p.stat().st_mtime for p in [*CONSOLE_SRC.joinpath("src").rglob("*"), CONSOLE_SRC / "package-lock.json"])
    return newest > built.stat().st_mtime


@pytest.fixture(scope="module")
def console_dir():
    if not VENV_PY.exists():
        pytest.skip(f"{VENV_PY} missing: the console tests need Playwright's venv (make setup installs it)")
    if _stale():
        r = subprocess.run(["bash", str(CONSOLE_SRC / "build.sh"), str(CONSOLE_DIR)], capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, f"console build failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return CONSOLE_DIR


@pytest.fixture(scope="module")
def daemon(console_dir, tmp_path_factory):
    state = tmp_path_factory.mktemp("console") / "state"
    d = start_kilnd(state, "--console-dir", str(console_dir))
    yield d
    admin = Client(d.url, key=d.admin_key)
    try:
        for s in admin.get("/v1/sandboxes", query={"includeStopped": True, "limit": 500}).json().get("data", []):
            admin.request("DELETE", f"/v1/sandboxes/{s['id']}")
    except OSError:
        pass
    stop_kilnd(d)


@pytest.fixture(scope="module")
def admin(daemon):
    return Client(daemon.url, key=daemon.admin_key)


def drive(scenario, timeout=300, **args):
    """Runs one browser scenario; returns its figures or fails with what the page showed."""
    r = subprocess.run([str(VENV_PY), str(DRIVER), scenario, json.dumps(args)], capture_output=True, text=True,
                       timeout=timeout)
    lines = [x for x in r.stdout.splitlines() if x.startswith("{")]
    assert lines, f"driver {scenario} printed nothing (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    out = json.loads(lines[-1])
    assert out.get("ok"), (f"console scenario {scenario} failed: {out.get('error')}\n"
                           f"screenshot: {out.get('screenshot')}\n{out.get('trace', '')}")
    return out


def _sandboxes(admin):
    return admin.get("/v1/sandboxes", query={"includeStopped": True, "limit": 500}).json()["data"]


# ---- what kilnd serves ---------------------------------------------------------------------------


def test_ui_is_served_with_a_strict_csp(daemon, console_dir):
    api = Client(daemon.url)  # no key: /ui needs none
    bare = api.get("/ui")  # kilnd sends /ui to /ui/ (the page's URLs are absolute: /ui/app.js)
    assert bare.status == 200 or (bare.status in (301, 308) and bare.headers["Location"] == "/ui/"), bare
    for path in ("/ui/", "/ui/index.html"):
        r = api.get(path)
        assert r.status == 200, r
        assert r.headers["Content-Security-Policy"] == CSP
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert b'<script src="/ui/app.js"' in r.body and b"<script>" not in r.body and b"style=" not in r.body
    js = api.get("/ui/app.js")
    assert js.status == 200 and js.body == (console_dir / "app.js").read_bytes()
    assert b"eval(" not in js.body
    assert api.get("/ui/app.css").status == 200
    assert api.get("/ui/nothing-here.js").status == 404


# ---- the browser ---------------------------------------------------------------------------------


def test_sign_in_create_terminal_resize_and_stop(daemon, admin):
    name = f"console-{uuid.uuid4().hex[:8]}"
    out = drive("terminal", url=daemon.url, key=daemon.admin_key, name=name)
    sid = out["sandboxId"]
    info = admin.get(f"/v1/sandboxes/{sid}").json()
    assert info["name"] == name and info["labels"] == {"suite": "console", "run": name}, info
    assert info["state"] == "stopped", info
    # The window's resize reached the pty (its size as the API saw it before the stop).
    assert out["colsAfter"] < out["colsBefore"], out


def test_build_log_is_followed_to_its_end(daemon, admin):
    marker = f"built-{uuid.uuid4().hex[:8]}"
    img = admin.ok("POST", "/v1/images", json={"name": f"console-ok-{marker}", "recipe": {
        "base": "base", "commands": ["echo starting", f"sleep 3; echo {marker}"]}})
    out = drive("build_log", url=daemon.url, key=daemon.admin_key, imageId=img["id"], marker=marker)
    assert out["lines"] >= 5, out
    assert admin.get(f"/v1/images/{img['id']}").json()["state"] == "ready"


def test_failed_build_step_is_highlighted(daemon, admin):
    ok = f"ok-{uuid.uuid4().hex[:8]}"
    img = admin.ok("POST", "/v1/images", json={"name": f"console-bad-{ok}", "recipe": {
        "base": "base", "commands": [f"echo {ok}", "echo about to fail; exit 3"]}})
    out = drive("failed_build", url=daemon.url, key=daemon.admin_key, imageId=img["id"], okMarker=ok)
    assert out["failedLines"] >= 1, out
    assert admin.get(f"/v1/images/{img['id']}").json()["error"]["exitCode"] == 3


def test_usage_chart_has_data_after_a_run(daemon, admin):
    """A key with a daily limit runs something; its chart has points and its limit a bar."""
    secret = admin.ok("POST", "/v1/keys", json={"name": "console-usage", "dailyLimitMicros": 5_000_000})["secret"]
    SECRETS.append(secret)
    user = Client(daemon.url, key=secret)
    sb = user.create(labels={"suite": "console-usage"}, memoryMiB=512)
    try:
        r = user.exec(sb["id"], command="python3 -c 'sum(range(30_000_000))'")
        assert r["exitCode"] == 0, r
        out = drive("usage", url=daemon.url, key=secret)
    finally:
        admin.request("DELETE", f"/v1/sandboxes/{sb['id']}")
    assert out["points"] >= 1, out
    assert "left of $5.00" in out["meter"], out


def test_non_admin_key_does_not_see_keys(daemon, admin):
    key = admin.ok("POST", "/v1/keys", json={"name": "console-plain"})["secret"]
    SECRETS.append(key)
    drive("non_admin", url=daemon.url, key=key)


def test_admin_creates_a_key_and_sees_its_secret_once(daemon, admin):
    name = f"console-key-{uuid.uuid4().hex[:6]}"
    out = drive("admin_keys", url=daemon.url, key=daemon.admin_key, name=name)
    listed = [k for k in admin.get("/v1/keys").json()["data"] if k["name"] == name]
    assert len(listed) == 1 and "secret" not in listed[0], listed
    # The secret the page showed is a working key.
    assert Client(daemon.url, key=out["secret"]).get("/v1/limits").status == 200
    SECRETS.append(out["secret"])


def test_wrong_key_is_refused_with_a_clear_message(daemon):
    out = drive("wrong_key", url=daemon.url)
    assert "refused" in out["alert"], out
    assert "Error:" not in out["alert"] and " at " not in out["alert"], out  # no stack trace
    assert out["stored"] == 0, "a refused key must not be kept in sessionStorage"


def _drive_with_event(scenario, args, event):
    """Runs a scenario that waits (after printing {"ready": true}) for `event()` to happen."""
    p = subprocess.Popen([str(VENV_PY), str(DRIVER), scenario, json.dumps(args)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = p.stdout.readline()
        if not first.startswith('{"ready"'):
            out, err = p.communicate(timeout=60)
            raise AssertionError(f"{scenario} did not get ready: {first}{out}\n{err[-2000:]}")
        event()
        p.stdin.write("done\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    lines = [x for x in out.splitlines() if x.startswith("{")]
    assert lines, f"{scenario} printed nothing: {err[-2000:]}"
    res = json.loads(lines[-1])
    assert res.get("ok"), f"{res.get('error')}\nscreenshot: {res.get('screenshot')}\n{res.get('trace', '')}"
    return res


def test_vanished_sandbox_shows_an_alert_with_retry(daemon, admin):
    sb = admin.create(memoryMiB=512)
    out = _drive_with_event("vanished", {"url": daemon.url, "key": daemon.admin_key, "sandboxId": sb["id"]},
                            lambda: admin.request("DELETE", f"/v1/sandboxes/{sb['id']}"))
    assert sb["id"] in out["alert"], out


def test_dropped_terminal_shows_an_alert_with_reconnect(console_dir, tmp_path):
    """A kilnd of its own, stopped while the page's terminal is open."""
    d = start_kilnd(tmp_path / "state", "--console-dir", str(console_dir))
    try:
        sb = Client(d.url, key=d.admin_key).create(memoryMiB=512)
        out = _drive_with_event("drop", {"url": d.url, "key": d.admin_key, "sandboxId": sb["id"]},
                                lambda: stop_kilnd(d))
        assert "Traceback" not in out["alert"] and "Error:" not in out["alert"], out
    finally:
        if d.alive():
            stop_kilnd(d)


def test_first_load_size_and_polling_cost(daemon):
    out = drive("measure", url=daemon.url, key=daemon.admin_key)
    print("CONSOLE FIGURES", json.dumps(out))
    assert out["overflow360"] <= 0, f"the page scrolls sideways at 360 px: {out['overflow360']} px"
    assert out["unnamed"] == [], f"controls without an accessible name: {out['unnamed']}"
    assert out["navigation"]["transfer"] < 1_000_000, out
    # The sandboxes view polls one page every 3 s while visible.
    assert 2 <= out["pollRequests10s"] <= 6, out
    assert out["hiddenRequests7s"] == 0, out


# ---- capacity, snapshots and pools, sandbox actions, one sandbox, images, keyboard -------------


def test_capacity_view_matches_the_api(daemon, admin):
    """Running count, memory and vCPU meters equal GET /v1/capacity; a snapshot's pool shows once ready."""
    sb = admin.create(memoryMiB=512, labels={"suite": "console-capacity"})
    snap = None
    try:
        snap = admin.ok("POST", f"/v1/sandboxes/{sb['id']}:snapshot", json={})
        admin.ok("POST", f"/v1/snapshots/{snap['id']}:pool", json={"size": 1})
        out = drive("capacity", url=daemon.url, key=daemon.admin_key, snapshotId=snap["id"])
    finally:
        if snap:
            admin.request("POST", f"/v1/snapshots/{snap['id']}:delete", json={})
        admin.request("DELETE", f"/v1/sandboxes/{sb['id']}")
    cap = out["capacity"]
    assert cap["running"] >= 1, out
    assert any(p["id"] == snap["id"] and p["ready"] == 1 for p in cap["pools"]), out
    assert out["vcpuText"] == f"{cap['vcpus']['free']:g} free of {cap['vcpus']['budget']:g}", out


def test_sandbox_actions_and_the_snapshots_view(daemon, admin):
    """Snapshot, fork, pause and wake from the list; the snapshot's pool and delete in Snapshots and pools."""
    sb = admin.create(memoryMiB=512, labels={"suite": "console-actions"})
    out = {}
    try:
        out = drive("actions", url=daemon.url, key=daemon.admin_key, sandboxId=sb["id"])
        snap, fork = out["snapshotId"], out["forkId"]
        assert out["poolAfterSet"]["size"] == 1, out
        assert admin.get(f"/v1/snapshots/{snap}").status == 404  # deleted after the confirmation
        f = admin.get(f"/v1/sandboxes/{fork}").json()
        assert f["state"] == "running" and f["labels"] == sb["labels"], f
        assert admin.get(f"/v1/sandboxes/{sb['id']}").json()["state"] == "running"
    finally:
        for sid in (sb["id"], out.get("forkId")):
            if sid:
                admin.request("DELETE", f"/v1/sandboxes/{sid}")


def test_one_sandbox_processes_files_and_egress(daemon, admin):
    sb = admin.create(memoryMiB=512)
    sid = sb["id"]
    try:
        mark = uuid.uuid4().hex[:8]
        command = f"sleep 300; echo {mark}"
        proc = admin.spawn(sid, command=command)
        path, content = f"/tmp/console-{mark}.txt", f"hello from {mark}\n"
        admin.write_file(sid, path, content.encode())
        # Offline by default: each request is refused and logged. 120 of them, so that the last one
        # (example.com) is past the API's first page of 100: the view must follow the log to its end.
        script = ("import urllib.request\n"
                  "for h in [f'n{i}.example.org' for i in range(119)] + ['example.com']:\n"
                  "    try: urllib.request.urlopen(f'http://{h}/', timeout=3)\n"
                  "    except Exception: pass\n")
        admin.write_file(sid, "/tmp/refused.py", script.encode())
        r = admin.exec(sid, command="python3 /tmp/refused.py")
        assert r["exitCode"] == 0, r
        log = admin.get(f"/v1/sandboxes/{sid}/network/log", query={"limit": 500}).json()["data"]
        assert len(log) >= 120 and log[-1]["host"] == "example.com" and log[-1]["verdict"] == "internet-off", log[-3:]
        out = drive("sandbox_detail", url=daemon.url, key=daemon.admin_key, sandboxId=sid, processId=proc["id"],
                    command=command, path=path, host="example.com", verdict="internet-off")
    finally:
        admin.request("DELETE", f"/v1/sandboxes/{sid}")
    assert out["downloaded"] == content and out["filename"] == path.rsplit("/", 1)[1], out


def test_images_versions_tags_and_pool(daemon, admin):
    name = f"console-img-{uuid.uuid4().hex[:6]}"
    imgs = [admin.ok("POST", "/v1/images", json={"name": name, "recipe": {"base": "base", "commands": [f"echo v{n}"]}})
            for n in (1, 2)]
    ready = wait_for(lambda: all(admin.get(f"/v1/images/{i['id']}").json()["state"] == "ready" for i in imgs), 120, "the builds")
    assert ready
    admin.ok("POST", f"/v1/images/{imgs[0]['id']}:tag", json={"tag": "stable"})
    infos = [admin.get(f"/v1/images/{i['id']}").json() for i in imgs]
    assert sorted(i["version"] for i in infos) == [1, 2], infos
    try:
        drive("images", url=daemon.url, key=daemon.admin_key, name=name,
              images=[{"id": i["id"], "version": i["version"], "tags": i["tags"]} for i in infos])
        pool = admin.get(f"/v1/images/{imgs[0]['id']}").json()["pool"]
        assert pool and pool["size"] == 1, pool
    finally:
        admin.request("POST", f"/v1/images/{imgs[0]['id']}:pool", json={"size": 0})


def test_keyboard_reaches_the_nav_and_a_row_action(daemon, admin):
    sb = admin.create(memoryMiB=512, name=f"console-kbd-{uuid.uuid4().hex[:6]}")
    try:
        out = drive("keyboard", url=daemon.url, key=daemon.admin_key, sandboxId=sb["id"])
    finally:
        admin.request("DELETE", f"/v1/sandboxes/{sb['id']}")
    # The lease moved later by the extension (10 minutes on a lease that had ~30 left).
    assert _iso(out["expiresAfter"]) - _iso(out["expiresBefore"]) > 500, out
    assert out["stateAfter"] == "running", out


def test_no_key_or_ticket_in_kilnds_log(daemon):
    """Last in the module: after every scenario above (sign-ins, terminals opened with
    tickets, keys made in the page), kilnd's log holds none of the keys and no ticket."""
    log = daemon.log_path.read_text(errors="replace")
    assert "terminal-tickets" in log or "/terminal" in log, "the terminal scenario left no request line"
    assert "tkt_" not in log
    for secret in [daemon.admin_key, *SECRETS]:
        assert secret not in log and secret.split("_", 1)[-1] not in log


def _iso(t):
    return datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()
