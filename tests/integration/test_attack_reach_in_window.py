"""A server in the sandbox that accepts and never reads (issue 42, item 4): a client's upload
through the port relay fills the sandbox's window, and the agent grants no more credit. Such a
relay used to hold kilnd's request thread, the client's socket and a port slot for as long as
the client kept its side open; now kilnd's send waits 30 s for credit, then cuts the relay.
The session kilnd (the default --relay-idle-seconds, 600, so it is the window's deadline that
cuts), a real sandbox, a raw client on loopback."""
import socket
import time

from reach_in_attacks import kilnd_closed, request_bytes

PORT = 8300
# Accepts, holds every connection, reads nothing.
NEVER_READS = f'''
import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", {PORT}))
s.listen(16)
held = []
while True:
    c, _ = s.accept()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    held.append(c)
'''
WINDOW_WAIT_S = 30  # engine::AgentConnection::kWindowWaitMs


def test_an_upload_to_a_server_that_never_reads_is_cut_at_the_window_deadline(kilnd, api, sandboxes):
    """Attack: a server that accepts and never reads; a client uploads 256 MiB to it by path.
    Checks: kilnd ends the client's connection within the window's deadline (plus slack), not at
    once, without passing the whole body on; the sandbox still answers."""
    sid = sandboxes.create()["id"]
    api.write_file(sid, "/tmp/never_reads.py", NEVER_READS)
    api.spawn(sid, argv=["python3", "/tmp/never_reads.py"])
    host, port = kilnd.url.split("//")[1].split(":")
    size = 256 << 20  # far more than the window and every socket buffer on the way
    deadline = time.monotonic() + 30
    while True:  # until the server listens (a refused dial answers 502 at once)
        with socket.create_connection((host, int(port)), timeout=10) as probe:
            probe.sendall(request_bytes(kilnd, "POST", f"/v1/sandboxes/{sid}/ports/{PORT}/up",
                                        kilnd.admin_key, body=b"x"))
            probe.settimeout(3)
            try:
                head = probe.recv(64)
            except socket.timeout:
                break  # accepted and not answered: the server is up
        assert time.monotonic() < deadline, f"the server did not come up: {head!r}"
        time.sleep(0.3)
    s = socket.create_connection((host, int(port)), timeout=10)
    try:
        s.sendall(f"POST /v1/sandboxes/{sid}/ports/{PORT}/up HTTP/1.1\r\nHost: {host}:{port}\r\n"
                  f"Authorization: Bearer {kilnd.admin_key}\r\nContent-Length: {size}\r\n\r\n".encode())
        s.setblocking(False)
        chunk = b"x" * 65536
        sent, t0, stalled_at = 0, time.monotonic(), None
        while time.monotonic() - t0 < WINDOW_WAIT_S + 25:
            try:
                sent += s.send(chunk)
                stalled_at = None
            except BlockingIOError:
                stalled_at = stalled_at or time.monotonic()
                time.sleep(0.05)
            except OSError:
                break  # kilnd ended the connection
            if kilnd_closed(kilnd, s):
                break
        cut_after = time.monotonic() - t0
        assert kilnd_closed(kilnd, s), (
            f"kilnd still held the upload after {cut_after:.0f} s ({sent >> 20} MiB taken of "
            f"{size >> 20}, stalled since {time.monotonic() - (stalled_at or t0):.0f} s)")
        assert sent < size, "the whole body went through a server that reads nothing"
        # Cut by the window's deadline: after it, not at once.
        assert stalled_at is None or cut_after >= WINDOW_WAIT_S - 5, cut_after
    finally:
        s.close()
    # The relay's thread and slot are free: the sandbox and kilnd answer as before.
    assert api.get(f"/v1/sandboxes/{sid}").status == 200
