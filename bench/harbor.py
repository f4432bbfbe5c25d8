#!/usr/bin/python3
"""Harbor on kiln: one JSON line per figure on stdout (progress on stderr).

  harbor_trial_first_build   one `harbor run -p TASK -a oracle -e e2b` trial whose template
                             does not exist yet: E2B's template build (the task's Dockerfile,
                             FROM a Docker Hub name through --registry-mirror), a sandbox with a
                             day's lease, the oracle's solution, the verifier; the trial's own
                             phases from Harbor's result.json
  harbor_trial_cached        the same trial again: the template is found, nothing is built
  v1_images_same_dockerfile  the peer in the same run: the same Dockerfile and files built with
                             kiln's own POST /v1/images under another key (a first build, then
                             unchanged from the cache), to the image's ready

Harbor 0.25.0 runs from /opt/kiln/harbor-venv (`make harbor-env`, on the machine's Python
>= 3.12); without it the figures are one line saying they are skipped and why. The Docker
Hub image is the tests' stand-in (tests/integration/hub_images.py) in a local registry.
Starts its own kilnd and registry, and removes everything it made.

Usage: /usr/bin/python3 bench/harbor.py [--kilnd PATH] [--image-dir DIR]
Python standard library only.
"""
import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from common import REPO, Api, KilndSession, emit, log
from images import put_blob

sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from hub_images import hub_layout, push_hub_images  # noqa: E402
from oci import Registry  # noqa: E402

HARBOR = Path("/opt/kiln/harbor-venv/bin/harbor")
TASK = Path(REPO) / "tests" / "integration" / "harbor_tasks" / "count-words"


def seconds(phase):
    t = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return round((t(phase["finished_at"]) - t(phase["started_at"])).total_seconds(), 3)


def trial(kilnd, key, task_dir, jobs):
    """One Harbor trial of `task_dir`; its figures."""
    env = dict(os.environ, E2B_API_URL=kilnd.url + "/e2b", E2B_SANDBOX_URL=kilnd.url + "/e2b/sandbox",
               E2B_API_KEY=key, LITELLM_LOCAL_MODEL_COST_MAP="True")
    t0 = time.monotonic()
    p = subprocess.run([str(HARBOR), "run", "-p", str(task_dir), "-a", "oracle", "-e", "e2b",
                        "-n", "1", "-o", str(jobs), "-y"], env=env, capture_output=True, text=True,
                       timeout=900)
    wall = time.monotonic() - t0
    found = sorted(jobs.glob("*/*/result.json"))
    if p.returncode != 0 or not found:
        raise RuntimeError(f"harbor run failed ({p.returncode}): {p.stdout[-1500:]}{p.stderr[-1500:]}")
    r = json.loads(found[-1].read_text())
    reward = ((r.get("verifier_result") or {}).get("rewards") or {}).get("reward")
    if reward != 1.0 or r.get("exception_info"):
        raise RuntimeError(f"the trial did not pass: {reward} {r.get('exception_info')}")
    return {"trialS": seconds(r), "environmentSetupS": seconds(r["environment_setup"]),
            "agentS": seconds(r["agent_execution"]), "verifierS": seconds(r["verifier"]),
            "harborCommandS": round(wall, 3), "reward": reward}


def v1_build(api, dockerfile, files, name):
    """POST /v1/images of `dockerfile` with `files` as its context: seconds to ready."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as t:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    blob = gzip.compress(raw.getvalue(), mtime=0)
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    t0 = time.monotonic()
    put_blob(api, f"/v1/images/context/{digest}", blob)
    image = api.call("POST", "/v1/images", {"name": name, "dockerfile": dockerfile, "context": digest},
                     ok=(200, 201, 202))
    while image["state"] not in ("ready", "failed"):
        time.sleep(0.1)
        image = api.call("GET", f"/v1/images/{image['id']}")
    if image["state"] != "ready":
        raise RuntimeError(f"POST /v1/images failed: {image.get('error')}")
    return round(time.monotonic() - t0, 3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnd", default=os.path.join(REPO, "build", "bin", "kilnd"))
    ap.add_argument("--image-dir", default="/var/lib/kiln/images")
    args = ap.parse_args()
    if not HARBOR.exists():
        emit({"figure": "harbor_trial_first_build", "skipped": "no /opt/kiln/harbor-venv: "
              "Harbor needs Python >= 3.12 and `make harbor-env` found none on this machine"})
        return 0
    work = Path(__import__("tempfile").mkdtemp(prefix="kiln-bench-harbor-"))
    reg = Registry(work / "registry")
    try:
        push_hub_images(reg, hub_layout(work / "hub"), ["ubuntu:24.04"])
        flags = ["--registry-mirror", f"docker.io=http://{reg.host}", "--allow-registry", "127.0.0.1"]
        with KilndSession(args.kilnd, args.image_dir, "kiln-bench-harbor-", kilnd_args=flags) as s:
            admin = s.kilnd.api()
            secret = admin.call("POST", "/v1/keys", {"name": "harbor"}, ok=(200, 201))["secret"]
            e2b_key = "e2b_" + secret[len("kiln_"):]
            # A task of its own each run: the template's name is the hash of its folder.
            task = work / "tasks" / "count-words"
            shutil.copytree(TASK, task)
            nonce = f"# bench run {time.time_ns()}\n"
            dockerfile = (TASK / "environment" / "Dockerfile").read_text() + \
                "RUN mkdir -p /app/out && echo ready > /app/out/.keep\n" + nonce
            (task / "environment" / "Dockerfile").write_text(dockerfile)
            log("harbor: a trial whose template is built first")
            first = trial(s.kilnd, e2b_key, task, work / "jobs1")
            emit({"figure": "harbor_trial_first_build", "unit": "s", **first})
            log("harbor: the same trial, its template found")
            cached = trial(s.kilnd, e2b_key, task, work / "jobs2")
            emit({"figure": "harbor_trial_cached", "unit": "s", **cached})
            log("v1 images: the same Dockerfile under another key")
            other = admin.call("POST", "/v1/keys", {"name": "v1-peer"}, ok=(200, 201))["secret"]
            api = Api(s.kilnd.port, key=other)
            files = {"words.txt": (TASK / "environment" / "words.txt").read_bytes()}
            v1 = dockerfile.replace("FROM ubuntu:24.04", "FROM docker.io/library/ubuntu:24.04")
            first_s = v1_build(api, v1, files, "peer")
            cached_s = v1_build(api, v1, files, "peer")
            emit({"figure": "v1_images_same_dockerfile", "unit": "s", "firstBuildS": first_s,
                  "cachedS": cached_s,
                  "templateBuildInTrialS": round(first["environmentSetupS"] - cached["environmentSetupS"], 3)})
            return s.rc
    finally:
        reg.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main() or 0)
