#!/usr/bin/python3
"""Code-reward throughput: one JSON line per figure on stdout (progress on stderr).

kiln: the programs of examples/code_rewards.py (correct, wrong, hanging, output
flood, crashing, one cheater) scored with kiln.rewards.score_many: one sandbox
per program, one exec per case, `concurrency` programs at a time.
peer (same run, same programs, same cases, same concurrency): per program a
fresh container from `runsc run --detach` on an OCI bundle made by `runsc spec`
with the same rootfs (read-only) and kilnd's runsc flags, then one
`runsc exec python3 -c PROGRAM` per case with the case on stdin (same per-case
timeout, output capped at 64 KiB like kilnd), then `runsc delete --force`.

Starts its own kilnd (free port, temporary state dir) and removes everything it
made: kilnd, its sandboxes, the peer's containers and the temporary directory.

Usage: /usr/bin/python3 bench/rewards.py [--kilnd PATH] [--programs 100] [--quick]
"""
import argparse
import os
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "examples"))
sys.path.insert(0, os.path.join(REPO, "sdk", "python"))

from common import (KilndSession, Peer, base_rootfs, emit, forget, host_busy_ms, log,  # noqa: E402
                    process_cpu_ms, runsc_cmd, spawn, start_subreaper)
import code_rewards as ex  # noqa: E402  examples/code_rewards.py: programs, cases, checks
from kiln import Runtime  # noqa: E402
from kiln.rewards import score_many  # noqa: E402
OUTPUT_CAP = 64 * 1024  # kilnd's captured output per stream (src/api/kiln/routes_exec.cc)


class PeerResult:
    def __init__(self, passed, total, reasons):
        self.passed, self.total, self.reasons = passed, total, reasons
        self.score = passed / total if total else 0.0


def _drain(stream, out, cap):
    """Reads up to cap+1 bytes, then closes the pipe (the writer gets EPIPE)."""
    buf = bytearray()
    try:
        while len(buf) <= cap:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                break
            buf += chunk
    except (OSError, ValueError):
        pass
    finally:
        try:
            stream.close()
        except OSError:
            pass
    out.append(bytes(buf))


