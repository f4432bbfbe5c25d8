"""Escape attempts on the network: raw and UDP sockets, DNS, the host's
addresses on every interface (kilnd's API port among them), loopback
tricks and a neighbour sandbox's server, straight
from a socket and through the egress proxy, for a sandbox with internet off
(the default), one allowed to some hosts, and one with internet on."""
import json
import socket
import subprocess
import urllib.parse

import pytest

from escape_common import escape_guard, marker, quote  # noqa: F401 -- fixtures

# Tries each target straight from a socket and through the proxy; prints
# {"direct": [...], "proxy": [...], "raw": ..., "udp": ..., "dns": ...}.
PROBE = r'''
import http.client, json, socket, sys
targets = json.loads(sys.argv[1])
def err(e):
    return type(e).__name__ + ": " + str(e)
out = {"direct": [], "proxy": []}
for host, port in targets:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect((host, port)); out["direct"].append("connected")
    except Exception as e:
        out["direct"].append(err(e))
    finally:
        s.close()
    h = "[" + host + "]" if ":" in host else host
    for method, target in (("CONNECT", f"{h}:{port}"), ("GET", f"http://{h}:{port}/v1/health")):
        c = http.client.HTTPConnection("127.0.0.1", 10800, timeout=20)
        try:
            c.request(method, target); r = c.getresponse()
            out["proxy"].append([r.status, r.getheader("X-Kiln-Egress")])
        except Exception as e:
            out["proxy"].append([None, err(e)])
        finally:
            c.close()
res = {}
for name, args in (("raw-icmp", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
                   ("packet", (socket.AF_PACKET, socket.SOCK_RAW, 0))):
    try:
        socket.socket(*args).close(); res[name] = "opened"
    except Exception as e:
        res[name] = err(e)
for host in sorted({h for h, _ in targets if h[0].isdigit() and not h.startswith(("127.", "0."))})[:2]:
    u = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.sendto(b"x", (host, 53)); res["udp " + host] = "sent"
    except Exception as e:
        res["udp " + host] = err(e)
for name in ("example.com", "metadata.google.internal"):
    try:
        res["dns " + name] = socket.getaddrinfo(name, 80)[0][4][0]
    except Exception as e:
        res["dns " + name] = err(e)
out["other"] = res
print(json.dumps(out))
'''


def _host_addresses():
    out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, check=True).stdout
    addrs = []
    for line in out.splitlines():
        parts = line.split()
        a = parts[3].split("/")[0]
        if not a.startswith("fe80:"):  # link-local needs a scope id; no route either way
            addrs.append(a)
    assert "127.0.0.1" in addrs and len(addrs) >= 2, addrs
    return addrs


@pytest.fixture(scope="module")
def boxes(api):
    made = {
        "internet-off": api.create(vcpu=1, memoryMiB=256)["id"],
        "allow-some": api.create(vcpu=1, memoryMiB=256,
                                 network={"internet": True, "allow": ["pkgs.test", "*.example.com"]})["id"],
        "internet-on": api.create(vcpu=1, memoryMiB=256, network={"internet": True})["id"],
    }
    yield made
    for sid in made.values():
        api.request("DELETE", f"/v1/sandboxes/{sid}")


@pytest.mark.parametrize("policy", ["internet-off", "allow-some", "internet-on"])
def test_nothing_reaches_the_host(api, kilnd, boxes, policy):
    sid = boxes[policy]
    port = urllib.parse.urlsplit(kilnd.url).port
    targets = [[a, port] for a in _host_addresses()] + [[a, 22] for a in _host_addresses()]
    targets += [["localhost", port], ["0.0.0.0", port], ["127.1", port],
                ["::ffff:127.0.0.1", port], ["::1", port]]
    # Only addresses of this machine: were a check broken, nothing would leave it. The
    # metadata and private addresses are refused by the same check, unit-tested address by
    # address (tests/unit/network/address_test.cc, tests/unit/egress/gate_test.cc). DNS goes to the
    # host's own address too (the image's resolv.conf names the host's resolver).
    own = next((a for a in _host_addresses() if "." in a and not a.startswith("127.")), "127.0.0.1")
    api.sh(sid, f"sudo sh -c 'echo nameserver {own} > /etc/resolv.conf'")
    r = api.exec(sid, command=f"python3 -c {quote(PROBE)} {quote(json.dumps(targets))}", timeoutMs=180000)
    assert r["exitCode"] == 0, r
    out = json.loads(r["stdout"])
    for (host, p), direct in zip(targets, out["direct"]):
        # No NIC: only the sandbox's own loopback exists, where nothing listens on these ports.
        assert direct != "connected", (host, p, direct)
        assert "unreachable" in direct or "refused" in direct or "Errno" in direct, (host, p, direct)
    # internet off refuses everything first; then the host's own and private
    # addresses are refused whatever the rules; a name the allow list lacks is
    # refused by name, before it is resolved.
    expected = {"internet-off"} if policy == "internet-off" else {"private-address"}
    if policy == "allow-some":
        expected.add("not-allowed")
    for i, (host, p) in enumerate(targets):
        for answer in out["proxy"][2 * i: 2 * i + 2]:
            assert answer[0] == 403 and answer[1] in expected, (policy, host, p, answer)
    other = out["other"]
    assert "Operation not permitted" in other["raw-icmp"] and "Operation not permitted" in other["packet"], other
    for k, v in other.items():
        if k.startswith("udp "):
            assert "unreachable" in v or "Errno" in v, (k, v)
        if k.startswith("dns "):
            assert "gaierror" in v, (k, v)
    log = api.ok("GET", f"/v1/sandboxes/{sid}/network/log", query={"limit": 500})["data"]
    assert log and not [e for e in log if e["verdict"] == "allowed"], log
    assert api.sh(sid, "python3 -c 'import socket; print(*[n for _, n in socket.if_nameindex()])'") == "lo\n"


def test_a_neighbours_server_is_out_of_reach(api, boxes):
    server = boxes["internet-off"]
    port = 18765
    api.spawn(server, command=f"python3 -m http.server {port} --bind 0.0.0.0", cwd="/tmp")
    api.sh(server, f"for i in $(seq 100); do curl -s --noproxy '*' -o /dev/null http://127.0.0.1:{port}/ && exit 0; "
                   "sleep 0.2; done; exit 1", timeoutMs=60000)
    for policy in ("allow-some", "internet-on"):
        sid = boxes[policy]
        r = api.exec(sid, command=f"curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{port}/")
        assert r["exitCode"] == 7, r  # its loopback is its own
        r = api.exec(sid, command=f"curl -sS --max-time 10 -x http://127.0.0.1:10800 --noproxy '' "
                                      f"-o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/")
        assert r["stdout"] == "403", r  # the proxy: a private address
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # nor from the host
