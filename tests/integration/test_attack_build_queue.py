"""One key floods the image build line (issue 42: every queue a key fills has a cap per key
and a fair share). Builds wait for a worker in one line; a key queues at most 64, and a free
worker takes the build of the key running the fewest, the key served longest ago first. A
real kilnd with one build worker, real builds (RUN steps in real sandboxes)."""
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from client import Client, assert_error
from conftest import start_kilnd, stop_kilnd
from test_images import wait_image

QUEUED_PER_KEY = 64  # images::ImageManager::kQueuedPerKey
STEP_S = 4           # each of A's builds sleeps this long in its RUN


@pytest.fixture(scope="module")
def one_worker():
    state = tempfile.mkdtemp(prefix="kiln-builds-", dir="/tmp")
    d = start_kilnd(state, "--image-builds", "1")
    try:
        admin = Client(d.url, key=d.admin_key)
        a, b = (Client(d.url, key=admin.ok("POST", "/v1/keys", json={"name": n})["secret"]) for n in ("a", "b"))
        yield a, b
    finally:
        stop_kilnd(d)
        shutil.rmtree(state, ignore_errors=True)
        Path(state + ".log").unlink(missing_ok=True)


def test_one_keys_build_flood_neither_fills_the_line_nor_holds_up_another_key(one_worker):
    """Attack: key A submits 1 + 64 slow builds (the worker takes one, 64 wait) and one more.
    Checks: the one past 64 waiting answers 429 rate_limited at once; key B's build, submitted
    behind A's 64, is built after at most one more of A's (B's turn comes before A's next),
    not after all of them."""
    a, b = one_worker
    ids = []
    for n in range(QUEUED_PER_KEY + 1):
        ids.append(a.ok("POST", "/v1/images", json={"dockerfile": f"FROM base\nRUN sleep {STEP_S} && echo {n}\n"})["id"])
    t0 = time.monotonic()
    r = a.request("POST", "/v1/images", json={"dockerfile": "FROM base\nRUN echo one-too-many\n"})
    assert_error(r, 429, "rate_limited")
    assert time.monotonic() - t0 < 5, "the refusal waited"
    mine = b.ok("POST", "/v1/images", json={"dockerfile": "FROM base\nRUN echo b\n"})
    image, _ = wait_image(b, mine["id"], within=STEP_S * 6 + 60)
    assert image["state"] == "ready", image
    done = [i for i in ids if a.ok("GET", f"/v1/images/{i}")["state"] in ("ready", "failed")]
    assert len(done) <= 3, f"{len(done)} of A's builds ran before B's one"
