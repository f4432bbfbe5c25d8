"""Escape attempts on processes and privileges: ptrace and signals against
the agent (PID 1) and root's processes, setuid binaries and sudo, /dev,
mounts, namespaces and chroot. The sandbox must keep answering, and the
host's mount table must not change."""
import re
import time

import pytest

from escape_common import escape_guard, marker, quote, sh  # noqa: F401 -- fixtures

# Alone, after the parallel part of make test (conftest.py: serial).
pytestmark = pytest.mark.serial


@pytest.fixture(scope="module")
def box(api):
    info = api.create(vcpu=1, memoryMiB=512)
    yield info["id"]
    api.request("DELETE", f"/v1/sandboxes/{info['id']}")


@pytest.fixture(scope="module")
def nosudo(api):
    info = api.create(vcpu=1, memoryMiB=512, sudo=False)
    assert info["sudo"] is False
    yield info["id"]
    api.request("DELETE", f"/v1/sandboxes/{info['id']}")


@pytest.fixture(params=["sudo-true", "sudo-false"])
def either(request, box, nosudo):
    return box if request.param == "sudo-true" else nosudo


def _root_sleeper(api, sid):
    p = api.spawn(sid, argv=["sleep", "600"], user="root")
    assert p["state"] == "running", p
    return p


# Attaches to each pid given (PTRACE_ATTACH, then detach) and prints
# "pid: attached" or "pid: <strerror>"; "child" is a child of its own.
PTRACE = r'''
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
def attach(pid):
    if libc.ptrace(16, pid, None, None) != 0:
        return os.strerror(ctypes.get_errno())
    os.waitpid(pid, 0)
    libc.ptrace(17, pid, None, None)
    return "attached"
for arg in sys.argv[1:]:
    if arg == "child":
        pid = os.fork()
        if pid == 0:
            time.sleep(30); os._exit(0)
        print("child:", attach(pid)); os.kill(pid, 9)
    else:
        print(arg + ":", attach(int(arg)))
'''


def test_ptrace_of_the_agent_and_of_roots_processes_is_refused(api, either):
    root = _root_sleeper(api, either)
    out = api.sh(either, f"python3 -c {quote(PTRACE)} 1 {root['pid']} child")
    assert out.splitlines() == ["1: Operation not permitted", f"{root['pid']}: Operation not permitted",
                                "child: attached"], out  # its own child: ptrace itself works
    r = sh(api, either, f"cat /proc/1/environ; cat /proc/1/mem; cat /proc/{root['pid']}/environ; ls /proc/1/fd")
    assert r["exitCode"] != 0 and r["stdout"] == "", r
    assert r["stderr"].count("Permission denied") == 4, r
    assert api.process(either, root["id"])["state"] == "running"
    assert api.sh(either, "echo alive") == "alive\n"


def test_signals_to_the_agent_and_roots_processes_are_refused(api, either):
    root = _root_sleeper(api, either)
    signals = ["KILL", "STOP", "TERM", "INT", "HUP", "QUIT", "SEGV", "ABRT", "USR1", "TSTP"]
    for target in ("1", str(root["pid"])):
        script = "; ".join(f"kill -{s} {target} 2>&1 | grep -c 'Operation not permitted'" for s in signals)
        out = api.sh(either, script)
        assert out.split() == ["1"] * len(signals), (target, out)
    r = sh(api, either, "kill -9 -1; kill -STOP -1; echo survived")
    assert r["stdout"] == "survived\n" or r["signal"] == "SIGKILL", r  # -1 may hit the command's own shell
    time.sleep(0.5)
    assert api.sh(either, "echo alive") == "alive\n"
    assert api.process(either, root["id"])["state"] == "running"
    assert api.sandbox(either)["state"] == "running"


