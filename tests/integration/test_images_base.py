"""The base image users expect, and the example code-interpreter image.

Package hosts come from this machine's own pip and npm configuration (never
named here). Where egress re-signs TLS with a site CA (PIP_CERT names its
bundle), the bundle is handed to pip and npm in the sandbox."""
import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "images" / "code_interpreter.py"


def package_hosts():
    from pip._internal.models.index import PyPI
    index = os.environ.get("PIP_INDEX_URL") or PyPI.url
    npm = subprocess.run(["npm", "config", "get", "registry"], capture_output=True, text=True).stdout.strip()
    return sorted({urllib.parse.urlsplit(index).hostname, PyPI.file_storage_domain,
                   urllib.parse.urlsplit(npm).hostname} - {None})


def test_pip_npm_and_python_work_for_user_in_the_base_image(api, sandboxes):
    s = sandboxes.create(network={"internet": True, "allow": package_hosts()})
    ca = ""
    if os.environ.get("PIP_CERT"):
        api.write_file(s["id"], "/workspace/site-ca.pem", Path(os.environ["PIP_CERT"]).read_bytes())
        ca = "/workspace/site-ca.pem"
    pip_cert = f"--cert {ca}" if ca else ""
    npm_ca = f"--cafile {ca}" if ca else ""
    assert api.sh(s["id"], "python --version").startswith("Python 3.")
    r = api.exec(s["id"], command=f"pip install -q --user {pip_cert} iniconfig && python -c 'import iniconfig; print(iniconfig.__file__)'",
                 timeoutMs=240000)
    assert r["exitCode"] == 0, r
    assert r["stdout"].startswith("/workspace/.local/lib/python3"), r
    r = api.exec(s["id"], command=f"pip install -q {pip_cert} tomli && python -c 'import tomli; print(tomli.__file__)'",
                 timeoutMs=240000)
    assert r["exitCode"] == 0, r
    assert r["stdout"].startswith("/workspace/.local/"), r  # PEP 668: a user install, not an error
    r = api.exec(s["id"], command=f"npm install -g --no-fund --no-audit {npm_ca} semver >/dev/null && "
                                  "command -v semver && semver 1.2.3", timeoutMs=240000)
    assert r["exitCode"] == 0, r
    assert r["stdout"] == "/workspace/.npm-global/bin/semver\n1.2.3\n", r


def test_the_code_interpreter_example_builds_and_plots(kilnd, api, tmp_path):
    env = dict(os.environ, KILN_API_URL=kilnd.url, KILN_API_KEY=kilnd.admin_key)
    for k in ("RUNTIME_API_URL", "RUNTIME_API_KEY"):
        env.pop(k, None)
    png = tmp_path / "plot.png"
    p = subprocess.run([sys.executable, str(EXAMPLE), "--out", str(png)], env=env, capture_output=True,
                       text=True, timeout=1200)
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["ok"] is True and summary["plot"] == "200 1.0", summary
    assert png.read_bytes().startswith(b"\x89PNG")
    for lib in ("numpy", "pandas", "matplotlib"):
        assert summary[lib][0].isdigit(), summary
    image = api.ok("GET", f"/v1/images/{summary['image']}")
    assert image["state"] == "ready" and image["source"] == "recipe" and image["warm"] is True


def test_home_user_is_the_workspace_under_its_own_name(api, sandboxes):
    """E2B's clients work in /home/user, kiln's in /workspace: one folder, and
    getcwd() in each reads back the name it was entered by (a symlink would
    say /workspace for both). Forks keep it; the sandbox's root cannot mount."""
    s = sandboxes.create()
    cwd = "python3 -c 'import os; print(os.getcwd())' && node -e 'console.log(process.cwd())'"
    assert api.sh(s["id"], f"cd /home/user && {cwd}") == "/home/user\n/home/user\n"
    assert api.sh(s["id"], cwd) == "/workspace\n/workspace\n"
    api.write_file(s["id"], "/workspace/seen.txt", b"one folder")
    assert api.sh(s["id"], "cat /home/user/seen.txt; echo; stat -c %U /home/user") == "one folder\nuser\n"
    # PID 1 bound it with CAP_SYS_ADMIN, then dropped it from everything.
    r = api.exec(s["id"], command="sudo mount -t tmpfs none /mnt", timeoutMs=30000)
    assert r["exitCode"] != 0, r
    bounds = api.sh(s["id"], "sudo grep -h CapBnd /proc/1/status /proc/self/status")
    for line in bounds.splitlines():
        assert not int(line.split()[1], 16) & (1 << 21), bounds  # CAP_SYS_ADMIN
    fork = api.ok("POST", f"/v1/sandboxes/{s['id']}:fork", json={"count": 1})["sandboxes"][0]
    sandboxes.ids.append(fork["id"])
    assert api.sh(fork["id"], f"cd /home/user && cat seen.txt && echo && {cwd}") == \
        "one folder\n/home/user\n/home/user\n"
