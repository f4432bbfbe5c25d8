"""kilnd daemons a test starts for itself (flags of its own, a restart, a kill), beside the
session's shared one (conftest.py's `kilnd` fixture)."""
import contextlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from client import Client
from conftest import start_kilnd, stop_kilnd
from host import Host


class OwnKilnds:
    """Starts kilnds, each on a state directory of its own unless told one, and keeps what
    it started for `close`. Calling it starts one: start(*args, state=None, port=None,
    log_path=None) -> the Daemon (conftest.start_kilnd's arguments)."""

    def __init__(self, prefix="kiln-own-"):
        self.prefix = prefix
        self.started = []  # every Daemon started, in order (a restart adds one)
        self.states = []   # every state directory used, made here or given

    def __call__(self, *args, state=None, port=None, log_path=None):
        state = str(state or tempfile.mkdtemp(prefix=self.prefix, dir="/tmp"))
        if state not in self.states:
            self.states.append(state)
        d = start_kilnd(state, *args, port=port, log_path=log_path)
        self.started.append(d)
        return d

    def close(self, delete_sandboxes=False, check_exit=False, unmount=False):
        """Stops each kilnd still alive and removes each state directory and its log.
        `delete_sandboxes`: deletes a kilnd's sandboxes before stopping it; `check_exit`:
        asserts it then exits 0; `unmount`: lazily unmounts whatever still names a state
        directory (a sandbox's rootfs left by a killed kilnd) before removing it. The
        directories are removed even when a check fails; the failure is raised after."""
        try:
            codes = []
            for d in self.started:
                if not d.alive():
                    continue
                if delete_sandboxes:
                    api = Client(d.url, key=d.admin_key)
                    for s in api.ok("GET", "/v1/sandboxes")["data"]:
                        api.request("DELETE", f"/v1/sandboxes/{s['id']}")
                codes.append(stop_kilnd(d))
            if check_exit:
                assert all(code == 0 for code in codes), f"kilnd exited with {codes}"
        finally:
            self._remove(unmount)

    def _remove(self, unmount):
        if unmount:
            for m in Host.mounts_naming(*self.states):
                subprocess.run(["umount", "-l", m.split()[4]], capture_output=True)
        for state in self.states:
            shutil.rmtree(state, ignore_errors=True)
            Path(state + ".log").unlink(missing_ok=True)
        for d in self.started:
            Path(d.log_path).unlink(missing_ok=True)


@contextlib.contextmanager
def own_kilnd(prefix="kiln-own-", delete_sandboxes=False, check_exit=False, unmount=False):
    """`with own_kilnd() as start:` start(*args, state=None, port=None, log_path=None) ->
    a kilnd of the caller's own; all are stopped and their state removed at the end (see
    OwnKilnds.close for the options)."""
    kilnds = OwnKilnds(prefix)
    try:
        yield kilnds
    finally:
        kilnds.close(delete_sandboxes=delete_sandboxes, check_exit=check_exit, unmount=unmount)
