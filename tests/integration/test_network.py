"""Issue 6: no NIC, egress only through kilnd's policy-enforcing proxy.

Every outside host here is one of the suite's own test hosts (nethosts.py:
servers in a network namespace on 198.51.100.0/24); kilnd resolves names from
the hosts' resolver file (--test-resolver-file), never from DNS.
"""
import json
import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest

from client import Client, assert_error
from conftest import start_kilnd, stop_kilnd
from lib.net import free_port
from nethosts import TestHosts, test_hosts_available

# The tests' own hosts have fixed addresses: one module at a time uses them.
pytestmark = pytest.mark.xdist_group("nethosts")

PROXY_ENV_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY")

# Sends raw proxy requests from inside a sandbox and reports each answer:
# [[method, target], ...] -> [{"status", "egress", "body", "s"} | {"error", "s"}].
PROBE = r'''
import http.client, json, sys, time
out = []
for method, target in json.loads(sys.argv[1]):
    t = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", 10800, timeout=20)
    try:
        c.request(method, target)
        r = c.getresponse()
        body = b"" if (method == "CONNECT" and r.status == 200) else r.read()
        out.append({"status": r.status, "egress": r.getheader("X-Kiln-Egress"),
                    "body": body.decode(errors="replace")[:300], "s": time.monotonic() - t})
    except Exception as e:
        out.append({"error": repr(e), "s": time.monotonic() - t})
    finally:
        c.close()
print(json.dumps(out))
'''


class Net:
    def __init__(self, hosts, daemon):
        self.hosts, self.d = hosts, daemon
        self.api = Client(daemon.url, key=daemon.admin_key)
        self.made = []

    def create(self, **fields):
        s = self.api.create(vcpu=1, memoryMiB=256, **fields)
        self.made.append(s["id"])
        self.api.write_file(s["id"], "/tmp/ca.pem", self.hosts.ca_pem)
        self.api.write_file(s["id"], "/tmp/probe.py", PROBE.encode())
        return s["id"]

    def probe(self, sid, *requests):
        out = self.api.sh(sid, "python3 /tmp/probe.py " + _quote(json.dumps([list(r) for r in requests])),
                          timeoutMs=120000)
        return json.loads(out)

    def curl(self, sid, url, *args):
        """curl through the proxy (from the environment); returns the CommandResult."""
        return self.api.exec(sid, command=f"curl -sS --max-time 30 --cacert /tmp/ca.pem {' '.join(args)} {url}")

    def log(self, sid, **query):
        return self.api.ok("GET", f"/v1/sandboxes/{sid}/network/log", query=query)["data"]

    def set(self, sid, **policy):
        return self.api.ok("PUT", f"/v1/sandboxes/{sid}/network", json=policy)


def _quote(s):
    return "'" + s.replace("'", "'\"'\"'") + "'"


@pytest.fixture(scope="module")
def net():
    why = test_hosts_available()
    if why:
        pytest.skip(why)
    hosts = TestHosts().start()
    state = tempfile.mkdtemp(prefix="kiln-net-", dir="/tmp")
    d = start_kilnd(state, "--test-resolver-file", str(hosts.resolver_file))
    n = Net(hosts, d)
    try:
        yield n
    finally:
        for sid in n.made:
            n.api.request("DELETE", f"/v1/sandboxes/{sid}")
        rc = stop_kilnd(n.d)  # a test may have replaced the daemon
        hosts.close()
        assert rc == 0, f"kilnd exited with {rc}\n{n.d.log_tail()}"
        shutil.rmtree(state, ignore_errors=True)
        Path(state + ".log").unlink(missing_ok=True)


@pytest.fixture(autouse=True)
def _fresh_hosts(net):
    net.hosts.reset_names()
    net.hosts.clear_hits()
    yield


# --- 1. no network interface --------------------------------------------------


