"""Self-test of nethosts.TestHosts from the host; needs root, no kilnd."""
import base64
import hashlib
import http.client
import io
import json
import os
import re
import subprocess
import tarfile
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

import nethosts
from nethosts import TestHosts, test_hosts_available

_reason = test_hosts_available()
# The tests' own hosts have fixed addresses: one module at a time uses them.
pytestmark = [pytest.mark.skipif(_reason is not None, reason=_reason or ""),
              pytest.mark.xdist_group("nethosts")]

# pip and git must trust exactly the test CA and go direct: drop proxies and the
# CA-bundle overrides (GIT_SSL_CAINFO beats `-c http.sslCAInfo`, REQUESTS_CA_BUNDLE
# beats pip's --cert) that a machine's environment may carry.
_CLEAN_ENV = {k: v for k, v in os.environ.items()
              if "proxy" not in k.lower() and not k.startswith(("PIP_", "GIT_"))
              and k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")}


@pytest.fixture(scope="module")
def hosts():
    with TestHosts() as h:
        yield h


def _get(hosts, addr, path, name=None, https=True, port=None, method="GET"):
    """(status, headers, body) of one request to `addr`, Host/SNI = name."""
    name = name or addr
    if https:
        assert name == addr, "use _get_name for HTTPS to a name"
        c = http.client.HTTPSConnection(addr, port or 443, timeout=10, context=hosts.ssl_context())
    else:
        c = http.client.HTTPConnection(addr, port or 80, timeout=10)
    try:
        c.request(method, path, headers={"Host": name})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def _get_name(hosts, name, path):
    """HTTPS to the address the resolver file gives `name`, with SNI/Host = name."""
    import socket
    addr = hosts.addr(name)
    s = socket.create_connection((addr, 443), timeout=10)
    tls = hosts.ssl_context().wrap_socket(s, server_hostname=name)
    c = http.client.HTTPSConnection(name, 443, timeout=10)
    c.sock = tls
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def test_whoami_http_and_https_on_every_address(hosts):
    for addr in hosts.addrs:
        assert _get(hosts, addr, "/whoami", "x.test", https=False)[2] == f"{addr} x.test\n".encode()
        assert _get(hosts, addr, "/whoami")[2] == f"{addr} {addr}\n".encode()
    status, _, body = _get_name(hosts, "deep.api.allowed.test", "/whoami")
    assert (status, body) == (200, b"198.51.100.11 deep.api.allowed.test\n")
    assert _get_name(hosts, "pkgs.test", "/whoami")[2] == b"198.51.100.10 pkgs.test\n"


def test_hits_record_address_host_path_method(hosts):
    hosts.clear_hits()
    _get(hosts, "198.51.100.12", "/whoami?x=1", "other.test", https=False, method="POST")
    _get_name(hosts, "rebind.test", "/nothing-here")
    hits = hosts.wait_for_hits(count=2)
    assert [(h["addr"], h["host"], h["path"], h["method"]) for h in hits] == [
        ("198.51.100.12", "other.test", "/whoami?x=1", "POST"),
        ("198.51.100.13", "rebind.test", "/nothing-here", "GET"),
    ]
    assert hits[1]["sni"] == "rebind.test" and hits[1]["scheme"] == "https"
    hosts.clear_hits()
    assert hosts.hits() == [] and hosts.connections() == []


def test_canary_records_hits(hosts):
    hosts.clear_hits()
    assert _get(hosts, "127.0.0.1", "/x", "private.test", https=False, port=hosts.canary_port)[0] == 404
    assert [(h["addr"], h["host"], h["path"]) for h in hosts.hits()] == [("127.0.0.1", "private.test", "/x")]
    assert [c["addr"] for c in hosts.connections()] == ["127.0.0.1"]


def test_bytes_and_drip(hosts):
    status, headers, body = _get(hosts, "198.51.100.10", "/bytes/1000001")
    assert status == 200 and headers["Content-Length"] == "1000001" and len(body) == 1000001
    assert _get(hosts, "198.51.100.10", "/bytes/0", https=False)[2] == b""
    assert _get(hosts, "198.51.100.10", f"/bytes/{200 * 1024 * 1024 + 1}", https=False)[0] == 400
    c = http.client.HTTPConnection("198.51.100.11", 80, timeout=10)
    t0 = time.monotonic()
    c.request("GET", "/drip")
    r = c.getresponse()
    assert r.getheader("Transfer-Encoding") == "chunked"
    assert [r.fp.readline() for _ in range(3)] == [b"7\r\n", b"drip 0\n", b"\r\n"]  # raw chunks
    t1 = time.monotonic()
    assert [r.fp.readline() for _ in range(3)] == [b"7\r\n", b"drip 1\n", b"\r\n"]
    assert 0.1 < time.monotonic() - t1 < 1
    c.close()  # cut it mid-transfer
    assert time.monotonic() - t0 < 2
    status, _, body = _get(hosts, "198.51.100.11", "/drip?count=3&interval=0.05")
    assert body == b"drip 0\ndrip 1\ndrip 2\n"


def test_pypi_simple_index_and_wheel(hosts):
    status, _, body = _get_name(hosts, "pkgs.test", "/simple/")
    assert status == 200 and b'href="/simple/kilntestpkg/"' in body
    status, _, page = _get_name(hosts, "pkgs.test", "/simple/kilntestpkg/")
    m = re.search(rb'href="([^"#]+)#sha256=([0-9a-f]{64})"', page)
    assert m and m.group(1).endswith(b"/kilntestpkg-1.0-py3-none-any.whl")
    status, _, wheel = _get_name(hosts, "pkgs.test", m.group(1).decode())
    assert status == 200 and hashlib.sha256(wheel).hexdigest() == m.group(2).decode()
    with zipfile.ZipFile(io.BytesIO(wheel)) as z:
        assert z.read("kilntestpkg/__init__.py") == b"VALUE = 42\n"
        record = z.read("kilntestpkg-1.0.dist-info/RECORD").decode().splitlines()
        for line in record:
            name, digest, size = line.rsplit(",", 2)
            if digest:
                data = z.read(name)
                want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert digest == "sha256=" + want and int(size) == len(data), name
        assert set(z.namelist()) == {line.split(",")[0] for line in record}


def test_pip_installs_the_wheel(hosts, tmp_path):
    # pkgs.test does not resolve on the host; the certificate also covers the IP.
    target = tmp_path / "site"
    r = subprocess.run(
        ["/usr/bin/python3", "-m", "pip",
         "install", "--isolated", "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
         "--target", str(target), "--index-url", "https://198.51.100.10/simple/", "--cert",
         hosts.ca_pem_path, "kilntestpkg"],
        capture_output=True, text=True, env=_CLEAN_ENV, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    out = subprocess.run(["/usr/bin/python3", "-c", "import kilntestpkg; print(kilntestpkg.VALUE)"],
                         capture_output=True, text=True, env={**_CLEAN_ENV, "PYTHONPATH": str(target)})
    assert out.stdout == "42\n", out.stderr


def test_npm_packument_and_tarball(hosts):
    status, headers, body = _get_name(hosts, "pkgs.test", "/kiln-test-pkg")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    doc = json.loads(body)
    assert doc["name"] == "kiln-test-pkg" and doc["dist-tags"]["latest"] == "1.0.0"
    dist = doc["versions"]["1.0.0"]["dist"]
    assert dist["tarball"] == "https://pkgs.test/kiln-test-pkg/-/kiln-test-pkg-1.0.0.tgz"
    # The tarball URL follows the Host header.
    other = json.loads(_get(hosts, "198.51.100.12", "/kiln-test-pkg", "other.test:80", https=False)[2])
    assert other["versions"]["1.0.0"]["dist"]["tarball"].startswith("https://other.test/")
    status, _, tgz = _get_name(hosts, "pkgs.test", "/kiln-test-pkg/-/kiln-test-pkg-1.0.0.tgz")
    assert status == 200
    assert dist["integrity"] == "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
    assert dist["shasum"] == hashlib.sha1(tgz).hexdigest()
    with tarfile.open(fileobj=io.BytesIO(tgz)) as t:
        assert t.extractfile("package/index.js").read() == b"module.exports = 42;\n"
        assert json.load(t.extractfile("package/package.json"))["version"] == "1.0.0"


def test_git_clone_dumb_http(hosts, tmp_path):
    env = {**_CLEAN_ENV, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": "/dev/null"}
    r = subprocess.run(["git", "-c", f"http.sslCAInfo={hosts.ca_pem_path}", "clone", "-q",
                        "https://198.51.100.10/repo.git", str(tmp_path / "repo")],
                       capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "repo" / "README").read_text() == "kiln test repo\n"
    paths = [h["path"] for h in hosts.hits()]
    assert any(p.startswith("/repo.git/info/refs") for p in paths)


def test_resolver_file_rewrites(hosts):
    def read():
        out = {}
        for line in Path(hosts.resolver_file).read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                name, *addrs = line.split()
                out[name] = addrs
        return out
    assert read() == nethosts.DEFAULT_NAMES
    assert hosts.addr("Mixed.Test.") == "127.77.0.1"
    assert hosts.url("pkgs.test", "/simple/") == "https://pkgs.test/simple/"
    assert hosts.url("pkgs.test", "x", https=False) == "http://pkgs.test/x"
    inode = os.stat(hosts.resolver_file).st_ino
    hosts.resolve_to("rebind.test", "127.0.0.1")
    assert read()["rebind.test"] == ["127.0.0.1"] and hosts.addr("rebind.test") == "127.0.0.1"
    assert os.stat(hosts.resolver_file).st_ino != inode  # replaced, not rewritten in place
    hosts.set_names({"new.allowed.test": ["198.51.100.11", "198.51.100.12"], "other.test": None})
    assert read()["new.allowed.test"] == ["198.51.100.11", "198.51.100.12"] and "other.test" not in read()
    with pytest.raises(ValueError):
        hosts.resolve_to("bad.test", "not-an-ip")
    hosts.reset_names()
    assert read() == nethosts.DEFAULT_NAMES
    assert not [p for p in Path(hosts.resolver_file).parent.iterdir() if p.name.startswith(".resolver-")]


def _netns_and_links():
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return ([l.split()[0] for l in ns.splitlines() if l.startswith("kilnth-")],
            re.findall(r"^\d+:\s+(kth\d+[hn])", links, re.M))


def test_close_leaves_nothing_and_crash_leftovers_are_removed(hosts):
    tmpdir = hosts.dir
    hosts.close()
    hosts.close()  # idempotent
    assert _netns_and_links() == ([], [])
    assert not tmpdir.exists()
    # A run killed without closing leaves its namespace, veth and temp dir...
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(Path(nethosts.__file__).parent)!r})
        import nethosts
        h = nethosts.TestHosts(); h.start()
        print(h.ns, h.dir, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    r = subprocess.run(["/usr/bin/python3", "-c", script], capture_output=True, text=True, timeout=30)
    ns, crashed_dir = r.stdout.split()
    assert ns in _netns_and_links()[0] and Path(crashed_dir).exists(), r.stderr
    # ... which the next start removes.
    with TestHosts() as again:
        assert _netns_and_links() == ([again.ns], [again.veth_host])  # the ns side is inside the ns
        assert not Path(crashed_dir).exists()
        assert _get(again, "198.51.100.13", "/whoami", "rebind.test", https=False)[2] == \
            b"198.51.100.13 rebind.test\n"
    assert _netns_and_links() == ([], [])
