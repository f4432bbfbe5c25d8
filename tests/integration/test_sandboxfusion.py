"""kilnd's SandboxFusion front (src/api/sandboxfusion) with SandboxFusion's own
client (`sandbox-fusion` 0.3.7 from PyPI) and verl's own reward code
(check_correctness from verl==0.9.1, its sandbox_fusion folder loaded from the
wheel's files: verl's package imports torch, which the grader does not need).

The language image is `make sandboxfusion-image`'s (the core set), built by
examples/images/sandboxfusion.py under the admin key of a kilnd whose state
folder the machine keeps (KILN_SF_STATE_DIR): built once per machine, again
only when the recipe changes, and served to the tests' own (non-admin) key.
Each core language gets a correct, a wrong, a timing-out, a crashing and (compiled ones) a
non-compiling program, and each must get verl's verdict: True, False, -3,
-2, -4. Then the refusals (unknown language, a missing field, a wrong key,
a timeout past kiln's limit), files, the memory limit, and programs that
flood or fork-bomb next to a correct one.
"""
import base64
import concurrent.futures
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from client import Client
from conftest import start_kilnd, stop_kilnd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python"))
from kiln import Runtime  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
IMAGE_SCRIPT = REPO / "examples" / "images" / "sandboxfusion.py"
UNREACHABLE = ("Failed to establish a new connection", "Temporary failure in name resolution",
               "Network is unreachable", "Could not fetch URL", "Connection refused",
               "Max retries exceeded", "ConnectTimeoutError", "ReadTimeoutError")
pytestmark = pytest.mark.xdist_group("sandboxfusion")


# The machine's SandboxFusion state: a kilnd folder kept between runs, so the
# language image is built once per machine and again only when its recipe
# changes (make sandboxfusion-image uses the same folder).
SF_STATE = Path(os.environ.get("KILN_SF_STATE_DIR", "/var/lib/kiln/cache/sandboxfusion"))


@pytest.fixture(scope="module")
def sf_daemon(tmp_path_factory):
    """A kilnd on the machine's SandboxFusion state, logging to a file of this run's. When
    another kilnd holds that state (a second test run at once), one of its own on a
    temporary folder, which builds the image again."""
    log = tmp_path_factory.mktemp("sf") / "kilnd.log"
    SF_STATE.mkdir(parents=True, exist_ok=True)
    try:
        d = start_kilnd(SF_STATE, log_path=log)
    except RuntimeError as e:
        if "another kilnd uses this state directory" not in str(e):
            raise
        d = start_kilnd(tmp_path_factory.mktemp("sf-state"), log_path=log)
    d.log_path = str(log)
    yield d
    stop_kilnd(d)


@pytest.fixture(scope="module")
def sf_admin(sf_daemon):
    return Client(sf_daemon.url, key=sf_daemon.admin_key)


@pytest.fixture(scope="module")
def sf_key(sf_admin):
    """A key of the test's own, not an admin: the language image it runs is the operator's."""
    return sf_admin.ok("POST", "/v1/keys", json={"name": "sandboxfusion-tests"})["secret"]


def ensure_image(daemon, key, *args, timeout=3600):
    env = dict(os.environ, KILN_API_URL=daemon.url, KILN_API_KEY=key)
    for k in ("RUNTIME_API_URL", "RUNTIME_API_KEY"):
        env.pop(k, None)
    p = subprocess.run([sys.executable, str(IMAGE_SCRIPT), *args, "--quiet"], env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr[-4000:]}"
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def sf_image(sf_daemon):
    """The core language image under the admin key, as `make sandboxfusion-image`: built the
    first time on this machine, found by its recipe's digest ever after."""
    first = ensure_image(sf_daemon, sf_daemon.admin_key, "--set", "core")
    again = ensure_image(sf_daemon, sf_daemon.admin_key, "--set", "core", timeout=300)
    assert again["image"] == first["image"] and again["built"] is False, (first, again)
    return first


@pytest.fixture(scope="module")
def sf(sf_daemon, sf_key):
    """(base URL of the front for the test's key, a client without credentials)."""
    return f"{sf_daemon.url}/sandboxfusion/{sf_key}", Client(sf_daemon.url, timeout=300)


