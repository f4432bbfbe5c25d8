#!/opt/kiln/e2b-venv/bin/python
"""E2B's own Python SDK against kilnd's E2B front, beside kiln's own SDK in
the same run (one JSON line per figure on stdout, progress on stderr):

  e2b_create_to_first_command  Sandbox.create() then commands.run("echo ok")
                               with e2b 2.63.0, beside kiln's
                               Sandbox.create() then exec("echo ok")
  e2b_command_warm             commands.run("true") in a running sandbox
                               (envd's Start stream over Connect), beside
                               kiln's exec("true") in the same sandbox
  e2b_envd_start_raw           the probe behind e2b_command_warm: envd's Start
                               sent by a bare http.client loop (Connect+JSON,
                               no SDK) for `bash -l -c true`, which is what
                               commands.run sends, and `bash -c true`, beside
                               kiln's exec of the same two argv:
                               what kilnd's envd adds, what the login shell
                               costs in the sandbox, and (against
                               e2b_command_warm) what E2B's client costs
  e2b_run_code_1plus1          e2b-code-interpreter 2.11.5's run_code("1+1")
                               in a warm context, beside kiln's
                               interpreter.run("1+1") in the same sandbox

The pairs alternate which goes first; the figure is E2B's p50 with kiln's
p50 beside it and the difference: what the E2B front adds.

Starts its own kilnd (free port, temporary state dir) and removes everything.
Run with the venv `make e2b-env` makes (/opt/kiln/e2b-venv): E2B's SDKs are
its only packages; kiln's SDK comes from sdk/python.

Usage: /opt/kiln/e2b-venv/bin/python bench/e2b_clients.py [--kilnd PATH] [--image-dir DIR] [--n N]
"""
import argparse
import http.client
import json
import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "sdk", "python"))
import kiln  # noqa: E402
from common import KilndSession, emit, log  # noqa: E402
from measure import ms, stats  # noqa: E402


def paired(n, a, b):
    """a and b n times each, alternating which goes first; milliseconds. A
    function that returns a number has timed itself (what it returns)."""
    ta, tb = [], []
    for i in range(n):
        for fn, out in ((a, ta), (b, tb)) if i % 2 == 0 else ((b, tb), (a, ta)):
            t0 = time.perf_counter()
            own = fn()
            out.append(own if isinstance(own, float) else ms(time.perf_counter() - t0))
    return ta, tb


def figure(name, what, e2b_ms, kiln_ms):
    e, k = stats(e2b_ms, 2), stats(kiln_ms, 2)
    log(f"{name}: e2b p50 {e['p50']} ms, kiln p50 {k['p50']} ms")
    emit({"bench": name, "unit": "ms", **e, "kilnSdkP50": k["p50"], "kilnSdkP90": k["p90"],
          "frontAddsMs": round(e["p50"] - k["p50"], 2), "what": what})