def test_setuid_copies_give_no_root(api, box, nosudo):
    for sid in (box, nosudo):
        r = sh(api, sid, "cp /usr/bin/id /workspace/id && chmod 4755 /workspace/id && chown root /workspace/id")
        assert r["exitCode"] != 0 and "Operation not permitted" in r["stderr"], r
        # The image's own setuid binaries give nothing either (runsc runs without --allow-suid).
        r = sh(api, sid, "su -c id root </dev/null; echo; ls -l /usr/bin/su")
        assert "uid=0" not in r["stdout"] and "rws" in r["stdout"], r
    # With sudo, root can make a setuid-root copy; running it stays the user.
    out = api.sh(box, "sudo cp /usr/bin/id /workspace/rid && sudo chmod 4755 /workspace/rid && "
                      "stat -c '%U %a' /workspace/rid && /workspace/rid -u && sudo id -u")
    assert out == "root 4755\n1000\n0\n", out


# Speaks the sudo shim's protocol to the agent directly (u32 length + JSON,
# stdio passed with SCM_RIGHTS), as a program that skips /usr/bin/sudo would.
SUDO_DIRECT = r'''
import array, json, socket, struct, sys

body = json.dumps({"argv": ["id", "-u"], "env": [], "cwd": "/"}).encode()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("/run/kiln/sudo.sock")
s.sendmsg([struct.pack("I", len(body))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
s.sendall(body)
status = struct.unpack("i", s.recv(4))[0]
print("status", status >> 8, flush=True)
'''


def test_sudo_false_gives_no_root_by_any_door(api, nosudo):
    api.exec(nosudo, command="mkdir -p /opt/grader && echo grader-secret > /opt/grader/key && "
                             "chmod 0500 /opt/grader && chmod 0400 /opt/grader/key", user="root")
    r = sh(api, nosudo, "sudo id -u")
    assert r["exitCode"] == 1 and "sudo: false" in r["stderr"] and r["stdout"] == "", r
    r = sh(api, nosudo, f"python3 -c {quote(SUDO_DIRECT)}")
    assert r["stdout"] == "status 1\n" and "not allowed" in r["stderr"], r
    for attempt in ("sudo -i id -u", "sudo -u '#0' cat /opt/grader/key", "/opt/kiln/kiln-agent id -u",
                    "cat /opt/grader/key", "ls /opt/grader", "su -c 'cat /opt/grader/key' root </dev/null"):
        r = sh(api, nosudo, attempt, timeout_ms=10000)
        assert "grader-secret" not in r["stdout"] + r["stderr"], (attempt, r)
        assert r["stdout"].strip() != "0", (attempt, r)
    assert api.sh(nosudo, "echo alive") == "alive\n"


@pytest.mark.parametrize("user", ["user", "root"])
def test_dev_has_no_host_devices(api, box, user):
    prefix = "sudo " if user == "root" else ""
    for dev in ("/dev/mem", "/dev/kmem", "/dev/port", "/dev/kvm", "/dev/sda", "/dev/vda", "/dev/nvme0n1",
                "/dev/loop0", "/dev/dm-0", "/dev/mapper/control"):
        r = sh(api, box, f"{prefix}head -c 16 {dev}")
        assert r["exitCode"] != 0 and "No such file or directory" in r["stderr"], (dev, r)
    r = sh(api, box, f"{prefix}find /dev /sys/block /sys/dev/block -mindepth 1 -type b -o -mindepth 1 -path '/sys/*'")
    assert r["stdout"] == "", r
    node = f"/tmp/mem-{user}"
    r = sh(api, box, f"{prefix}mknod {node} c 1 1")
    if user == "user":
        assert r["exitCode"] != 0 and "Operation not permitted" in r["stderr"], r
    else:
        # Root may make the node (CAP_MKNOD inside), but gVisor opens no host device behind it.
        assert r["exitCode"] == 0, r
        for n, kind in ((node, "c 1 1"), (f"/tmp/port-{user}", "c 1 4"), (f"/tmp/sda-{user}", "b 8 0"),
                        (f"/tmp/kvm-{user}", "c 10 232")):
            r = sh(api, box, f"sudo mknod {n} {kind} 2>/dev/null; sudo head -c 16 {n} | od -An -c")
            assert "No such device or address" in r["stderr"] and r["stdout"] == "", (n, r)


