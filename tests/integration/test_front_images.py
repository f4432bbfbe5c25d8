"""The fronts' default images are there when first asked for (issue 44, item 5), against
fresh kilnds that never built them: E2B's code-interpreter-v1 and SandboxFusion's language
image (here operators' recipes, --front-image, so the test stays short; kiln's own
code-interpreter-v1 is built on its first need in test_e2b_interpreter.py, and its own
language image is the core set that test_sandboxfusion.py builds) are built by kilnd on the first create that needs one, once,
under the operator's key; that create, and those that come while the build runs, wait as
they wait for room and are told to retry (E2B's 503, SandboxFusion's 504, with Retry-After);
every key's sandboxes then boot the one image. A recipe that fails is the answer, naming its
log, until it may be tried again."""
import json
import threading
import time
import urllib.error
import urllib.request

from client import Client
from lib.kilnd import own_kilnd


def e2b_create(url, key, template):
    """(status, body, Retry-After) of E2B's NewSandbox, as its SDK sends it."""
    req = urllib.request.Request(url + "/e2b/sandboxes", method="POST",
                                 data=json.dumps({"templateID": template, "timeout": 300}).encode(),
                                 headers={"X-API-Key": key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read()), None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), e.headers.get("Retry-After")


def until_built(call, retry_status, within, what):
    """Calls call() -> (status, body, Retry-After) again, after the Retry-After it names,
    while it answers `retry_status` (the front's "being built, retry"); its last answer.
    Fails after `within` seconds, naming `what`."""
    deadline = time.monotonic() + within
    while True:
        status, body, retry = call()
        if status != retry_status:
            return status, body
        assert retry, f"{status} without Retry-After: {body}"
        assert time.monotonic() < deadline, f"{what} was not built in {within} s"
        time.sleep(int(retry))


def key_of(admin, name):
    made = admin.ok("POST", "/v1/keys", json={"name": name})
    return made["secret"], "e2b_" + made["secret"][len("kiln_"):]


def front_images(admin, name):
    return [i for i in admin.ok("GET", "/v1/images", query={"name": name})["data"]]


def test_a_key_waits_for_a_build_with_a_bounded_number_of_creates(tmp_path):
    """While the image builds, at most 16 creates of one key wait for it; the rest are told to
    retry at once, so one key cannot hold kilnd's threads on a build."""
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps({"recipe": {"commands": ["sleep 40"]}}))
    with own_kilnd() as start:
        d = start("--front-image", f"code-interpreter-v1={slow}")
        admin = Client(d.url, key=d.admin_key)
        _, key = key_of(admin, "flood")
        answers = []

        def create():
            t0 = time.monotonic()
            status, body, retry = e2b_create(d.url, key, "code-interpreter-v1")
            answers.append((status, time.monotonic() - t0, retry))

        threads = [threading.Thread(target=create) for _ in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert len(answers) == 24 and all(s == 503 and r for s, _, r in answers), answers
        quick = [a for a in answers if a[1] < 5]
        waited = [a for a in answers if a[1] >= 10]  # E2B's creates wait 15 s for room
        assert len(quick) >= 8 and len(waited) <= 16, answers


def sf_run(url, key, code):
    req = urllib.request.Request(f"{url}/sandboxfusion/{key}/run_code", method="POST",
                                 data=json.dumps({"code": code, "language": "python"}).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read()), None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null"), e.headers.get("Retry-After")


def test_sandboxfusions_image_is_built_on_first_need_and_a_failure_is_the_answer(tmp_path):
    good = tmp_path / "langs.json"
    good.write_text(json.dumps({"recipe": {"commands": ["echo made-for-sandboxfusion > /opt/made"]}}))
    bad = tmp_path / "broken.json"
    bad.write_text(json.dumps({"recipe": {"commands": ["echo broken recipe >&2; exit 3"]}}))
    with own_kilnd() as start:
        d = start("--sandboxfusion-image", "sf-langs", "--front-image", f"sf-langs={good}")
        admin = Client(d.url, key=d.admin_key)
        secret, _ = key_of(admin, "sf")
        status, body = until_built(
            lambda: sf_run(d.url, secret, "print(open('/opt/made').read().strip())"), 504, 600,
            "the language image")
        assert status == 200 and body["status"] == "Success", (status, body)
        assert body["run_result"]["stdout"].strip() == "made-for-sandboxfusion", body
        built = front_images(admin, "sf-langs")  # one image, the operator's, for every key
        assert len(built) == 1 and built[0]["labels"].get("kiln.front-image") == "kilnd", built
        assert front_images(Client(d.url, key=secret), "sf-langs") == []  # not the key's own
    with own_kilnd() as start:
        d = start("--sandboxfusion-image", "sf-broken", "--front-image", f"sf-broken={bad}")
        admin = Client(d.url, key=d.admin_key)
        secret, _ = key_of(admin, "sf")
        status, body = until_built(lambda: sf_run(d.url, secret, "print(1)"), 504, 600,
                                   "the broken image")
        text = json.dumps(body)
        assert status >= 400 and "failed" in text and "/logs" in text, (status, body)
        # Asked again within ten minutes: the same failure, no second build.
        status, body, _ = sf_run(d.url, secret, "print(1)")
        assert status >= 400 and "failed" in json.dumps(body), body
        assert len(front_images(admin, "sf-broken")) == 1