def test_a_sandbox_has_loopback_only_and_no_route_out(net):
    sid = net.create(network={"internet": True})
    ifaces = net.api.sh(sid, "python3 -c 'import socket; print(*[n for _, n in socket.if_nameindex()])'").split()
    assert ifaces == ["lo"], ifaces
    dev = net.api.sh(sid, "tail -n +3 /proc/net/dev | cut -d: -f1").split()
    assert dev == ["lo"], dev
    # Straight to a test host, around the proxy: there is no route.
    r = net.api.exec(sid, command="python3 -c 'import socket; socket.create_connection((\"198.51.100.10\", 80), timeout=5)'")
    assert r["exitCode"] != 0 and ("unreachable" in r["stderr"] or "Errno" in r["stderr"]), r
    assert net.hosts.connections() == []


def test_a_server_in_one_sandbox_is_unreachable_from_others_and_the_host(net):
    port = free_port()
    a = net.create()
    b = net.create()
    net.api.spawn(a, command=f"python3 -m http.server {port} --bind 0.0.0.0", cwd="/tmp")
    _wait_listening(net.api, a, port)
    assert net.api.sh(a, f"curl -sS --noproxy '*' -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/") == "200"
    r = net.api.exec(b, command=f"curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{port}/")
    assert r["exitCode"] == 7, r  # couldn't connect: B's loopback is B's own
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    # Forked copies are as separate: a server started in one copy after the fork
    # is not reachable from its sibling.
    copies = net.api.ok("POST", f"/v1/sandboxes/{a}:fork", json={"count": 2})["sandboxes"]
    c1, c2 = (c["id"] for c in copies)
    net.made += [c1, c2]
    port2 = port + 1 if port < 65000 else port - 1
    net.api.spawn(c1, command=f"python3 -m http.server {port2} --bind 0.0.0.0", cwd="/tmp")
    _wait_listening(net.api, c1, port2)
    r = net.api.exec(c2, command=f"curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{port2}/")
    assert r["exitCode"] == 7, r
    # And through the proxy, loopback is a private address.
    [ans] = net.probe(c2, ("GET", f"http://127.0.0.1:{port2}/"))
    assert (ans["status"], ans["egress"]) == (403, "internet-off"), ans
    net.set(c2, internet=True)
    [ans] = net.probe(c2, ("GET", f"http://127.0.0.1:{port2}/"))
    assert (ans["status"], ans["egress"]) == (403, "private-address"), ans


# --- 2. the policy API ----------------------------------------------------------


def test_policy_defaults_put_get_versions_and_bad_input(net):
    sid = net.create()
    p = net.api.ok("GET", f"/v1/sandboxes/{sid}/network")
    assert (p["internet"], p["allow"], p["deny"], p["version"], p["sandboxId"]) == (False, [], [], 1, sid)
    assert p["enforcedVersion"] == p["version"] and p["enforced"] is True
    p2 = net.set(sid, internet=True, allow=["PKGS.test.", "*.Allowed.test", "198.51.100.0/24"], deny=["0x7f.1"])
    assert p2["allow"] == ["pkgs.test", "*.allowed.test", "198.51.100.0/24"], p2
    assert p2["deny"] == ["127.0.0.1"] and p2["version"] == 2, p2
    assert net.api.ok("GET", f"/v1/sandboxes/{sid}/network") == p2
    assert net.api.sandbox(sid)["network"] == {"internet": True, "allow": p2["allow"], "deny": p2["deny"]}
    put = lambda body: net.api.request("PUT", f"/v1/sandboxes/{sid}/network", json=body)  # noqa: E731
    assert_error(put({"allow": ["a.test"]}), 400, "invalid_request", issue_path="body.internet")
    assert_error(put({"internet": "yes"}), 400, "invalid_request", issue_path="body.internet")
    assert_error(put({"internet": True, "allow": ["ok.test", "https://x.test/"]}), 400, "invalid_request",
                 issue_path="body.allow[1]")
    assert_error(put({"internet": True, "allow": ["10.0.0.0/8"]}), 400, "invalid_request",
                 issue_path="body.allow[0]", mentions=("private",))
    assert_error(put({"internet": True, "deny": ["a.*.test"]}), 400, "invalid_request", issue_path="body.deny[0]")
    assert_error(put({"internet": True, "colour": 1}), 400, "invalid_request", issue_path="body.colour")
    r = net.api.post("/v1/sandboxes", json={"network": {"internet": True, "allow": [3]}})
    assert_error(r, 400, "invalid_request", issue_path="body.network.allow[0]")
    # A refused PUT changed nothing.
    assert net.api.ok("GET", f"/v1/sandboxes/{sid}/network")["version"] == 2