@pytest.fixture(scope="module")
def sf_python():
    """(a venv's python holding sandbox-fusion==0.3.7, the folder holding
    verl 0.9.1's sandbox_fusion reward package as `verl_sandbox_fusion`)."""
    d = tempfile.mkdtemp(prefix="kiln-sf-venv-")
    try:
        subprocess.run([sys.executable, "-m", "venv", d], check=True, timeout=120)
        pip = subprocess.run([f"{d}/bin/pip", "install", "-q", "--disable-pip-version-check",
                              "sandbox-fusion==0.3.7", "requests"], capture_output=True, text=True,
                             timeout=900)
        words = pip.stdout + pip.stderr
        if pip.returncode != 0 and any(u in words for u in UNREACHABLE):
            pytest.skip(f"pip cannot reach the package index: {words[-300:]}")
        assert pip.returncode == 0, words
        wheels = Path(d) / "wheels"
        dl = subprocess.run([f"{d}/bin/pip", "download", "-q", "--no-deps", "--disable-pip-version-check",
                             "verl==0.9.1", "-d", str(wheels)], capture_output=True, text=True, timeout=600)
        assert dl.returncode == 0, dl.stdout + dl.stderr
        pkg = Path(d) / "verlpkg" / "verl_sandbox_fusion"
        pkg.mkdir(parents=True)
        with zipfile.ZipFile(glob.glob(str(wheels / "verl-0.9.1-*.whl"))[0]) as z:
            for name in ("__init__.py", "utils.py"):
                (pkg / name).write_bytes(z.read(f"verl/utils/reward_score/sandbox_fusion/{name}"))
        yield f"{d}/bin/python", str(pkg.parent)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_in_venv(sf_python, script, timeout=900):
    python, verl_dir = sf_python
    env = dict(os.environ, PYTHONPATH=verl_dir)
    p = subprocess.run([python, "-c", textwrap.dedent(script)], env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr[-4000:]}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def post(sf, route, body):
    url, client = sf
    path = url.split("://", 1)[1].split("/", 1)[1]
    return client.post(f"/{path}/{route}", json=body)


def run_code(sf, **body):
    return post(sf, "run_code", body)


# Each core language: a program that doubles the number on stdin, and its
# wrong, looping, crashing and (compiled languages) non-compiling kin.
PROGRAMS = {
    "python": {
        "correct": "n = int(input())\nprint(n * 2)\n",
        "wrong": "n = int(input())\nprint(n * 2 + 1)\n",
        "timeout": "while True:\n    pass\n",
        "crash": "n = int(input())\nprint(1 // (n - n))\n",
    },
    "cpp": {
        "correct": "#include <iostream>\nint main(){long n; std::cin >> n; std::cout << n * 2 << std::endl;}\n",
        "wrong": "#include <iostream>\nint main(){long n; std::cin >> n; std::cout << n * 3 << std::endl;}\n",
        "timeout": "int main(){volatile unsigned x = 0; for (;;) x++;}\n",
        "crash": "#include <cstdlib>\nint main(){std::abort();}\n",
        "noncompile": "int main(){ return undefined_name; }\n",
    },
    "java": {
        "correct": "import java.util.*;\npublic class Main { public static void main(String[] a) {"
                   " long n = new Scanner(System.in).nextLong(); System.out.println(n * 2); } }\n",
        "wrong": "public class Main { public static void main(String[] a) { System.out.println(0); } }\n",
        "timeout": "public class Main { public static void main(String[] a) { while (true) {} } }\n",
        "crash": "public class Main { public static void main(String[] a) {"
                 " throw new RuntimeException(\"boom\"); } }\n",
        "noncompile": "public class Main { public static void main(String[] a) { int x = \"s\" } }\n",
    },
    "go": {
        "correct": "package main\nimport \"fmt\"\nfunc main() { var n int; fmt.Scan(&n); fmt.Println(n * 2) }\n",
        "wrong": "package main\nimport \"fmt\"\nfunc main() { fmt.Println(-1) }\n",
        "timeout": "package main\nfunc main() { for {} }\n",
        "crash": "package main\nfunc main() { panic(\"boom\") }\n",
        "noncompile": "package main\nfunc main() { x := 1 }\n",
    },
    "nodejs": {
        "correct": "const n = parseInt(require('fs').readFileSync(0, 'utf8')); console.log(n * 2);\n",
        "wrong": "console.log('nope');\n",
        "timeout": "while (true) {}\n",
        "crash": "throw new Error('boom');\n",
    },
    "rust": {
        "correct": "use std::io::Read;\nfn main() { let mut s = String::new();"
                   " std::io::stdin().read_to_string(&mut s).unwrap();"
                   " let n: i64 = s.trim().parse().unwrap(); println!(\"{}\", n * 2); }\n",
        "wrong": "fn main() { println!(\"0\"); }\n",
        "timeout": "fn main() { let mut x: u64 = 0; loop { x = x.wrapping_add(1);"
                   " if x == 0 { println!(\"{}\", x); } } }\n",
        "crash": "fn main() { panic!(\"boom\"); }\n",
        "noncompile": "fn main() { let x: i32 = \"s\"; }\n",
    },
    "bash": {
        "correct": "read n\necho $((n * 2))\n",
        "wrong": "read n\necho $((n * 2 + 1))\n",
        "timeout": "while :; do :; done\n",
        "crash": "exit 3\n",
    },
}
EXPECTED = {"correct": True, "wrong": False, "timeout": -3, "crash": -2, "noncompile": -4}


