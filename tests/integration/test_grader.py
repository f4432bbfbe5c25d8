"""Graders the policy cannot touch: sudo: false (issue 14, item 8).

The recipe (docs/guide.md, "Graders the policy cannot touch"): the trainer holds the key; it installs the
grader as root (exec user "root", which nothing inside the sandbox can ask
for), root-owned and mode 0500; the sandbox runs with sudo: false, so the
sandbox user can neither read, change nor run it; the trainer runs it as
root at the end of the episode.
"""
from test_images import build

GRADER = "#!/bin/sh\\necho graded\\n"
INSTALL = ("mkdir -p /opt/grader && printf '" + GRADER + "' > /opt/grader/grade && "
           "chown -R root:root /opt/grader && chmod 0500 /opt/grader/grade && chmod 0711 /opt/grader")
HASH = "sha256sum /opt/grader/grade"

# What a policy might try as the sandbox user, each expected to fail.
HOSTILE = [
    "sudo true",
    "sudo cat /opt/grader/grade",
    "sudo -i true",
    "cat /opt/grader/grade",
    "/opt/grader/grade",
    "echo 'echo 1.0' > /opt/grader/grade",
    "rm -f /opt/grader/grade",
    "mv /opt/grader/grade /tmp/g",
    "chmod 0777 /opt/grader/grade",
    "ln -sf /bin/true /opt/grader/grade",
    "cp /bin/true /opt/grader/grade",
    "python3 -c 'import os; os.setuid(0)'",
    "su -c true root </dev/null",
    "printf x | dd of=/opt/grader/grade conv=notrunc",
]


def root(api, sid, command):
    r = api.exec(sid, command=command, user="root")
    assert r["exitCode"] == 0, r
    return r["stdout"]


def attack(api, sid):
    for command in HOSTILE:
        r = api.exec(sid, command=command, timeoutMs=10000)
        assert r["exitCode"] != 0, f"{command!r} succeeded as the sandbox user: {r!r}"
    # Killing everything it can reach does not reach root's files either.
    api.exec(sid, command="kill -9 -1", timeoutMs=10000)


def test_sudo_false_keeps_a_root_only_grader_out_of_reach(api, sandboxes):
    sid = sandboxes.create(vcpu=1, memoryMiB=256, sudo=False)["id"]
    assert api.sandbox(sid)["sudo"] is False
    root(api, sid, INSTALL)
    digest = root(api, sid, HASH)
    r = api.exec(sid, command="sudo id -u")
    assert r["exitCode"] == 1 and "sudo: false" in r["stderr"], r
    attack(api, sid)
    assert root(api, sid, HASH) == digest
    assert root(api, sid, "/opt/grader/grade") == "graded\n"
    assert root(api, sid, "stat -c '%U %a' /opt/grader/grade") == "root 500\n"


def test_sudo_is_on_by_default_and_user_field_is_checked(api, sandboxes):
    sid = sandboxes.create(vcpu=1, memoryMiB=256)["id"]
    assert api.sh(sid, "sudo id -u") == "0\n"
    assert api.sh(sid, "id -u") == "1000\n"
    assert root(api, sid, "id -u; echo $HOME") == "0\n/root\n"
    r = api.post(f"/v1/sandboxes/{sid}:exec", json={"command": "true", "user": "admin"})
    assert r.status == 400 and "user" in r.body.decode(), r


def test_copies_of_a_sudo_false_sandbox_keep_sudo_off(api, sandboxes):
    sid = sandboxes.create(vcpu=1, memoryMiB=256, sudo=False)["id"]
    snap = api.ok("POST", f"/v1/sandboxes/{sid}:snapshot", json={})
    try:
        copy = sandboxes.create(snapshot=snap["id"])
        assert copy["sudo"] is False
        assert api.exec(copy["id"], command="sudo true")["exitCode"] == 1
        forked = api.ok("POST", f"/v1/sandboxes/{sid}:fork", json={"count": 1})["sandboxes"][0]
        sandboxes.ids.append(forked["id"])
        assert api.exec(forked["id"], command="sudo true")["exitCode"] == 1
    finally:
        api.request("POST", f"/v1/snapshots/{snap['id']}:delete", json={})


def test_an_image_with_sudo_false_runs_its_sandboxes_without_sudo(api, sandboxes):
    image, _ = build(api, name="nosudo", recipe={"commands": ["mkdir -p /opt/x"]}, sudo=False)
    assert image["state"] == "ready" and image["sudo"] is False, image
    s = sandboxes.create(image="nosudo", sudo=True)  # the image's choice wins
    assert s["sudo"] is False
    assert api.exec(s["id"], command="sudo true")["exitCode"] == 1
    api.request("POST", f"/v1/images/{image['id']}:delete", json={})