# --- 3. the proxy: internet off, allow, wildcards, deny -------------------------


def test_internet_off_refuses_every_connection_with_a_clear_answer(net):
    sid = net.create()
    for v in PROXY_ENV_NAMES:
        assert net.api.sh(sid, f"printenv {v}").strip() in ("http://127.0.0.1:10800", "localhost,127.0.0.1,::1")
    answers = net.probe(sid, ("GET", "http://pkgs.test/whoami"), ("CONNECT", "pkgs.test:443"),
                        ("CONNECT", "198.51.100.10:443"))
    for a in answers:
        assert (a["status"], a["egress"]) == (403, "internet-off"), a
        assert a["s"] < 5, a  # an answer, not a hang
    r = net.curl(sid, "https://pkgs.test/whoami")
    assert r["exitCode"] == 56 and "403" in r["stderr"], r  # curl: CONNECT refused
    assert net.hosts.connections() == []
    assert [e["verdict"] for e in net.log(sid)] == ["internet-off"] * 4


def test_allowed_domains_and_wildcards_reach_their_hosts_and_nothing_else(net):
    sid = net.create(network={"internet": True, "allow": ["pkgs.test", "*.allowed.test"]})
    for name in ("pkgs.test", "api.allowed.test", "deep.api.allowed.test"):
        r = net.curl(sid, f"https://{name}/whoami")
        assert r["exitCode"] == 0 and r["stdout"] == f"{net.hosts.addr(name)} {name}\n", r
    plain = net.curl(sid, "http://api.allowed.test/whoami")
    assert plain["stdout"] == "198.51.100.11 api.allowed.test\n", plain
    apex, other = net.probe(sid, ("CONNECT", "allowed.test:443"), ("GET", "http://other.test/whoami"))
    assert (apex["status"], apex["egress"]) == (403, "not-allowed"), apex
    assert (other["status"], other["egress"]) == (403, "not-allowed"), other
    assert {h["addr"] for h in net.hosts.hits()} == {"198.51.100.10", "198.51.100.11"}


def test_deny_beats_allow(net):
    sid = net.create(network={"internet": True, "allow": ["*.allowed.test", "other.test"],
                              "deny": ["blocked.allowed.test", "198.51.100.12/32"]})
    ok, blocked, by_cidr = net.probe(sid, ("GET", "http://api.allowed.test/whoami"),
                                     ("CONNECT", "blocked.allowed.test:443"), ("GET", "http://other.test/whoami"))
    assert ok["status"] == 200, ok
    assert (blocked["status"], blocked["egress"]) == (403, "denied"), blocked
    assert (by_cidr["status"], by_cidr["egress"]) == (403, "denied"), by_cidr
    # With no allow list at all, deny still wins.
    net.set(sid, internet=True, deny=["*.allowed.test"])
    ok, denied = net.probe(sid, ("GET", "http://pkgs.test/whoami"), ("GET", "http://api.allowed.test/whoami"))
    assert ok["status"] == 200 and (denied["status"], denied["egress"]) == (403, "denied"), (ok, denied)