@pytest.mark.parametrize("language", sorted(PROGRAMS))
def test_verl_scores_each_outcome_of_a_core_language(sf_image, sf, sf_python, language):
    url, _ = sf
    programs = PROGRAMS[language]
    out = run_in_venv(sf_python, f"""
        import json, threading
        from verl_sandbox_fusion.utils import check_correctness
        programs = {json.dumps(programs)}
        results = {{}}
        gate = threading.Semaphore(3)
        def grade(kind, code):
            res, meta = check_correctness({url + "/run_code"!r}, {{"inputs": ["21\\n"], "outputs": ["42\\n"]}},
                                          code, timeout=20, memory_limit_mb=1024, language={language!r},
                                          concurrent_semaphore=gate)
            results[kind] = [res, [m.get("status") for m in meta], [m.get("api_request_error") for m in meta],
                             [(m.get("stderr") or m.get("compile_stderr") or "")[-300:] for m in meta]]
        threads = [threading.Thread(target=grade, args=kv) for kv in programs.items()]
        [t.start() for t in threads]
        [t.join() for t in threads]
        print(json.dumps(results))
    """)
    for kind, code in programs.items():
        res, statuses, errors, stderr = out[kind]
        assert res == [EXPECTED[kind]], (language, kind, res, statuses, errors, stderr)


def test_compute_score_grades_a_python_completion(sf_image, sf, sf_python):
    url, _ = sf
    out = run_in_venv(sf_python, f"""
        import json
        from verl_sandbox_fusion import compute_score
        cases = {{"inputs": ["1\\n", "5\\n", "-3\\n"], "outputs": ["2\\n", "10\\n", "-6\\n"]}}
        good = "```python\\nprint(int(input()) * 2)\\n```"
        half = "```python\\nn = int(input())\\nprint(n * 2 if n > 0 else 0)\\n```"
        s1, _ = compute_score({url + "/run_code"!r}, None, 1024, good, json.dumps(cases))
        s2, _ = compute_score({url + "/run_code"!r}, None, 1024, half, json.dumps(cases), continuous=True)
        print(json.dumps([s1, s2]))
    """)
    assert out[0] == 1.0, out
    assert 0 < out[1] < 1, out


