"""Determinism (issue 3, item 6): two copies of one snapshot, the same 20
actions in each, the same observations -- stdout, exit codes, file digests.
What legitimately differs (wall time, kernel entropy) is kept out of the
actions, as the README tells users to do."""
import hashlib
import json
import time

from conftest import Sandboxes

# A server whose in-memory state includes a random generator seeded before
# the snapshot: every copy continues the same sequence.
SERVER = """
import http.server, random
rng = random.Random(1234)
rng.random()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(repr(rng.random()).encode())
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", 8000), H).serve_forever()
"""
ASK = "python3 -c \"import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:8000').read().decode())\""

ACTIONS = [
    "cat /workspace/seed.txt",
    ASK,
    "echo step > /workspace/a.txt && sha256sum /workspace/a.txt",
    ASK,
    "PYTHONHASHSEED=0 python3 -c \"print(hash('kiln'), sorted({'b', 'a', 'c'}))\"",
    "python3 -c \"import random; random.seed(7); print([random.randint(0, 99) for _ in range(5)])\"",
    "seq 1 1000 | sort -r | head -3",
    "mkdir -p /workspace/d/e && touch /workspace/d/e/f && find /workspace/d | sort",
    "stat -c '%n %s %a %U' /workspace/a.txt /workspace/seed.txt",
    ASK,
    "ls /workspace | sort",
    "printf 'x%.0s' $(seq 1 5000) | wc -c",
    "python3 -c \"import json; print(json.dumps({'k': [1, 2, 3]}, sort_keys=True))\"",
    "sh -c 'exit 3'",
    "cat /nonexistent",
    "echo err >&2; echo out",
    # file times are wall time: pin them, as a user would for reproducible archives
    "tar --sort=name --mtime=@0 --owner=0 --group=0 -C /workspace -cf - d | sha256sum | cut -c1-16",
    ASK,
    "head -c 100000 /workspace/big.bin | sha256sum",
    # The processes, less this pipeline's own: `sort` may or may not have started when ps
    # reads /proc (seen once in a full run: one copy listed it), and grep's own line holds ' ps '.
    "ps -eo pid,args --no-headers | grep -v -e ' ps ' -e ' sort$' | sort",
]


def observe(api, sid):
    """The observations of the actions, in order."""
    seen = []
    for cmd in ACTIONS:
        r = api.exec(sid, command=cmd)
        seen.append([cmd, r["exitCode"], r["stdout"], r["stderr"]])
    for path in ("/workspace/a.txt", "/workspace/seed.txt", "/workspace/big.bin"):
        seen.append([path, hashlib.sha256(api.read_file(sid, path).body).hexdigest()])
    return seen


def digest(seen):
    return hashlib.sha256(json.dumps(seen).encode()).hexdigest()


def test_two_restores_observe_the_same(api):
    pool = Sandboxes(api)
    try:
        src = pool.create(vcpu=1, memoryMiB=512)["id"]
        api.sh(src, "echo seeded > /workspace/seed.txt && head -c 200000 /dev/urandom > /workspace/big.bin")
        api.spawn(src, argv=["python3", "-c", SERVER])
        deadline = time.monotonic() + 20
        while api.exec(src, command=ASK)["exitCode"] != 0:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        snap = api.ok("POST", f"/v1/sandboxes/{src}:snapshot", json={})
        a = pool.create(snapshot=snap["id"])["id"]
        b = pool.create(snapshot=snap["id"])["id"]
        first, second = observe(api, a), observe(api, b)
        diff = [(x, y) for x, y in zip(first, second) if x != y]
        assert digest(first) == digest(second), f"the copies observed different things: {diff}"
        # and the check can fail: a copy that diverges is seen
        api.sh(b, "echo diverged >> /workspace/seed.txt")
        assert digest(observe(api, b)) != digest(first)
        api.ok("POST", f"/v1/snapshots/{snap['id']}:delete", json={})
    finally:
        pool.close()