def test_private_addresses_are_refused_in_every_spelling(net):
    sid = net.create(network={"internet": True})
    canary = net.hosts.canary_port
    targets = [f"127.0.0.1:{canary}", f"127.1:{canary}", f"2130706433:{canary}", f"0177.0.0.1:{canary}",
               f"0x7f.0.0.1:{canary}", f"0x7f000001:{canary}", f"127.0.0.1.:{canary}", f"[::1]:{canary}",
               f"[::ffff:127.0.0.1]:{canary}", f"[::ffff:7f00:1]:{canary}", f"[0:0:0:0:0:ffff:7f00:1]:{canary}",
               f"private.test:{canary}", f"PRIVATE.Test.:{canary}", f"0x7f.0x4d.0.1:{canary}",
               f"[::ffff:127.0.0.1]:{canary}", "0.0.0.0:80",
               f"{net.hosts.host_addr}:80"]  # the host's own address (the test hosts' veth)
    # Only addresses on this machine: were the check broken, the canary would record the
    # connection and nothing would leave the machine. Metadata, private, multicast and
    # NAT64 addresses go through the same check and are tested address by address in
    # tests/unit/network/address_test.cc and tests/unit/egress/gate_test.cc.
    requests = []
    for t in targets:
        requests += [("CONNECT", t), ("GET", f"http://{t}/whoami")]
    answers = net.probe(sid, *requests)
    for (method, target), a in zip(requests, answers):
        assert (a.get("status"), a.get("egress")) == (403, "private-address"), (method, target, a)
    assert net.hosts.connections() == [], "a refused address was reached"
    # mixed.test answers one refused and one public address: only the public one is dialled.
    [mixed] = net.probe(sid, ("GET", "http://mixed.test/whoami"))
    assert not [c for c in net.hosts.connections() if c["addr"].startswith("127.")], \
        "mixed.test's loopback address was dialled"
    assert mixed["status"] == 200 and mixed["body"].startswith("198.51.100.12 "), mixed


def test_dns_rebinding_is_refused(net):
    sid = net.create(network={"internet": True, "allow": ["rebind.test"]})
    canary = net.hosts.canary_port
    [first] = net.probe(sid, ("GET", f"http://rebind.test/whoami"))
    assert first["status"] == 200 and first["body"].startswith("198.51.100.13 "), first
    # The name now answers with a loopback address: the check is on the
    # address actually dialled, so the second connection is refused.
    net.hosts.resolve_to("rebind.test", "127.0.0.1")
    second, tunnel = net.probe(sid, ("GET", f"http://rebind.test:{canary}/whoami"),
                               ("CONNECT", f"rebind.test:{canary}"))
    assert (second["status"], second["egress"]) == (403, "private-address"), second
    assert (tunnel["status"], tunnel["egress"]) == (403, "private-address"), tunnel
    assert not [c for c in net.hosts.connections() if c.get("addr") == "127.0.0.1"]
    entries = net.log(sid)
    assert [(e["host"], e["address"], e["verdict"]) for e in entries] == [
        ("rebind.test", "198.51.100.13", "allowed"),
        ("rebind.test", "127.0.0.1", "private-address"),
        ("rebind.test", "127.0.0.1", "private-address")], entries


def test_a_policy_change_cuts_an_open_connection(net):
    sid = net.create(network={"internet": True})
    proc = net.api.spawn(sid, command="curl -sS -N --cacert /tmp/ca.pem 'https://pkgs.test/drip?count=300&interval=0.1' > /tmp/drip 2> /tmp/drip.err")
    pid = proc["id"]
    deadline = time.monotonic() + 20
    # The spawned shell creates /tmp/drip a moment after spawn returns.
    while net.api.sh(sid, "cat /tmp/drip 2>/dev/null | wc -l").strip() in ("", "0"):
        assert time.monotonic() < deadline, "no drip data"
        time.sleep(0.2)
    [open_entry] = [e for e in net.log(sid) if e["open"]]
    assert (open_entry["host"], open_entry["verdict"]) == ("pkgs.test", "allowed")
    t = time.monotonic()
    net.set(sid, internet=True, deny=["pkgs.test"])
    info = net.api.wait_process(sid, pid, timeout=10)
    assert info["state"] != "running" and time.monotonic() - t < 5, info
    assert info["exitCode"] != 0, info  # cut, not finished (300 lines take 30 s)
    lines = int(net.api.sh(sid, "wc -l < /tmp/drip"))
    assert 0 < lines < 300, lines
    [entry] = [e for e in net.log(sid) if e["id"] == open_entry["id"]]
    assert not entry["open"] and entry["closedBy"] == "policy" and entry["bytesIn"] > 0, entry
    [again] = net.probe(sid, ("CONNECT", "pkgs.test:443"))
    assert (again["status"], again["egress"]) == (403, "denied"), again