def test_sandbox_fusion_client_runs_code_with_files(sf_image, sf, sf_python):
    url, _ = sf
    out = run_in_venv(sf_python, f"""
        import base64, json
        from sandbox_fusion import (RunCodeRequest, RunStatus, run_code, set_endpoint,
                                    summary_run_code_result, SummaryMapping)
        set_endpoint({url!r})
        r = run_code(RunCodeRequest(
            code="data = open('in/data.txt').read()\\nopen('out.txt', 'w').write(data.upper())\\nprint(len(data))",
            language="python", files={{"in/data.txt": base64.b64encode(b"hello").decode()}},
            fetch_files=["out.txt", "missing.txt"]), max_attempts=1)
        c = run_code(RunCodeRequest(code="int main() {{ return x; }}", language="cpp"), max_attempts=1)
        m = SummaryMapping(Success="ok", Failed="failed", CompileFailed="compile_failed")
        try:
            run_code(RunCodeRequest(code="x", language="cuda"), max_attempts=1)
            err = None
        except Exception as e:
            err = str(e)
        print(json.dumps({{"status": r.status, "stdout": r.run_result.stdout, "files": r.files,
                          "compile": summary_run_code_result(c, m), "cstatus": c.status, "cuda": err}}))
    """)
    assert out["status"] == "Success" and out["stdout"] == "5\n", out
    assert base64.b64decode(out["files"]["out.txt"]) == b"HELLO", out
    assert "missing.txt" not in out["files"], out
    assert out["compile"] == "compile_failed" and out["cstatus"] == "Failed", out
    assert "cuda" in out["cuda"] and "GPU" in out["cuda"], out


def test_run_jupyter_runs_cells_in_one_kernel(sf_image, sf, sf_python):
    url, _ = sf
    out = run_in_venv(sf_python, f"""
        import json
        from sandbox_fusion import RunJupyterRequest, run_jupyter, set_endpoint
        set_endpoint({url!r})
        r = run_jupyter(RunJupyterRequest(cells=["a = 20", "a * 2 + 2", "print('out', a)", "1 / 0"]),
                        max_attempts=1)
        t = run_jupyter(RunJupyterRequest(cells=["import time; time.sleep(30)"], total_timeout=3),
                        max_attempts=1)
        print(json.dumps({{"r": r.model_dump(mode="json") if hasattr(r, "model_dump") else r.dict(),
                          "t": t.model_dump(mode="json") if hasattr(t, "model_dump") else t.dict()}}))
    """)
    r, t = out["r"], out["t"]
    assert r["status"] == "Success" and len(r["cells"]) == 4, r
    assert r["cells"][1]["display"] == [{"text/plain": "42"}], r
    assert r["cells"][2]["stdout"] == "out 20\n", r
    assert r["cells"][3]["error"][0]["ename"] == "ZeroDivisionError", r
    assert t["status"] == "Failed" and t["driver"]["status"] == "TimeLimitExceeded" and t["cells"] == [], t


def test_ping_and_refusals_in_sandbox_fusions_shape(sf, sf_key):
    url, client = sf
    base = "/sandboxfusion/" + sf_key
    r = client.get(base + "/v1/ping")
    assert r.status == 200 and r.json() == "pong", r
    # An unknown language and a GPU one: SandboxError naming the language.
    a = run_code(sf, code="x", language="cobol")
    assert a.status == 200 and a.json()["status"] == "SandboxError", a
    assert "cobol" in a.json()["message"] and "python" in a.json()["message"], a
    a = run_code(sf, code="x", language="python_gpu")
    assert a.json()["status"] == "SandboxError" and "python_gpu" in a.json()["message"], a
    # A missing field, a timeout past kiln's limit: 400, the field named.
    a = run_code(sf, language="python")
    assert a.status == 400 and a.json()["status"] == "SandboxError", a
    assert "body.code" in a.json()["message"], a
    a = run_code(sf, code="print(1)", language="python", run_timeout=100000)
    assert a.status == 400 and "body.run_timeout" in a.json()["message"], a
    # Anything else under the prefix: SandboxFusion's shape, never the key.
    r = client.get(base + "/run_code")
    assert r.status == 404 and r.json()["status"] == "SandboxError", r
    assert sf_key not in r.body.decode(), r


