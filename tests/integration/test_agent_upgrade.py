"""kilnd upgraded on a kept state directory: a checkpoint holds kiln-agent's
memory, whose code pages come back from the binary bind-mounted at
/opt/kiln/kiln-agent, so each snapshot restores with the build it was
taken with (src/engine/agent_binaries.h), a new boot gets the new build, and
a snapshot whose build this host lacks is refused by name, not left to hang
until the start timeout."""
import hashlib
import os
import shutil
from pathlib import Path

from conftest import BIN_DIR
from faults_util import daemons, restart, stop_kilnd  # noqa: F401

COLD = {"vcpu": 1, "memoryMiB": 384}  # not the built-in image's warm shape: a boot


def agent_in(api, sid):
    return api.sh(sid, "sha256sum /opt/kiln/kiln-agent").split()[0]


def test_a_snapshot_restores_with_the_agent_build_it_was_taken_with(daemons, tmp_path):
    agent = tmp_path / "kiln-agent"
    shutil.copy(BIN_DIR / "kiln-agent", agent)
    old = hashlib.sha256(agent.read_bytes()).hexdigest()
    d = daemons("--agent", str(agent))
    src = d.api.create(**COLD)["id"]
    assert agent_in(d.api, src) == old
    d.api.sh(src, "echo kept > /workspace/mark")
    snap = d.api.ok("POST", f"/v1/sandboxes/{src}:snapshot", json={})
    stop_kilnd(d)

    # The upgrade: a new build in the same place.
    new_build = tmp_path / "kiln-agent.new"
    new_build.write_bytes(agent.read_bytes() + b"\0another build")
    os.replace(new_build, agent)
    new = hashlib.sha256(agent.read_bytes()).hexdigest()
    restart(d, "--agent", str(agent))

    copy = d.api.create(snapshot=snap["id"])["id"]
    assert d.api.sh(copy, "cat /workspace/mark") == "kept\n"
    assert agent_in(d.api, copy) == old
    # Its own checkpoints (a fork) keep that build too.
    fork = d.api.ok("POST", f"/v1/sandboxes/{copy}:fork", json={"count": 1})["sandboxes"][0]["id"]
    assert agent_in(d.api, fork) == old and d.api.sh(fork, "cat /workspace/mark") == "kept\n"
    assert agent_in(d.api, d.api.create(**COLD)["id"]) == new

    # A host without the build (here: its copy removed) says which it lacks.
    stored = Path(d.state_dir) / "agents" / old
    assert stored.stat().st_mode & 0o777 == 0o555
    stored.unlink()
    r = d.api.post("/v1/sandboxes", json={"snapshot": snap["id"]}, timeout=60)
    assert r.status >= 500 and f"sha256:{old}" in r.body.decode(), r
    assert r.elapsed < 20, r  # refused, not timed out
