#!/usr/bin/python3
"""Which runsc flags kiln's hot paths use: the raw pinned runsc, measured side
by side in one run (no kilnd). One JSON line per figure on stdout.

- checkpoint --leave-running --compression=none, with and without
  --exclude-committed-zero-pages: time and image size;
- restore --detach to the first answer over fresh stdio pipes, plain and with
  --background, --direct and both: latency and whole-host CPU per cycle
  (restore + answer + delete);
- runsc delete --force: latency and host CPU.

Each for a python echo loop holding MIB MiB of random bytes (0 and 100). The
variants run interleaved, so drift on a noisy machine hits them alike.

Usage: /usr/bin/python3 bench/runsc_flags.py [--kilnd PATH] [--image-dir DIR] [--reps N]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import common
from common import Peer, base_rootfs, emit, log, read_until, run, start_subreaper

ECHO_PY = ("import os, sys\n"
           "ballast = bytearray(os.urandom(int(sys.argv[1]) << 20))\n"
           "print('ready', flush=True)\n"
           "for l in sys.stdin: print(l, end='', flush=True)\n")
RESTORE_VARIANTS = {"plain": [], "background": ["--background"], "direct": ["--direct"],
                    "background+direct": ["--background", "--direct"]}


def busy_ms():
    """Host CPU time not idle, all cores, in ms (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) * 1000 / os.sysconf("SC_CLK_TCK")


def answer(peer, cid, line=b"ping\n"):
    in_w, out_r = peer.pipes[cid]
    os.write(in_w, line)
    read_until(out_r, line, timeout=60)


def med(v):
    return round(statistics.median(v), 1)


def probe(peer, mib, reps):
    bundle = peer.bundle(f"echo{mib}", ["python3", "-c", ECHO_PY, str(mib)])
    src = peer.next_id(f"src{mib}")
    peer.start_piped(bundle, src)
    read_until(peer.pipes[src][1], b"ready\n", timeout=180)
    answer(peer, src)

    # Checkpoints, interleaved; the last plain image is restored below.
    ck = {"plain": [], "exclude-zero-pages": []}
    size = {}
    image = None
    for i in range(reps):
        for name, extra in (("plain", []), ("exclude-zero-pages", ["--exclude-committed-zero-pages"])):
            path = os.path.join(peer.images, f"ck{mib}-{name}-{i}")
            os.makedirs(path)
            t0 = time.perf_counter()
            r = run(peer.cmd("checkpoint", "--leave-running", "--compression=none",
                             *extra, "--image-path", path, src), capture=True, timeout=300)
            ck[name].append((time.perf_counter() - t0) * 1000)
            if r.returncode != 0:
                raise RuntimeError(f"checkpoint {name}: {r.stderr[-400:]!r}")
            size[name] = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
            if name == "plain" and i == reps - 1:
                image = path
            else:
                shutil.rmtree(path)
    for name, v in ck.items():
        emit({"bench": "runsc_checkpoint", "variant": name, "mib": mib, "unit": "ms",
              "p50": med(v), "first": round(v[0], 1), "n": len(v),
              "sizeMiB": round(size[name] / 1048576, 1),
              "what": f"runsc checkpoint --leave-running --compression=none of a python process "
                      f"holding {mib} MiB"})
    peer.delete(src)

    lat = {k: [] for k in RESTORE_VARIANTS}
    cpu = {k: [] for k in RESTORE_VARIANTS}
    dels, del_cpu = [], []
    for i in range(reps + 1):
        for name, extra in RESTORE_VARIANTS.items():
            cid = peer.next_id(f"r{mib}")
            time.sleep(0.2)
            c0, t0 = busy_ms(), time.perf_counter()
            peer.start_piped(bundle, cid, image=image, restore_flags=extra)
            answer(peer, cid)
            t1, c1 = time.perf_counter(), busy_ms()
            peer.delete(cid)
            t2, c2 = time.perf_counter(), busy_ms()
            if i == 0:
                continue  # warm-up round: page cache, binaries
            lat[name].append((t1 - t0) * 1000)
            cpu[name].append(c1 - c0)
            dels.append((t2 - t1) * 1000)
            del_cpu.append(c2 - c1)
    for name in RESTORE_VARIANTS:
        emit({"bench": "runsc_restore", "variant": name, "mib": mib, "unit": "ms",
              "p50": med(lat[name]), "min": round(min(lat[name]), 1), "n": len(lat[name]),
              "hostCpuMsP50": med(cpu[name]),
              "what": f"runsc restore --detach {' '.join(RESTORE_VARIANTS[name])} of the {mib} MiB "
                      "image to the first echo over fresh stdio pipes; host CPU (all of it) "
                      "over the same span"})
    emit({"bench": "runsc_delete", "mib": mib, "unit": "ms", "p50": med(dels), "n": len(dels),
          "hostCpuMsP50": med(del_cpu), "what": "runsc delete --force of a restored container"})
    shutil.rmtree(image)