# --- 3. real clients: pip, npm, git, curl ---------------------------------------


def test_pip_install_from_a_local_index_needs_its_host_allowed(net):
    pip = ("python3 -m pip install --no-cache-dir --disable-pip-version-check --target /tmp/site "
           "--index-url https://pkgs.test/simple/ --cert /tmp/ca.pem --retries 0 --timeout 10 kilntestpkg")
    refused = net.create(network={"internet": True, "allow": ["other.test"]})
    r = net.api.exec(refused, command=pip, timeoutMs=120000)
    assert r["exitCode"] != 0, r
    assert "not-allowed" in [e["verdict"] for e in net.log(refused) if e["host"] == "pkgs.test"]
    assert not [h for h in net.hosts.hits() if h["addr"] == "198.51.100.10"]
    sid = net.create(network={"internet": True, "allow": ["pkgs.test"]})
    r = net.api.exec(sid, command=pip, timeoutMs=120000)
    assert r["exitCode"] == 0, r
    assert net.api.sh(sid, "PYTHONPATH=/tmp/site python3 -c 'import kilntestpkg; print(kilntestpkg.VALUE)'") == "42\n"


def test_npm_install_and_git_clone_work_through_the_proxy(net):
    sid = net.create(network={"internet": True, "allow": ["pkgs.test"]})
    r = net.api.exec(sid, command="mkdir -p /tmp/app && cd /tmp/app && npm install --no-audit --no-fund "
                     "--cafile /tmp/ca.pem --registry https://pkgs.test/ kiln-test-pkg && "
                     "node -e 'console.log(require(\"kiln-test-pkg\"))'", timeoutMs=180000)
    assert r["exitCode"] == 0 and r["stdout"].strip().endswith("42"), r
    r = net.api.exec(sid, command="GIT_SSL_CAINFO=/tmp/ca.pem git clone -q https://pkgs.test/repo.git /tmp/repo "
                     "&& cat /tmp/repo/README", timeoutMs=120000)
    assert r["exitCode"] == 0 and "kiln test repo" in r["stdout"], r
    hosts = {e["host"] for e in net.log(sid)}
    assert hosts == {"pkgs.test"}, hosts


# --- 4. the log ------------------------------------------------------------------