def _host_mounts():
    with open("/proc/self/mountinfo") as f:
        return {" ".join(line.split()[3:]) for line in f}  # without the ids, which are reassigned


def test_mount_namespace_and_chroot_attempts(api, kilnd, box, nosudo):
    before = _host_mounts()
    attempts = {
        "mount tmpfs": "/usr/bin/mount -t tmpfs t /mnt",
        "mount proc": "/usr/bin/mount -t proc p /mnt",
        "bind /": "/usr/bin/mount --bind / /mnt",
        "remount /": "/usr/bin/mount -o remount,rw /",
        "unshare -m": "/usr/bin/unshare -m true",
        "pivot_root": "/usr/sbin/pivot_root /tmp /tmp",
        "mount cgroup": "/usr/bin/mount -t cgroup -o memory c /mnt",
    }
    for sid in (box, nosudo):
        for name, command in attempts.items():
            for prefix in ("", "sudo "):
                r = sh(api, sid, prefix + command)
                assert r["exitCode"] != 0, (name, prefix, r)
                assert re.search("permission denied|not permitted|must be superuser|sudo: false", r["stderr"],
                                 re.I), (name, prefix, r)
        r = sh(api, sid, "/usr/sbin/chroot / true")
        assert r["exitCode"] != 0 and "Operation not permitted" in r["stderr"], r
    # Root may chroot inside (CAP_SYS_CHROOT), and a user namespace gives a
    # mount of its own: both live in the Sentry.
    assert api.sh(box, "sudo /usr/sbin/chroot / id -u") == "0\n"
    r = sh(api, box, "/usr/bin/unshare -Urm sh -c '/usr/bin/mount -t tmpfs t /mnt && touch /mnt/x && ls /mnt && id -u'")
    assert r["stdout"] in ("x\n0\n", ""), r
    assert api.sh(box, "ls /mnt | wc -l") == "0\n"
    assert "/mnt" not in api.sh(box, "cat /proc/self/mountinfo")
    after = _host_mounts()
    # Other engineers' kilnds on this host may come and go meanwhile: their
    # runsc roots and network namespaces are left out of the comparison.
    others = re.compile(r"^\S+ (/tmp/kiln-|/run/netns/|/var/run/netns/|/run/user/)")
    new = sorted(m for m in after - before if not others.match(m))
    assert not new, f"the host's mount table changed: {new}"
    for sid in (box, nosudo):
        assert api.sh(sid, "echo alive") == "alive\n"


def test_a_stopped_agent_is_continued_by_kilnd(api):
    """Root inside may stop PID 1 (gVisor lets `kill -STOP 1` through, Linux
    would not). Nothing inside can start it again, so kilnd sends SIGCONT to
    PID 1 when a wait for the agent times out: the sandbox answers again and
    its files are intact."""
    info = api.create(vcpu=1, memoryMiB=512)
    sid = info["id"]
    try:
        api.sh(sid, "echo kept > /tmp/kept")
        r = api.request("POST", f"/v1/sandboxes/{sid}:exec",
                        json={"command": "sudo /bin/kill -STOP 1; echo stopped", "timeoutMs": 3000},
                        timeout=120)
        # The agent may stop before or after it answers this one; when it is
        # continued it finds the command past its timeout.
        assert r.status in (200, 504), r
        if r.status == 200:
            assert r.json()["timedOut"] or r.json()["stdout"] == "stopped\n", r
        deadline = time.monotonic() + 90
        answered = None
        while time.monotonic() < deadline:
            r = api.request("POST", f"/v1/sandboxes/{sid}:exec",
                            json={"command": "cat /tmp/kept", "timeoutMs": 3000}, timeout=120)
            if r.status == 200:
                answered = r.json()
                break
            assert r.status == 504 and r.json()["error"]["code"] == "agent_timeout", r
        assert answered is not None, "the sandbox never answered again after kill -STOP 1"
        assert answered["stdout"] == "kept\n", answered
        assert api.ok("GET", f"/v1/sandboxes/{sid}")["state"] == "running"
    finally:
        api.request("DELETE", f"/v1/sandboxes/{sid}")
