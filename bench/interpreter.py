#!/usr/bin/python3
"""The stateful interpreter: one JSON line per figure on stdout (progress on stderr).

  interpreter_run_1plus1     POST :interpreter:run {code: "1+1"} in a warm
                             python context (kiln's kernel, a background
                             process of the sandbox), beside a plain
                             POST :exec of `python3 -c 1+1` in the same run
  interpreter_first_run      the first run in a fresh sandbox: starting the
                             kernel (python3 -u -c <kernel>) and its answer
  interpreter_plot           a matplotlib line plot to its PNG result; the
                             base image has no matplotlib, so pip installs it
                             for the user in a sandbox allowed to reach the
                             package index (no figure if it cannot)

Starts its own kilnd (free port, temporary state dir) and removes everything.

Usage: /usr/bin/python3 bench/interpreter.py [--kilnd PATH] [--image-dir DIR] [--n N]
Python standard library only.
"""
import argparse
import base64
import os
import time
import urllib.parse

from common import KilndSession, emit, log
from measure import ms, stats


def run(api, sid, code):
    r = api.call("POST", f"/v1/sandboxes/{sid}/interpreter:run", {"code": code})
    if r["status"] != "ok":
        raise RuntimeError(f"interpreter run of {code!r}: {r}")
    return r


def has_matplotlib(api, sid):
    r = run(api, sid, "import importlib, importlib.util, site; importlib.invalidate_caches(); "
                      "importlib.util.find_spec('matplotlib') is not None")
    return r["results"][0]["data"]["text/plain"] == "True"


def package_hosts():
    """The package index's hosts (pip's configured index, PyPI's files)."""
    from pip._internal.models.index import PyPI
    index = os.environ.get("PIP_INDEX_URL") or PyPI.url
    return sorted({urllib.parse.urlsplit(index).hostname, PyPI.file_storage_domain} - {None})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kilnd", default="build/bin/kilnd")
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--n", type=int, default=30)
    args = ap.parse_args()
    with KilndSession(args.kilnd, args.image_dir, "kiln-bench-interpreter-") as s:
        kilnd = s.kilnd
        api = kilnd.api()
        firsts = []
        for _ in range(3):
            sid = kilnd.create(api, {})
            t0 = time.perf_counter()
            first = run(api, sid, "1+1")
            firsts.append(ms(time.perf_counter() - t0))
            assert first["contextStarted"], first
            kilnd.stop_sandbox(api, sid)
        sid = kilnd.create(api, {})
        run(api, sid, "1+1")
        runs, execs = [], []
        for _ in range(args.n):
            t0 = time.perf_counter()
            r = run(api, sid, "1+1")
            runs.append(ms(time.perf_counter() - t0))
            if r["results"][0]["data"]["text/plain"] != "2":
                raise RuntimeError(f"1+1 answered {r}")
            t0 = time.perf_counter()
            e = api.call("POST", f"/v1/sandboxes/{sid}:exec", {"argv": ["python3", "-c", "print(1+1)"]})
            execs.append(ms(time.perf_counter() - t0))
            if e["stdout"] != "2\n":
                raise RuntimeError(f"exec answered {e}")
        run_stats, exec_stats = stats(runs, 1), stats(execs, 1)
        log(f"interpreter: run p50 {run_stats['p50']} ms, exec p50 {exec_stats['p50']} ms")
        emit({"bench": "interpreter_run_1plus1", "unit": "ms", **run_stats, "kiln": True,
              "execPython1plus1P50": exec_stats["p50"],
              "ratioToExec": round(run_stats["p50"] / exec_stats["p50"], 3),
              "what": "POST :interpreter:run {code: '1+1'} in a warm python context, request to "
                      "answer, beside POST :exec of python3 -c 'print(1+1)' in the same sandbox"})
        emit({"bench": "interpreter_first_run", "unit": "ms", **stats(firsts, 1), "kiln": True,
              "what": "the first POST :interpreter:run of a fresh sandbox: the python kernel "
                      "started as a background process, then 1+1 answered"})
        plot_sid = sid
        if not has_matplotlib(api, sid):
            # The base image has none: pip installs it for the user in a
            # sandbox allowed to reach the package index.
            plot_sid = kilnd.create(api, {"network": {"internet": True, "allow": package_hosts()}})
            cert = ""
            if os.environ.get("PIP_CERT"):
                pem = base64.b64encode(open(os.environ["PIP_CERT"], "rb").read()).decode()
                api.call("POST", f"/v1/sandboxes/{plot_sid}:exec",
                         {"command": "base64 -d > /workspace/ca.pem", "stdin": pem})
                cert = "--cert /workspace/ca.pem"
            e = api.call("POST", f"/v1/sandboxes/{plot_sid}:exec",
                         {"command": f"pip install -q --user {cert} matplotlib", "timeoutMs": 600000})
            if e.get("exitCode") != 0:
                log(f"interpreter: pip cannot install matplotlib: {e.get('stderr', '')[-300:]}")
        if has_matplotlib(api, plot_sid):
            run(api, plot_sid, "import matplotlib.pyplot as plt")
            plots = []
            for _ in range(max(5, args.n // 3)):
                t0 = time.perf_counter()
                r = run(api, plot_sid, "plt.plot(range(100))\nNone")
                plots.append(ms(time.perf_counter() - t0))
                if not any("image/png" in x["data"] for x in r["results"]):
                    raise RuntimeError(f"no figure: {r}")
            emit({"bench": "interpreter_plot", "unit": "ms", **stats(plots, 1), "kiln": True,
                  "ratioTo1plus1": round(stats(plots, 1)["p50"] / run_stats["p50"], 3),
                  "what": "a matplotlib line plot of 100 points to its image/png result (pyplot "
                          "imported before), beside interpreter_run_1plus1"})
        else:
            log("interpreter: no matplotlib, and pip could not install it; no plot figure")
        if plot_sid != sid:
            kilnd.stop_sandbox(api, plot_sid)
        kilnd.stop_sandbox(api, sid)


if __name__ == "__main__":
    main()