def test_log_entries_are_exact_and_paged(net):
    sid = net.create(network={"internet": True, "allow": ["pkgs.test"], "deny": ["198.51.100.13/32"]})
    before = _metric(net.api, 'kiln_egress_connections_total{verdict="not-allowed"}')
    r = net.curl(sid, "https://pkgs.test/bytes/100000", "-o /dev/null")
    assert r["exitCode"] == 0, r
    net.probe(sid, ("GET", "http://other.test/whoami"), ("CONNECT", "198.51.100.13:443"))
    entries = net.log(sid)
    assert len(entries) == 3, entries
    got, refused, denied = entries
    assert (got["method"], got["host"], got["address"], got["port"], got["verdict"]) == \
        ("CONNECT", "pkgs.test", "198.51.100.10", 443, "allowed")
    assert got["bytesIn"] > 100000 and got["bytesOut"] > 100 and not got["open"], got
    assert got["closedBy"] in ("client", "server") and got["durationMs"] >= 0, got
    assert (refused["method"], refused["host"], refused["address"], refused["port"], refused["verdict"]) == \
        ("GET", "other.test", None, 80, "not-allowed")
    assert (denied["host"], denied["address"], denied["port"], denied["verdict"]) == \
        ("198.51.100.13", "198.51.100.13", 443, "denied")
    assert refused["bytesIn"] == refused["bytesOut"] == 0
    assert all(e["time"].endswith("Z") for e in entries)
    # Cursor paging walks the same entries one at a time.
    page, seen = net.api.ok("GET", f"/v1/sandboxes/{sid}/network/log", query={"limit": 1}), []
    while True:
        seen += page["data"]
        if not page["nextCursor"]:
            break
        page = net.api.ok("GET", f"/v1/sandboxes/{sid}/network/log", query={"limit": 1, "cursor": page["nextCursor"]})
    assert seen == entries
    assert_error(net.api.get(f"/v1/sandboxes/{sid}/network/log", query={"cursor": "x"}), 400, "invalid_request",
                 issue_path="query.cursor")
    assert _metric(net.api, 'kiln_egress_connections_total{verdict="not-allowed"}') == before + 1
    assert _metric(net.api, 'kiln_egress_bytes_total{direction="in"}') >= 100000


# --- 5. snapshot, restore and fork keep the policy ----------------------------------


def test_snapshot_restore_and_fork_keep_the_policy_unless_told_otherwise(net):
    policy = {"internet": True, "allow": ["pkgs.test"], "deny": []}
    src = net.create(network=policy)
    snap = net.api.ok("POST", f"/v1/sandboxes/{src}:snapshot", json={})
    assert snap["network"] == policy
    copy = net.api.create(snapshot=snap["id"])
    net.made.append(copy["id"])
    assert copy["network"] == policy
    other = net.api.create(snapshot=snap["id"], network={"internet": False})
    net.made.append(other["id"])
    assert other["network"] == {"internet": False, "allow": [], "deny": []}
    [ok] = net.probe(copy["id"], ("GET", "http://pkgs.test/whoami"))
    [off] = net.probe(other["id"], ("GET", "http://pkgs.test/whoami"))
    assert ok["status"] == 200 and (off["status"], off["egress"]) == (403, "internet-off"), (ok, off)
    forks = net.api.ok("POST", f"/v1/sandboxes/{src}:fork", json={"count": 2})["sandboxes"]
    net.made += [f["id"] for f in forks]
    assert [f["network"] for f in forks] == [policy, policy]
    narrowed = net.api.ok("POST", f"/v1/sandboxes/{src}:fork",
                          json={"network": {"internet": True, "allow": ["other.test"]}})["sandboxes"]
    net.made += [f["id"] for f in narrowed]
    assert narrowed[0]["network"]["allow"] == ["other.test"]
    # A copy's connections are its own: its log holds only what it did.
    net.probe(forks[0]["id"], ("GET", "http://pkgs.test/whoami"))
    assert [e["host"] for e in net.log(forks[0]["id"])] == ["pkgs.test"]
    assert net.log(forks[1]["id"]) == []
    # Changing the source's policy does not change its copies'.
    net.set(src, internet=False)
    assert net.api.ok("GET", f"/v1/sandboxes/{forks[1]['id']}/network")["internet"] is True


# --- durability: a daemon restart ---------------------------------------------------