def peer_exec(peer, cid, program, stdin, timeout_s):
    """`runsc exec CID python3 -c PROGRAM` with stdin; returns (reason, stdout)."""
    p = spawn(runsc_cmd(peer.root, "exec", cid, "python3", "-c", program),
              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    outs, errs = [], []
    readers = [threading.Thread(target=_drain, args=(p.stdout, outs, OUTPUT_CAP), daemon=True),
               threading.Thread(target=_drain, args=(p.stderr, errs, OUTPUT_CAP), daemon=True)]
    for t in readers:
        t.start()
    try:
        p.stdin.write(stdin.encode())
        p.stdin.close()
    except OSError:
        pass
    timed_out = False
    try:
        p.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        p.kill()
        p.wait()
    finally:
        forget(p)
    for t in readers:
        t.join(timeout=10)
    out = outs[0] if outs else b""
    if timed_out:
        return "timeout", out
    if len(out) > OUTPUT_CAP:
        return "output_truncated", out
    if p.returncode != 0:
        return "runtime_error", out
    return "ok", out


def peer_score(peer, bundle, program, cases, timeout_s):
    """One fresh container per program; one exec per case; stop on the first failure (as the
    example's score_many call does); the container is deleted afterwards."""
    cid = peer.next_id("rw")
    reasons = []
    try:
        peer.run(bundle, cid, detach=True)
        for stdin, expected in cases:
            if reasons and reasons[-1] != "ok":
                reasons.append("skipped")
                continue
            reason, out = peer_exec(peer, cid, program, stdin, timeout_s)
            if reason == "ok" and out.decode("utf-8", "replace").split() != expected.split():
                reason = "wrong_answer"
            reasons.append(reason)
    finally:
        peer.delete(cid)
    return PeerResult(reasons.count("ok"), len(cases), reasons)


def floor_probe(kilnd, rt, cases, args):
    """What one program costs at least, measured here: a sandbox's life (create + stop, no
    command) and one `python3 main.py` of a correct program (the sandbox cgroup's CPU); and
    what hanging programs take (timeout x the CPU they may use)."""
    api = kilnd.api()
    n = 10
    busy0 = host_busy_ms()
    for _ in range(n):
        sid = kilnd.create(api, {"vcpu": 1, "memoryMiB": args.memory_mib})
        kilnd.stop_sandbox(api, sid)
    life = (host_busy_ms() - busy0) / n
    sbx = rt.sandboxes.create(vcpu=1, memory_mib=args.memory_mib)
    acct = f"/sys/fs/cgroup/cpuacct/kiln/{sbx.id}/cpuacct.usage"
    sbx.files.write("/workspace/main.py", ex.CORRECT[0])
    runs = []
    for stdin, _ in cases * 2:
        with open(acct) as f:
            c0 = int(f.read())
        sbx.exec(["python3", "main.py"], stdin=stdin, cwd="/workspace")
        with open(acct) as f:
            runs.append((int(f.read()) - c0) / 1e6)
    sbx.stop()
    api.close()
    runs.sort()
    per_case = runs[len(runs) // 2]
    emit({"bench": "code_rewards_floor", "unit": "ms host CPU",
          "sandboxLifeMs": round(life), "pythonCaseMs": round(per_case, 1),
          "correctProgramMs": round(life + len(cases) * per_case),
          "hangProgramMsUpTo": args.timeout_ms,
          "what": "sandbox create + stop (no command), host CPU; one `python3 main.py` case, "
                  "sandbox cgroup CPU; a correct program runs every case; a CPU-bound hang may "
                  "use one vCPU until its timeout"})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kilnd", default=os.path.join(REPO, "build", "bin", "kilnd"))
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--programs", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--timeout-ms", type=int, default=3000)
    ap.add_argument("--memory-mib", type=int, default=256)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="24 programs (smoke test)")
    args = ap.parse_args()
    if args.quick:
        args.programs = 24

    rootfs = base_rootfs(args.image_dir)

    rng = random.Random(args.seed)
    cases = ex.make_cases(rng)
    programs = ex.make_programs(args.programs, rng)
    cats = [c for c, _ in programs]
    mix = {c: cats.count(c) for c in ex.CATEGORIES}

    start_subreaper()
    with KilndSession(args.kilnd, args.image_dir, "kiln-bench-rewards-") as session:
        kilnd = session.kilnd
        rt = Runtime(api_url=kilnd.url, api_key=kilnd.key)
        common = {"programs": len(programs), "cases": len(cases), "concurrency": args.concurrency,
                  "timeoutMs": args.timeout_ms, "mix": mix, "unit": "programs/s"}

        # kiln
        log(f"kiln: scoring {len(programs)} programs, concurrency {args.concurrency}")
        opts = dict(mode="whitespace", timeout_ms=args.timeout_ms, memory_mib=args.memory_mib, vcpu=1,
                    stop_on_failure=True, labels={"bench": "rewards"}, runtime=rt)
        t0, busy0, kilnd0, client0 = time.monotonic(), host_busy_ms(), process_cpu_ms(kilnd.proc.pid), os.times()
        results = score_many([src for _, src in programs], cases, concurrency=args.concurrency, **opts)
        wall = time.monotonic() - t0
        busy = host_busy_ms() - busy0
        kilnd_ms = process_cpu_ms(kilnd.proc.pid) - kilnd0
        client1 = os.times()
        client_ms = (client1.user + client1.system - client0.user - client0.system) * 1000
        problems = [f"{i} {c}: {p}" for i, ((c, _), r) in enumerate(zip(programs, results))
                    for p in ex.check(c, r, cases)]
        kiln_scores = [r.score for r in results]
        emit({"bench": "code_rewards_throughput", "kiln": True, **common,
              "value": round(len(programs) / wall, 3), "wallS": round(wall, 2),
              "unexpected": len(problems), "unexpectedSamples": problems[:5],
              "what": "kiln.rewards.score_many: sandbox per program, exec per case"})
        n = len(programs)
        emit({"bench": "code_rewards_cpu", "kiln": True, "unit": "ms host CPU per program",
              "hostCpuMsPerProgram": round(busy / n), "kilndCpuMsPerProgram": round(kilnd_ms / n, 1),
              "sdkCpuMsPerProgram": round(client_ms / n, 1),
              "ceilingProgramsPerS": round(os.cpu_count() * 1000 / (busy / n), 2),
              "what": "all host CPU during the kiln run / programs; kilnd's own and the SDK's (this "
                      "process) share of it; ceiling = CPUs / CPU per program"})
        floor_probe(kilnd, rt, cases, args)
        # Every sandbox score_many made must be stopped.
        api = kilnd.api()
        listed = api.call("GET", "/v1/sandboxes?includeStopped=true&limit=500")["data"]
        running = [s["id"] for s in listed if s.get("state") != "stopped"]
        api.close()
        if running:
            log(f"sandboxes still running after score_many: {running}")
            kilnd.sandboxes.update(running)
            session.rc = 1

        # peer
        peer = Peer(rootfs, session.workdir)
        session.on_exit("peer cleanup", peer.cleanup)
        bundle = peer.bundle("rewards", ["/bin/sleep", "infinity"])
        log(f"peer: runsc run + exec per case, {len(programs)} programs")
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            futs = [pool.submit(peer_score, peer, bundle, src, cases, args.timeout_ms / 1000)
                    for _, src in programs]
            peer_results = [f.result() for f in futs]
        pwall = time.monotonic() - t0
        peer_scores = [r.score for r in peer_results]
        differ = sum(1 for a, b in zip(kiln_scores, peer_scores) if a != b)
        differ_samples = [f"{i} {c}: kiln {a:.2f}, peer {b:.2f} {r.reasons}"
                          for i, ((c, _), a, b, r) in enumerate(zip(programs, kiln_scores, peer_scores, peer_results))
                          if a != b][:5]
        emit({"bench": "code_rewards_throughput", "peer": "runsc run + runsc exec per case", **common,
              "value": round(len(programs) / pwall, 3), "wallS": round(pwall, 2),
              "scoresDifferFromKiln": differ, "differSamples": differ_samples,
              "what": "fresh runsc container per program (same rootfs and flags), exec per case"})
        # kiln's verdicts must be right; the peer's may differ under load (a
        # `runsc exec` per case can itself pass the 3 s), which is reported.
        if problems:
            session.rc = 1
    return session.rc


if __name__ == "__main__":
    sys.exit(main())
