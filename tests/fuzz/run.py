#!/usr/bin/python3
"""Runs every fuzz target (tests/fuzz) for FUZZ_SECONDS each and prints one
JSON line of figures per target: executions, executions per second, edges
covered (cov) and features (ft), corpus size.

Before fuzzing, each target runs its committed regressions
(tests/fuzz/regressions/<target>/: every input that once crashed it) and
its seeds once. Fails on any crash, leak, timeout or out-of-memory; the
input that caused it is left under WORK/artifacts/<target>/ and its path
printed -- commit it to the regressions folder with the fix.

The corpus grows in WORK/corpus/<target> (seeds copied in at the start), so
repeated runs go deeper; the committed seeds stay small.

Usage: /usr/bin/python3 tests/fuzz/run.py --bin-dir build-asan/bin [--seconds 60]
       [--work build-asan/fuzz-work] [--jobs N] [target ...]
Targets run N at a time (default: one per core)."""
import argparse
import concurrent.futures
import datetime
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = ["fuzz_http_front", "fuzz_agent_frames_daemon", "fuzz_agent_frames_agent",
           "fuzz_egress_rules", "fuzz_proxy_request", "fuzz_tar", "fuzz_dockerfile",
           "fuzz_oci_layout", "fuzz_config_json", "fuzz_snapshot_import", "fuzz_path_ids",
           "fuzz_e2b_envd"]
ENV = dict(os.environ,
           ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:allocator_may_return_null=1",
           UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")


def files_in(d):
    if not os.path.isdir(d):
        return []
    return sorted(os.path.join(d, f) for f in os.listdir(d)
                  if os.path.isfile(os.path.join(d, f)))


def replay(binary, inputs, log):
    """Runs each input once; False if any crashes."""
    if not inputs:
        return True
    r = subprocess.run([binary, "-timeout=10", "-rss_limit_mb=2048"] + inputs, env=ENV,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace")
    with open(log, "a") as f:
        f.write(r.stdout)
    return r.returncode == 0


def fuzz(binary, target, seconds, work, seed=None):
    corpus = os.path.join(work, "corpus", target)
    artifacts = os.path.join(work, "artifacts", target) + "/"
    os.makedirs(corpus, exist_ok=True)
    os.makedirs(artifacts, exist_ok=True)
    for start in files_in(os.path.join(HERE, "corpus", target)):
        shutil.copy(start, corpus)
    log = os.path.join(work, target + ".log")
    open(log, "w").close()
    regressions = files_in(os.path.join(HERE, "regressions", target))
    if not replay(binary, regressions, log):
        return {"target": target, "ok": False, "why": "a committed regression crashes", "log": log}
    cmd = [binary, corpus, f"-max_total_time={seconds}", "-timeout=10", "-rss_limit_mb=2048",
           "-max_len=65536", f"-artifact_prefix={artifacts}", "-print_final_stats=1",
           f"-dict={os.path.join(HERE, 'dict', target + '.dict')}"]
    if seed is not None:
        cmd.append(f"-seed={seed}")
    r = subprocess.run(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, errors="replace")
    with open(log, "a") as f:
        f.write(r.stdout)
    out = r.stdout
    stat = dict(re.findall(r"^stat::(\w+):\s+(\d+)", out, re.M))
    last = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)/", out)
    figure = {"target": target, "ok": r.returncode == 0, "seconds": seconds,
              "execs": int(stat.get("number_of_executed_units", 0)),
              "execs_per_sec": int(stat.get("average_exec_per_sec", 0)),
              "cov": int(last[-1][0]) if last else None,
              "ft": int(last[-1][1]) if last else None,
              "corpus": int(last[-1][2]) if last else None,
              "rss_mb": int(stat.get("peak_rss_mb", 0)),
              "regressions": len(regressions)}
    if r.returncode != 0:
        found = files_in(artifacts)
        kind = re.search(r"ERROR: (?:libFuzzer|AddressSanitizer|LeakSanitizer): ([\w-]+)", out)
        ub = re.search(r"runtime error: (.*)", out)
        figure["why"] = (kind.group(1) if kind else ub.group(1) if ub else
                         f"exit status {r.returncode}")
        figure["artifact"] = found[-1] if found else None
        figure["log"] = log
    return figure


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("FUZZ_SECONDS", 60)))
    ap.add_argument("--work", default=None)
    ap.add_argument("--seed", type=int, default=None,
                    help="libFuzzer's seed: the same inputs in the same order every run "
                         "(make test uses one, so a brief CI run is repeatable)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="targets fuzzed at once (libFuzzer uses one core each; default: nproc)")
    ap.add_argument("targets", nargs="*")
    a = ap.parse_args()
    work = a.work or os.path.join(os.path.dirname(os.path.abspath(a.bin_dir)), "fuzz-work")
    targets = a.targets or TARGETS
    for target in targets:
        binary = os.path.join(a.bin_dir, target)
        if not os.access(binary, os.X_OK):
            print(f"fuzz: {binary} is missing (make fuzz builds it)", file=sys.stderr)
            return 2
    failed = []
    with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
        runs = [pool.submit(fuzz, os.path.join(a.bin_dir, t), t, a.seconds, work, a.seed)
                for t in targets]
        figures = (run.result() for run in runs)  # in target order, as each ends
        for fig in figures:
            fig["date"] = datetime.date.today().isoformat()
            print(json.dumps({"bench": "fuzz", **fig}), flush=True)
            if not fig["ok"]:
                failed.append(fig)
    for fig in failed:
        print(f"fuzz: {fig['target']} failed ({fig.get('why')}); input: {fig.get('artifact')}; "
              f"log: {fig.get('log')}. Fix it and commit the input to "
              f"tests/fuzz/regressions/{fig['target']}/", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
