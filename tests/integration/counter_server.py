"""A server that holds a count in memory, run in a sandbox: a restored copy that answers
the next number shows its processes' memory came through (snapshots, forks, pause, transfer)."""
import time

COUNTER_SERVER = """
import http.server, itertools
count = itertools.count()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(str(next(count)).encode())
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", 8000), H).serve_forever()
"""
ASK = ["python3", "-c", "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:8000').read().decode())"]


def counter(client, sid):
    """The next number of the sandbox's counter server."""
    r = client.exec(sid, argv=ASK)
    assert r["exitCode"] == 0, r
    return int(r["stdout"])


def start_counter(client, sid, within=30):
    """Starts the counter server in sandbox `sid` and waits for it; returns the spawn's answer.
    The probe takes count 0, so the next ask answers 1."""
    server = client.spawn(sid, argv=["python3", "-c", COUNTER_SERVER])
    deadline = time.monotonic() + within
    while client.exec(sid, argv=ASK)["exitCode"] != 0:
        assert time.monotonic() < deadline, "the counter server did not come up"
        time.sleep(0.2)
    return server