class RawEnvd:
    """envd's Start and kiln's exec over one keep-alive connection each."""

    def __init__(self, port, sid, envd_token, key):
        self.sid, self.key = sid, key
        self.envd = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.kiln = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983",
                        "X-Access-Token": envd_token, "Content-Type": "application/connect+json"}

    def start(self, args):
        msg = json.dumps({"process": {"cmd": "/bin/bash", "args": args}}).encode()
        self.envd.request("POST", "/e2b/sandbox/process.Process/Start",
                          struct.pack(">BI", 0, len(msg)) + msg, self.headers)
        r = self.envd.getresponse()
        body = r.read()
        if r.status != 200 or b'"end"' not in body:
            raise RuntimeError(f"Start {args}: {r.status} {body[:300]!r}")

    def exec(self, argv):
        self.kiln.request("POST", f"/v1/sandboxes/{self.sid}:exec", json.dumps({"argv": argv}),
                          {"Authorization": "Bearer " + self.key, "Content-Type": "application/json"})
        r = self.kiln.getresponse()
        body = r.read()
        if r.status != 200 or json.loads(body).get("exitCode") != 0:
            raise RuntimeError(f"exec {argv}: {r.status} {body[:300]!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kilnd", default="build/bin/kilnd")
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    ap.add_argument("--n", type=int, default=30)
    args = ap.parse_args()
    import e2b  # noqa: E402  the venv's
    import e2b_code_interpreter  # noqa: E402

    with KilndSession(args.kilnd, args.image_dir, "kiln-bench-e2b-") as s:
        kilnd = s.kilnd
        secret = kilnd.api().call("POST", "/v1/keys", {"name": "bench-e2b"},
                                   ok=(201,))["secret"]
        os.environ.update(E2B_API_URL=kilnd.url + "/e2b", E2B_SANDBOX_URL=kilnd.url + "/e2b/sandbox",
                          E2B_API_KEY="e2b_" + secret[len("kiln_"):])
        rt = kiln.Runtime(secret, kilnd.url)

        def e2b_first():
            t0 = time.perf_counter()
            sbx = e2b.Sandbox.create(template="base", timeout=300, allow_internet_access=False)
            r = sbx.commands.run("echo ok")
            took = ms(time.perf_counter() - t0)
            assert r.stdout == "ok\n", r
            sbx.kill()
            return took

        def kiln_first():
            t0 = time.perf_counter()
            sbx = kiln.Sandbox.create(client=rt, image="base")
            r = sbx.exec("echo ok")
            took = ms(time.perf_counter() - t0)
            assert r.stdout == "ok\n", r
            sbx.stop()
            return took

        e2b_first(), kiln_first()  # warm both paths once
        e, k = paired(max(10, args.n // 2), e2b_first, kiln_first)
        figure("e2b_create_to_first_command",
               "create then the first command's answer: e2b's Sandbox.create(template='base', "
               "allow_internet_access=False) + commands.run('echo ok') beside kiln's "
               "Sandbox.create(image='base') + exec('echo ok'): the same launch (the image's "
               "snapshot restored), offline; the kill or stop after each is not timed", e, k)

        sbx = e2b_code_interpreter.Sandbox.create(template="base", timeout=600)
        ksbx = kiln.Sandbox.connect(sbx.sandbox_id, client=rt)
        e, k = paired(args.n, lambda: sbx.commands.run("true"), lambda: ksbx.exec("true"))
        figure("e2b_command_warm", "commands.run('true') (envd Start over Connect) beside kiln's "
               "exec('true'), same running sandbox", e, k)

        raw = RawEnvd(kilnd.port, sbx.sandbox_id, sbx._envd_access_token, secret)
        login, login_exec = paired(args.n, lambda: raw.start(["-l", "-c", "true"]),
                                   lambda: raw.exec(["bash", "-l", "-c", "true"]))
        plain, plain_exec = paired(args.n, lambda: raw.start(["-c", "true"]),
                                   lambda: raw.exec(["bash", "-c", "true"]))
        st = {k: stats(v, 2)["p50"] for k, v in (("login", login), ("loginExec", login_exec),
                                                  ("plain", plain), ("plainExec", plain_exec))}
        log(f"e2b_envd_start_raw: {st}")
        emit({"bench": "e2b_envd_start_raw", "unit": "ms", **stats(login, 2),
              "kilnExecSameLineP50": st["loginExec"], "startBashCP50": st["plain"],
              "kilnExecBashCP50": st["plainExec"],
              "envdAddsMs": round(st["plain"] - st["plainExec"], 2),
              "loginShellCostsMs": round(st["plain"] and st["login"] - st["plain"], 2),
              "what": "envd Start by a bare client (Connect+JSON) of bash -l -c true (what "
                      "commands.run sends) and bash -c true, beside kiln's exec of the same "
                      "argv (the same process tree) in the same sandbox"})

        def e2b_run():
            ex = sbx.run_code("1+1")
            assert ex.text == "2", ex

        def kiln_run():
            r = ksbx.interpreter.run("1+1")
            assert r["results"][0]["data"]["text/plain"] == "2", r

        e2b_run(), kiln_run()  # each starts its context
        e, k = paired(args.n, e2b_run, kiln_run)
        figure("e2b_run_code_1plus1", "run_code('1+1') in a warm context (port 49999) beside "
               "kiln's interpreter.run('1+1'), same sandbox", e, k)
        sbx.kill()


if __name__ == "__main__":
    main()
