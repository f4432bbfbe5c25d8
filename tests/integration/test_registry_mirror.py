"""Registry mirrors (issue 44, item 2) against real kilnds and real local registries
(Debian's docker-registry): a Docker Hub name pulled through --registry-mirror, every pull
path (POST /v1/images {image}, a Dockerfile's FROM, E2B's fromImage in test_harbor.py), a
mirror that is down falling back to the registry itself unless --registry-mirror-only, and
a mirror on loopback refused unless --allow-registry names it, as any registry would be."""
import tempfile
import time
from pathlib import Path

import pytest

from client import Client
from conftest import start_kilnd, stop_kilnd
from hub_images import hub_layout, push_hub_images
from lib.kilnd import own_kilnd
from lib.net import free_port
from oci import Registry

pytestmark = pytest.mark.xdist_group("registry_mirror")


@pytest.fixture(scope="module")
def layout():
    d = Path(tempfile.mkdtemp(prefix="kiln-hub-"))
    return hub_layout(d)


@pytest.fixture
def registry(tmp_path):
    with Registry(tmp_path / "registry") as reg:
        yield reg


def asked(reg, repo):
    """How many requests `reg` had for repository `repo`."""
    return (reg.root / "registry.log").read_text(errors="replace").count(f"/v2/{repo}/")


def build_and_wait(api, body, within=300):
    """POSTs an image build; its record once it ended (ready or failed)."""
    image = api.ok("POST", "/v1/images", json=body)
    deadline = time.monotonic() + within
    while image["state"] not in ("ready", "failed"):
        assert time.monotonic() < deadline, f"build of {body} still {image['state']}"
        time.sleep(0.3)
        image = api.ok("GET", f"/v1/images/{image['id']}")
    return image


def log_text(api, image_id):
    page = api.ok("GET", f"/v1/images/{image_id}/logs", query={"limit": 1000})
    return "\n".join(line["text"] for line in page["lines"])


def test_a_docker_hub_name_is_pulled_through_its_mirror(layout, registry):
    push_hub_images(registry, layout, ["alpine:3.20"])
    pushed = asked(registry, "library/alpine")
    with own_kilnd() as start:
        d = start("--registry-mirror", f"docker.io=http://{registry.host}")
        api = Client(d.url, key=d.admin_key)
        pulled = build_and_wait(api, {"name": "hub-alpine", "image": "alpine:3.20"})
        assert pulled["state"] == "ready", pulled
        assert pulled["source"] == "image" and pulled["ref"] == "docker.io/library/alpine:3.20", pulled
        text = log_text(api, pulled["id"])
        assert f"through the mirror docker.io=http://{registry.host}" in text, text
        assert f"from {registry.host}/library/alpine:3.20" in text, text
        assert asked(registry, "library/alpine") > pushed
        # A Dockerfile's FROM takes the same way; the layers are the key's already.
        built = build_and_wait(api, {"name": "on-alpine", "dockerfile":
                                     "FROM docker.io/library/alpine:3.20\nRUN echo built > /built\n"})
        assert built["state"] == "ready", built
        assert "through the mirror" in log_text(api, built["id"])
        sid = api.create(image="on-alpine")["id"]
        try:
            assert api.sh(sid, "cat /built; bash -c 'echo $BASH_VERSION' | cut -c1") == "built\n5\n"
        finally:
            api.request("DELETE", f"/v1/sandboxes/{sid}")


def test_a_mirror_that_is_down_falls_back_unless_mirror_only(layout, registry):
    """The registry is a local one named by its address, its mirror a port nothing listens
    on: pulls come from the registry itself, saying why; with --registry-mirror-only the pull
    fails naming the mirror, and the registry is never asked."""
    ref = registry.push(layout, "tiny/fallback:1")
    down = free_port()
    mirror = f"{registry.host}=http://127.0.0.1:{down}"
    with own_kilnd() as start:
        d = start("--registry-mirror", mirror)
        api = Client(d.url, key=d.admin_key)
        image = build_and_wait(api, {"name": "fell-back", "image": ref})
        assert image["state"] == "ready", image
        text = log_text(api, image["id"])
        assert "the mirror could not serve it" in text and f"pulling from {registry.host} itself" in text, text
    before = asked(registry, "tiny/fallback")
    with own_kilnd() as start:
        d = start("--registry-mirror", mirror, "--registry-mirror-only", registry.host)
        api = Client(d.url, key=d.admin_key)
        image = build_and_wait(api, {"name": "mirror-only", "image": ref})
        assert image["state"] == "failed", image
        message = image["error"]["message"]
        assert f"--registry-mirror-only {registry.host}" in message and f"127.0.0.1:{down}" in message, image
        assert asked(registry, "tiny/fallback") == before, "a mirror-only pull reached the registry"


def test_a_mirror_on_loopback_is_refused_unless_allowed(layout, registry, tmp_path):
    """A mirror is held to the registries' rules: one on loopback (a private address) is
    refused unless --allow-registry names it, before anything dials it."""
    push_hub_images(registry, layout, ["busybox:1"])
    pushed = asked(registry, "library/busybox")  # the push's own requests
    args = ["--registry-mirror", f"docker.io=http://{registry.host}", "--registry-mirror-only",
            "docker.io"]
    d = start_kilnd(tmp_path / "refusing", *args, loopback_registries=False)
    try:
        api = Client(d.url, key=d.admin_key)
        image = build_and_wait(api, {"name": "refused", "image": "busybox:1"})
        assert image["state"] == "failed", image
        assert "loopback address, refused" in image["error"]["message"], image
        assert asked(registry, "library/busybox") == pushed, "the refused mirror was dialled"
    finally:
        stop_kilnd(d)
    d = start_kilnd(tmp_path / "allowing", *args, "--allow-registry", registry.host,
                    loopback_registries=False)
    try:
        api = Client(d.url, key=d.admin_key)
        image = build_and_wait(api, {"name": "allowed", "image": "busybox:1"})
        assert image["state"] == "ready", image
        assert asked(registry, "library/busybox") > pushed
    finally:
        stop_kilnd(d)


@pytest.mark.parametrize("flags,named", [
    (["--registry-mirror", "docker.io=http://mirror.example:5000"], "--registry-mirror"),
    (["--registry-mirror", "docker.io"], "--registry-mirror"),
    (["--registry-mirror-only", "docker.io"], "--registry-mirror-only"),
    (["--registry-mirror", "docker.io=https://a.example", "--registry-mirror",
      "index.docker.io=https://b.example"], "one per registry"),
])
def test_kilnd_refuses_mirror_flags_it_cannot_use(tmp_path, flags, named):
    with pytest.raises(RuntimeError) as e:
        start_kilnd(tmp_path / "state", *flags)
    assert named in str(e.value), str(e.value)[-800:]