def test_rules_and_log_survive_a_daemon_kill(net):
    # Only this test's sandbox is re-adopted: stopping one whose runsc was the
    # dead daemon's child takes ~2 s here (PID 1 of this VM does not reap).
    for old_sid in net.made:
        net.api.request("DELETE", f"/v1/sandboxes/{old_sid}")
    net.made.clear()
    sid = net.create(network={"internet": True, "allow": ["pkgs.test"]})
    net.set(sid, internet=True, allow=["pkgs.test", "other.test"])
    net.api.spawn(sid, command="curl -sS -N --cacert /tmp/ca.pem 'https://pkgs.test/drip?count=600&interval=0.1' > /tmp/drip")
    deadline = time.monotonic() + 20
    while not [e for e in net.log(sid) if e["open"]]:
        assert time.monotonic() < deadline, "the download did not start"
        time.sleep(0.2)
    net.d.proc.kill()
    net.d.proc.wait()
    # The next kilnd re-adopts the sandbox with its rules and version; the
    # connection the dead one carried is closed in the log.
    net.d = start_kilnd(net.d.state_dir, "--test-resolver-file", str(net.hosts.resolver_file))
    net.api = Client(net.d.url, key=net.d.admin_key)
    p = net.api.ok("GET", f"/v1/sandboxes/{sid}/network")
    assert (p["allow"], p["version"]) == (["pkgs.test", "other.test"], 2), p
    [old] = [e for e in net.log(sid) if e["host"] == "pkgs.test"]
    assert not old["open"] and old["closedBy"] == "daemon-restart", old
    r = net.curl(sid, "https://other.test/whoami")
    assert r["exitCode"] == 0 and r["stdout"] == "198.51.100.12 other.test\n", r
    [refused] = net.probe(sid, ("CONNECT", "allowed.test:443"))
    assert (refused["status"], refused["egress"]) == (403, "not-allowed"), refused


# --- hostile: a connection flood ------------------------------------------------------


FLOOD = r'''
import socket, time

held = []
for i in range(2000):
    try:
        held.append(socket.create_connection(("127.0.0.1", 10800), timeout=5))
    except OSError:
        pass
print(len(held), flush=True)
time.sleep(25)
'''


@pytest.mark.hostile
def test_a_connection_flood_affects_only_its_own_sandbox(net):
    flooder = net.create(network={"internet": True, "allow": ["pkgs.test"]})
    neighbour = net.create(network={"internet": True, "allow": ["pkgs.test"]})
    net.api.write_file(flooder, "/tmp/flood.py", FLOOD.encode())
    threads_before = _threads(net.d.proc.pid)
    p = net.api.spawn(flooder, command="python3 /tmp/flood.py > /tmp/flood.out")
    deadline = time.monotonic() + 60
    while net.api.sh(flooder, "cat /tmp/flood.out 2>/dev/null || true").strip() == "":
        assert time.monotonic() < deadline, "the flood did not start"
        time.sleep(0.5)
    # 2000 idle connections to the flooder's proxy: kilnd serves at most a
    # bounded number per sandbox, and the neighbour's egress still works.
    assert _threads(net.d.proc.pid) < threads_before + 2 * 256 + 50
    t = time.monotonic()
    r = net.curl(neighbour, "https://pkgs.test/whoami")
    assert r["exitCode"] == 0 and r["stdout"] == "198.51.100.10 pkgs.test\n", r
    assert time.monotonic() - t < 10
    net.api.ok("POST", f"/v1/sandboxes/{flooder}/processes/{p['id']}:signal", json={"signal": "SIGKILL"})
    net.api.wait_process(flooder, p["id"])
    # Once its connections are gone, the flooder's own egress works again.
    deadline = time.monotonic() + 45
    while (r := net.curl(flooder, "https://pkgs.test/whoami"))["exitCode"] != 0:
        assert time.monotonic() < deadline, r
        time.sleep(1)


def _threads(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("Threads:")).split()[1])


# --- helpers ------------------------------------------------------------------------


def _wait_listening(api, sid, port, timeout=15):
    deadline = time.monotonic() + timeout
    while api.exec(sid, command=f"curl -s --noproxy '*' -o /dev/null http://127.0.0.1:{port}/")["exitCode"] != 0:
        assert time.monotonic() < deadline, f"nothing listens on {port}"
        time.sleep(0.2)


def _metric(api, series):
    text = api.get("/metrics").body.decode()
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0
