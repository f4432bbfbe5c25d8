"""Issue 14's shapes against a real kilnd: `GET …/files/list` with glob, hidden and limit (and
the 400s naming each), the exec answer's caps (64 KiB, 1 MiB past a 60 s timeout), and the
Python SDK's `Runtime(api_key, base_url, ...)`, `create(wait=)`, `stop(wait=)`,
`files.list`/`files.glob`."""
import sys
from pathlib import Path

import pytest

from client import assert_error

SDK_DIR = Path(__file__).resolve().parents[2] / "sdk" / "python"
sys.path.insert(0, str(SDK_DIR))
import kiln  # noqa: E402
from kiln import Runtime  # noqa: E402

TREE = ("mkdir -p /workspace/t/a/b /workspace/t/.hid && cd /workspace/t && "
        "touch x.csv y.txt a/z.csv a/b/w.csv .hid/h.csv .top.csv")


@pytest.fixture(scope="module")
def tree(api, sid):
    api.sh(sid, TREE)  # asserts exit 0
    return sid


def _list(api, sid, **query):
    return api.ok("GET", f"/v1/sandboxes/{sid}/files/list", query={"path": "/workspace/t", **query})


def _rel(answer):
    return sorted(e["path"].replace("/workspace/t/", "") for e in answer["data"])


def test_files_list_glob_spans_folders(api, tree):
    assert _rel(_list(api, tree, glob="**/*.csv")) == [".hid/h.csv", ".top.csv", "a/b/w.csv", "a/z.csv",
                                                       "x.csv"]
    assert _rel(_list(api, tree, glob="*.csv")) == [".top.csv", "x.csv"]
    assert _rel(_list(api, tree, glob="a/*.csv")) == ["a/z.csv"]
    assert _rel(_list(api, tree, glob="./*/z.csv")) == ["a/z.csv"]
    # An explicit depth wins over the pattern's reach.
    assert _rel(_list(api, tree, glob="**/*.csv", depth=2)) == [".hid/h.csv", ".top.csv", "a/z.csv", "x.csv"]


def test_files_list_hidden_false_leaves_out_dot_names_and_their_contents(api, tree):
    everything = _rel(_list(api, tree, depth=3))
    assert ".hid" in everything and ".hid/h.csv" in everything and ".top.csv" in everything
    shown = _rel(_list(api, tree, depth=3, hidden="false"))
    assert not [p for p in shown if p.startswith(".") or "/." in p], shown
    assert set(shown) == {p for p in everything if not p.startswith(".")}
    assert _rel(_list(api, tree, glob="**/*.csv", hidden="false")) == ["a/b/w.csv", "a/z.csv", "x.csv"]


def test_files_list_limit(api, tree):
    full = _list(api, tree, depth=3)
    assert "truncated" not in full
    two = _list(api, tree, depth=3, limit=2)
    assert len(two["data"]) == 2 and two["truncated"] is True
    assert [e["path"] for e in two["data"]] == [e["path"] for e in full["data"][:2]]
    enough = _list(api, tree, depth=3, limit=1000)
    assert enough["truncated"] is False and len(enough["data"]) == len(full["data"])


@pytest.mark.parametrize("query, field", [
    ({"glob": ""}, "query.glob"),
    ({"glob": "/abs/*.py"}, "query.glob"),
    ({"glob": "a[b"}, "query.glob"),
    ({"hidden": "no"}, "query.hidden"),
    ({"limit": "0"}, "query.limit"),
    ({"limit": "10001"}, "query.limit"),
    ({"limit": "ten"}, "query.limit"),
    ({"depth": "17"}, "query.depth"),
])
def test_files_list_bad_parameters_name_the_field(api, tree, query, field):
    r = api.get(f"/v1/sandboxes/{tree}/files/list", query={"path": "/workspace/t", **query})
    assert_error(r, 400, "invalid_request", mentions=(field,), issue_path=field)


FLOOD = "head -c 2000000 /dev/zero | tr '\\0' a; head -c 2000000 /dev/zero | tr '\\0' b >&2"


def test_exec_answer_caps_64k_then_1m_past_60s(api, sid):
    short = api.exec(sid, command=FLOOD)
    assert (len(short["stdout"]), len(short["stderr"])) == (65536, 65536)
    assert short["stdoutTruncated"] and short["stderrTruncated"] and short["exitCode"] == 0
    at60 = api.exec(sid, command=FLOOD, timeoutMs=60000)
    assert len(at60["stdout"]) == 65536
    long = api.exec(sid, command=FLOOD, timeoutMs=60001)
    assert (len(long["stdout"]), len(long["stderr"])) == (1 << 20, 1 << 20)
    assert long["stdoutTruncated"] and long["stderrTruncated"]
    small = api.exec(sid, command="head -c 100000 /dev/zero | tr '\\0' c", timeoutMs=120000)
    assert len(small["stdout"]) == 100000 and small["stdoutTruncated"] is False


# --- the Python SDK -----------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("RUNTIME_API_URL", "RUNTIME_API_KEY", "KILN_API_URL", "KILN_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KILN_ADMIN_KEY_FILE", "/nonexistent/admin.key")


def test_runtime_positional_key_then_url(kilnd, clean_env, monkeypatch):
    with Runtime(kilnd.admin_key, kilnd.url, timeout=60, max_retries=2, max_connections=4,
                 wait_for_capacity=30) as rt:
        assert rt.max_connections == 4 and rt.base_url == kilnd.url
        sbx = rt.sandboxes.create(vcpu=1, memory_mib=256, labels={"suite": "shapes"})
        try:
            assert sbx.state == "running"
            assert sbx.exec("echo $((6 * 7))").stdout == "42\n"
        finally:
            sbx.stop(wait=False)
        assert rt.sandboxes.get(sbx.id).state == "stopped"
    # The public client's environment names alone are enough.
    monkeypatch.setenv("RUNTIME_API_URL", kilnd.url)
    monkeypatch.setenv("RUNTIME_API_KEY", kilnd.admin_key)
    with Runtime() as rt:
        rt.sandboxes.list(labels={"suite": "shapes"})
    with Runtime("wrong-key", kilnd.url) as rt, pytest.raises(kiln.AuthenticationError):
        rt.sandboxes.list()


def test_create_wait_false_and_files_filters(kilnd, clean_env):
    with Runtime(kilnd.admin_key, kilnd.url) as rt:
        sbx = rt.sandboxes.create(wait=False, vcpu=1, memory_mib=256, labels={"suite": "shapes"})
        try:
            assert sbx.state in ("starting", "running")
            sbx.exec(TREE, check=True)
            found = sorted(e["path"] for e in sbx.files.glob("**/*.csv", "/workspace/t"))
            assert found == ["/workspace/t/.hid/h.csv", "/workspace/t/.top.csv", "/workspace/t/a/b/w.csv",
                             "/workspace/t/a/z.csv", "/workspace/t/x.csv"]
            shown = sbx.files.list("/workspace/t", glob="**/*.csv", hidden=False, limit=2)
            assert len(shown) == 2 and all("/." not in e["path"] for e in shown)
            r = sbx.exec("head -c 2000000 /dev/zero | tr '\\0' a", timeout_ms=90_000)
            assert len(r.stdout) == kiln.contract.exec_output_cap(90_000) == 1 << 20 and r.stdout_truncated
        finally:
            sbx.stop()
