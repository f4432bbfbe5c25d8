"""Host-side view of a sandbox: its processes, cgroups, mounts, runsc state and
working directory (layout agreed with the daemon):

  <state-dir>/sandboxes/<id>/                  working directory
  runsc --root <state-dir>/runsc list          live runsc sandboxes
  /sys/fs/cgroup/<memory|cpu|pids>/kiln/<id>   cgroups (v1)
  runsc processes carry <id> in their command line; their children (systrap
  stubs, gofer) may not, so we also follow the process tree.
"""
import os
import subprocess
import time
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "cpu", "pids")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _proc_table():
    """pid -> (ppid, starttime, cpu_ticks, cmdline)."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        # fields[0] is field 3 (state): ppid=4, utime=14, stime=15, starttime=22
        table[int(name)] = (int(fields[1]), int(fields[19]), int(fields[11]) + int(fields[12]), cmd)
    return table


def runsc_of(kilnd):
    """The runsc a kilnd build uses: line 2 of `kilnd --version` is `runsc VERSION PATH ...`."""
    return subprocess.run([str(kilnd), "--version"], capture_output=True, text=True).stdout.split("\n")[1].split()[2]


class Host:
    def __init__(self, state_dir, runsc):
        self.state_dir = Path(state_dir)
        self.runsc = runsc

    def sandbox_dir(self, sid):
        return self.state_dir / "sandboxes" / sid

    def cgroup(self, controller, sid):
        return CGROUP_ROOT / controller / "kiln" / sid

    def cgroup_value(self, controller, sid, name):
        f = self.cgroup(controller, sid) / name
        assert f.exists(), f"{f} does not exist (cgroup layout?)"
        return f.read_text().strip()

    def anon_bytes(self, sid):
        """The sandbox's own memory on the host (total_rss + total_shmem of its
        memory cgroup): page cache of its disk left out."""
        stat = dict(line.split() for line in self.cgroup_value("memory", sid, "memory.stat").splitlines())
        return int(stat["total_rss"]) + int(stat["total_shmem"])

    def runsc_ids(self):
        root = self.state_dir / "runsc"
        if not root.exists():
            return []
        r = subprocess.run([self.runsc, "--root", str(root), "list", "-quiet"],
                           capture_output=True, text=True, timeout=30)
        return r.stdout.split()

    def pids(self, sid):
        """{pid: starttime} of every host process of the sandbox: those naming
        it on their command line, their descendants and the cgroups' members."""
        table = _proc_table()
        me = os.getpid()
        roots = {p for p, (_, _, _, cmd) in table.items() if sid in cmd and p != me}
        for c in CONTROLLERS:
            procs = self.cgroup(c, sid) / "cgroup.procs"
            try:
                roots |= {int(x) for x in procs.read_text().split()}
            except OSError:
                pass
        children = {}
        for p, (ppid, _, _, _) in table.items():
            children.setdefault(ppid, []).append(p)
        found, todo = set(), list(roots)
        while todo:
            p = todo.pop()
            if p in found or p not in table:
                continue
            found.add(p)
            todo.extend(children.get(p, []))
        return {p: table[p][1] for p in found}

    @staticmethod
    def cpu_ticks(pids):
        table = _proc_table()
        return {p: table[p][2] for p in pids if p in table and table[p][1] == pids[p]}

    def cpu_rate(self, sid, seconds):
        """CPU seconds per wall second used by the sandbox's host processes."""
        pids = self.pids(sid)
        a, t0 = self.cpu_ticks(pids), time.monotonic()
        time.sleep(seconds)
        b, t1 = self.cpu_ticks(pids), time.monotonic()
        used = sum(b[p] - a[p] for p in b if p in a) / CLK_TCK
        return used / (t1 - t0), len(pids)

    @staticmethod
    def mounts_naming(*needles):
        with open("/proc/self/mountinfo") as f:
            return [line.strip() for line in f if any(n in line for n in needles)]

    def traces(self, sid, known_pids=None):
        """Everything of the sandbox still on the host, as readable strings.
        `known_pids` ({pid: starttime} from pids() taken while it ran) are
        checked too, so children without the id in argv are not missed."""
        left = []
        d = self.sandbox_dir(sid)
        if d.exists():
            left.append(f"directory {d}")
        if any(sid in x for x in self.runsc_ids()):
            left.append("runsc list still shows it")
        for c in CONTROLLERS:
            if self.cgroup(c, sid).exists():
                left.append(f"cgroup {self.cgroup(c, sid)}")
        table = _proc_table()
        for p, (_, start, _, cmd) in table.items():
            if sid in cmd and p != os.getpid():
                left.append(f"process {p}: {cmd[:200]}")
            elif known_pids and known_pids.get(p) == start:
                left.append(f"process {p} (child of the sandbox): {cmd[:200] or '[no cmdline]'}")
        for m in self.mounts_naming(sid, str(d)):
            left.append(f"mount {m}")
        return left

    def wait_gone(self, sid, known_pids=None, timeout=0.0):
        """traces(), retried for `timeout` seconds (0: look once)."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.traces(sid, known_pids)
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.2)


def tree_signature(root):
    """{relative path: (size, mtime_ns, mode)} of every entry under root."""
    root = Path(root)
    sig = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            try:
                st = p.lstat()
            except OSError:
                continue
            sig[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return sig


def find_paths(root, match):
    """Paths under root whose name satisfies match(name), files and folders.

    os.walk skips a folder that vanishes mid-walk, where Path.rglob raises:
    the daemon removes image roots and partial snapshots while tests look."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        found += [Path(dirpath) / n for n in dirnames + filenames if match(n)]
    return found