def probe_disk(peers, mib, reps):
    """The sandbox's disk: a file-backed overlay (kiln's) against one in sandbox memory
    (kiln's before): checkpoint, and restore to the first answer; interleaved."""
    images, bundles = {}, {}
    for disk, peer in peers.items():
        bundles[disk] = peer.bundle(f"disk{mib}", ["python3", "-c", ECHO_PY, str(mib)])
        src = peer.next_id(f"dsrc{mib}")
        peer.start_piped(bundles[disk], src)
        read_until(peer.pipes[src][1], b"ready\n", timeout=180)
        images[disk] = os.path.join(peer.images, f"disk{mib}")
        t0 = time.perf_counter()
        peer.checkpoint(src, images[disk])
        ck = (time.perf_counter() - t0) * 1000
        peer.delete(src)
        images[disk] = (images[disk], ck)
    lat = {d: [] for d in peers}
    for i in range(reps + 1):
        for disk, peer in peers.items():
            cid = peer.next_id(f"dr{mib}")
            t0 = time.perf_counter()
            peer.start_piped(bundles[disk], cid, image=images[disk][0])
            answer(peer, cid)
            if i:
                lat[disk].append((time.perf_counter() - t0) * 1000)
            peer.delete(cid)
    for disk in peers:
        emit({"bench": "runsc_disk", "variant": disk, "mib": mib, "unit": "ms",
              "restoreP50": med(lat[disk]), "n": len(lat[disk]),
              "checkpointMs": round(images[disk][1], 1),
              "what": f"overlay {disk}: runsc checkpoint of a python process holding {mib} MiB, and "
                      "restore --detach to its first echo"})
        shutil.rmtree(images[disk][0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kilnd", default=os.path.join(common.REPO, "build", "bin", "kilnd"),
                    help="only to learn which runsc it uses")
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--mib", default="0,100")
    args = ap.parse_args()
    common.RUNSC = common.runsc_of(args.kilnd)
    rootfs = base_rootfs(args.image_dir)
    start_subreaper()
    emit(common.machine_line(None))
    workdir = tempfile.mkdtemp(prefix="kiln-bench-flags-")
    peer = Peer(rootfs, workdir)
    mem_peer = None
    rc = 0
    try:
        mem_peer = Peer(rootfs, workdir, memory_overlay=True, name="memdisk")
        peers = {"file-backed": peer, "memory": mem_peer}
        for mib in (int(x) for x in args.mib.split(",")):
            log(f"runsc flags, {mib} MiB ...")
            probe(peer, mib, args.reps)
            log(f"disk medium, {mib} MiB ...")
            probe_disk(peers, mib, args.reps)
    except Exception as e:  # noqa: BLE001 -- reported, then cleaned up
        log(f"FAILED: {e}")
        rc = 1
    finally:
        for p in (peer, mem_peer):
            if p is not None:
                p.cleanup()
        common.kill_leftovers(workdir)
        common.unmount_under(workdir)
        shutil.rmtree(workdir, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