def test_a_wrong_key_is_refused_and_no_key_is_logged(sf, sf_key, sf_daemon, sf_admin):
    _, client = sf
    wrong = "kiln_" + "0" * 40
    r = client.post(f"/sandboxfusion/{wrong}/run_code", json={"code": "print(1)", "language": "python"})
    assert r.status == 401 and r.json()["status"] == "SandboxError", r
    assert r.json()["run_result"] is None, r
    r = client.get(f"/sandboxfusion/{wrong}/v1/ping")
    assert r.status == 401, r
    log = Path(sf_daemon.log_path).read_text(errors="replace")
    assert "/sandboxfusion/{key}/run_code" in log
    for secret in (sf_key, wrong):
        assert secret not in log
        assert secret[len("kiln_"):] not in log
    metrics = sf_admin.get("/metrics").body.decode()
    assert sf_key not in metrics and wrong not in metrics


def test_memory_limit_keeps_sandbox_fusions_meaning(sf_image, sf):
    hog = "b = bytearray(600 * 1024 * 1024)\nprint(len(b))\n"
    small = run_code(sf, code=hog, language="python", memory_limit_MB=256).json()
    assert small["status"] == "Failed" and small["run_result"]["return_code"] != 0, small
    assert "MemoryError" in small["run_result"]["stderr"], small
    big = run_code(sf, code=hog, language="python", memory_limit_MB=1536).json()
    assert big["status"] == "Success", big
    # run_jupyter: the kernel's own limit, as SandboxFusion starts its kernel under one.
    j = post(sf, "run_jupyter", {"cells": ["b = bytearray(600 * 1024 * 1024)",
                                           "len(bytearray(16 * 1024 * 1024))"],
                                 "memory_limit_MB": 512}).json()
    assert j["status"] == "Success" and len(j["cells"]) == 2, j
    assert j["cells"][0]["error"][0]["ename"] == "MemoryError", j
    assert j["cells"][1]["display"] == [{"text/plain": "16777216"}], j


def test_flood_and_fork_bomb_touch_only_their_own_request(sf_image, sf):
    jobs = {
        "flood": dict(code="import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", language="python",
                      run_timeout=20),
        "forks": dict(code=":(){ :|:& };:\nsleep 5\n", language="bash", run_timeout=10),
        "disk": dict(code="dd if=/dev/zero of=big bs=1M count=100000 2>&1 | tail -1; echo done\n",
                     language="bash", run_timeout=20),
        "good": dict(code="print(int(input()) * 2)\n", language="python", stdin="21\n"),
    }
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        futures = {k: pool.submit(run_code, sf, **body) for k, body in jobs.items()}
        answers = {k: f.result() for k, f in futures.items()}
    for k, a in answers.items():
        assert a.status == 200, (k, a)
    good = answers["good"].json()
    assert good["status"] == "Success" and good["run_result"]["stdout"] == "42\n", good
    flood = answers["flood"].json()
    assert flood["status"] == "Failed", {k: v for k, v in flood.items() if k != "run_result"}
    assert len(flood["run_result"]["stdout"]) <= 8 << 20
    assert answers["forks"].json()["status"] in ("Failed", "Success"), answers["forks"].json()
    # And the next program runs as if nothing happened.
    again = run_code(sf, **jobs["good"]).json()
    assert again["status"] == "Success" and again["run_result"]["stdout"] == "42\n", again


def test_a_keys_own_language_image_serves_that_key_alone(sf_image, sf, sf_daemon, sf_admin):
    """The operator's image (an admin key's) serves every key; a key that builds its own
    image of that name gets its own, and no other key ever does."""
    mine = sf_admin.ok("POST", "/v1/keys", json={"name": "sf-own-image"})["secret"]
    Runtime(sf_daemon.url, mine).images.build(name="sandboxfusion", recipe={"env": {"KILN_MARK": "own"},
                                                                          "workdir": "/workspace"},
                                              timeout=600)
    probe = {"code": "import os\nprint(os.environ.get('KILN_MARK', 'operator'))", "language": "python"}
    client = Client(sf_daemon.url, timeout=300)
    own = client.post(f"/sandboxfusion/{mine}/run_code", json=probe).json()
    assert own["status"] == "Success" and own["run_result"]["stdout"] == "own\n", own
    other = run_code(sf, **probe).json()
    assert other["status"] == "Success" and other["run_result"]["stdout"] == "operator\n", other
