"""The reach-in surfaces' sockets as their attacker (issue 42): a tenant key floods the
WebSocket routes kilnd serves (the tunnel, the terminal, a port's relayed WebSocket) with a
client that never reads, sits silent on them past --websocket-idle-seconds, reads streamed
answers (a streamed exec, a file download) slowly and then not at all, and leaves a server in
its sandbox that never answers behind a port (clients that leave it; a relay with no byte
either way past --relay-idle-seconds). Each attack runs against the `reach` kilnd, measured
by a Gauge (reach_in_attacks.py: RSS at most +64 MiB during, back to the baseline after)."""
import json
import os
import select
import socket
import time

from reach_in_attacks import (  # noqa: F401  fixtures too
    MiB,
    PORT_CAP,
    RELAY_IDLE_S,
    SMALL_MSS,
    WRITE_DEADLINE_S,
    WS_IDLE_S,
    Gauge,
    Peer,
    drain,
    flood,
    kilnd_closed,
    masked,
    raw_socket,
    read_head,
    request_bytes,
    until,
    ws_open,
    reach)

# ---- 1. WebSockets kilnd serves itself: floods by a client that never reads ----------------


def _flood_websocket(reach, name, target, unit):
    """Opens `target` with a 4 KiB receive buffer, then sends `unit` frames as fast as it can
    and reads nothing: kilnd must cut the socket, grow at most 64 MiB, and come back."""
    gauge = Gauge(reach.d, name)
    sock, status, head, _ = ws_open(reach.d, target, reach.key, rcvbuf=4096, mss=SMALL_MSS)
    try:
        assert status == 101, head
        gauge.start()
        # The cut comes once kilnd's replies fill what it may queue (about 2.5 MiB of
        # frames, 6 s on an idle machine); a loaded one sends them slower, so the flood may
        # last 45 s (a run under CI's load got 1.6 MiB out in 15 s).
        cut, sent, seconds = flood(sock, unit, gauge, seconds=45.0)
        gauge.stop()
    finally:
        sock.close()
    gauge.check(cut=repr(cut) if cut else None, sentMiB=round(sent / MiB, 2), floodSeconds=round(seconds, 1))
    assert cut is not None, (f"{name}: kilnd never cut a client that read nothing while it sent "
                             f"{sent / MiB:.1f} MiB in {seconds:.1f} s (kilnd grew {gauge.grown_mib():.0f} MiB)")
    assert reach.admin.health().status == 200


def test_tunnel_open_frames_that_get_refusals_from_a_client_that_never_reads(reach):
    """Attack: the tunnel WebSocket, a 4 KiB receive buffer, never read; open frames without
    "tcp PORT" as fast as the socket takes them (each queues a refusal). Checks: kilnd cuts
    the socket (its replies count against the 1 MiB per socket), its RSS grows at most
    64 MiB, and its RSS and threads come back after."""
    _flood_websocket(reach, "tunnel: open frames, never read", f"/v1/sandboxes/{reach.sid}/tunnel",
                     b"\x82\x85\0\0\0\0o\0\0\0\x01")


def test_terminal_invalid_control_frames_from_a_client_that_never_reads(reach):
    """Attack: the terminal WebSocket, a 4 KiB receive buffer, never read; text frames that are
    not valid control JSON as fast as the socket takes them: an unknown "type" of 60,000
    letters, which each error frame names back (as much out as in). Checks: kilnd cuts the
    socket, grows at most 64 MiB, and comes back (the shell it started is hung up)."""
    _flood_websocket(reach, "terminal: invalid control frames, never read",
                     f"/v1/sandboxes/{reach.sid}/terminal",
                     masked(1, b'{"type": "' + b"A" * 60000 + b'"}'))


def test_port_websocket_whose_server_floods_a_client_that_never_reads(reach):
    """Attack: a WebSocket relayed to the sandbox's server, which sends 64 KiB frames as fast
    as it may, while the client (4 KiB receive buffer) reads nothing past the 101. Checks:
    kilnd holds no more than its windows (RSS at most +64 MiB), cuts the relay once its write
    to the client has taken no byte for the write deadline (or the relay had no byte either
    way for the relay idle time): the server's sends end, and the client's socket ends after
    what the kernel held; its RSS and threads come back."""
    gauge = Gauge(reach.d, "port WebSocket: server floods, client never reads")
    floods_before = reach.stats()["floods"]
    sock, status, head, _ = ws_open(reach.d, reach.port_path("flood"), reach.key, rcvbuf=4096)
    try:
        assert status == 101, head
        gauge.start()
        t0 = time.monotonic()
        until("the server floods", lambda: reach.stats()["floods"] > floods_before, 10)
        # The attack: read nothing. kilnd's write to the client stalls at once; once it has
        # taken no byte for the write deadline the relay is cut, which ends the server's sends.
        cut_within = WRITE_DEADLINE_S + RELAY_IDLE_S + 10
        deadline = time.monotonic() + cut_within
        while reach.stats()["flooding"] and time.monotonic() < deadline and not gauge.over_guard():
            time.sleep(0.25)
        server_cut_s = time.monotonic() - t0
        stats = reach.stats()
        if not stats["flooding"]:
            until("kilnd closes the client's side", lambda: kilnd_closed(reach.d, sock), 5, every=0.1)
        gauge.stop()
        drained, ended = drain(sock, cap=64 * MiB)
    finally:
        sock.close()
    gauge.check(serverCutSeconds=round(server_cut_s, 1), serverSentMiB=round(stats["floodBytes"] / MiB, 1),
                drainedMiB=round(drained / MiB, 2), clientCut=ended)
    assert stats["flooding"] == 0, f"the relay was not cut within {cut_within} s of a client reading nothing: {stats}"
    assert ended, (f"the client's socket did not end: {drained / MiB:.1f} MiB more came when it read "
                   "again, so the relay was still open")


# ---- 1. the WebSocket idle cut ---------------------------------------------------------------


def test_websocket_idle_cut_spares_a_client_that_answers_pings(reach):
    """Attack: a tunnel and a terminal whose clients send nothing and answer no ping, beside a
    tunnel and a terminal whose clients answer kilnd's pings. Checks: the silent ones are cut
    after --websocket-idle-seconds (not before, and within half that again plus slack); the
    answering ones are still up and serve a request past twice the idle time; threads and RSS
    come back once all are closed."""
    gauge = Gauge(reach.d, "WebSocket idle: silent clients, and clients that answer pings")
    targets = {"tunnel": f"/v1/sandboxes/{reach.sid}/tunnel", "terminal": f"/v1/sandboxes/{reach.sid}/terminal"}
    silent, answering, opened = {}, {}, {}
    t0 = time.monotonic()
    for name, target in targets.items():
        for peers, pong in ((silent, False), (answering, True)):
            s, status, head, rest = ws_open(reach.d, target, reach.key)
            assert status == 101, head
            peers[name] = Peer(s, rest, pong=pong)
            if not pong:
                opened[name] = time.monotonic()
    gauge.start()
    cut_at = {}
    limit = WS_IDLE_S * 1.5 + 4
    try:
        # Read everything (the silent ones only read: reading is not an answer) until the
        # silent ones end or the limit passes.
        while time.monotonic() - t0 < max(limit, 2 * WS_IDLE_S + 1):
            for name, p in silent.items():
                if name not in cut_at and not p.pump(0.05):
                    cut_at[name] = time.monotonic() - opened[name]
            for name, p in answering.items():
                if not p.closed:
                    p.pump(0.05)
            if len(cut_at) == len(silent) and time.monotonic() - t0 > 2 * WS_IDLE_S + 1:
                break
        alive = {name: not p.closed for name, p in answering.items()}
        # The answering ones still serve: a refusal for a bad tunnel open, an error frame for
        # a bad control frame.
        served = {}
        if alive["tunnel"]:
            served["tunnel"] = answering["tunnel"].ask(
                masked(2, b"o\0\0\0\x07"), lambda k, p: k == "binary" and p[:1] == b"c")
        if alive["terminal"]:
            served["terminal"] = answering["terminal"].ask(
                masked(1, b"x", os.urandom(4)), lambda k, p: k == "text" and b"error" in p)
        pings = {name: p.pings for name, p in answering.items()}
    finally:
        for p in list(silent.values()) + list(answering.values()):
            p.sock.close()
    gauge.stop()
    gauge.check(silentCutSeconds={k: round(v, 1) for k, v in cut_at.items()}, pingsAnswered=pings,
                idleSeconds=WS_IDLE_S)
    for name in targets:
        assert name in cut_at, f"the silent {name} client was not cut within {limit:.0f} s (idle {WS_IDLE_S} s)"
        assert WS_IDLE_S - 0.5 <= cut_at[name] <= limit, f"the silent {name} was cut at {cut_at[name]:.1f} s"
        assert alive[name], f"the {name} client that answered {pings[name]} pings was cut"
        assert served[name], f"the {name} client that answers pings got no answer past {2 * WS_IDLE_S} s"
        assert pings[name] >= 1, f"kilnd sent the {name} client no ping in {2 * WS_IDLE_S} s"


# ---- 10. slow readers on streamed answers ----------------------------------------------------


def _slow_reader(reach, name, raw_request, slow_seconds=2 * WRITE_DEADLINE_S, after=None):
    """Sends the request on a socket with a 4 KiB receive buffer, reads 1 KiB every 50 ms for
    `slow_seconds` (two write deadlines: the deadline is on progress, so a reader that takes
    bytes steadily is never cut however long it reads), then stops reading. Checks: kilnd's
    RSS grows at most 64 MiB; the slow reader is not cut; once it has stopped, kilnd cuts the
    connection within its write deadline (plus slack: its socket leaves ESTABLISHED; reading
    again gets only what the kernel held, then the end); its RSS and threads come back."""
    gauge = Gauge(reach.d, name)
    sock = raw_socket(reach.d, rcvbuf=4096, mss=SMALL_MSS)
    cut_slow = cut_after_stop = None
    try:
        sock.sendall(raw_request)
        gauge.start()
        status, head, rest = read_head(sock)
        assert status == 200, head + rest[:300].decode(errors="replace")
        got = len(rest)
        t0 = time.monotonic()
        sock.settimeout(2)
        while time.monotonic() - t0 < slow_seconds and not gauge.over_guard():
            if cut_slow is None and kilnd_closed(reach.d, sock):
                cut_slow = time.monotonic() - t0
            try:
                chunk = sock.recv(1024)
            except socket.timeout:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                break
            got += len(chunk)
            time.sleep(0.05)  # the attack: a slow reader
        slow_growth = gauge.grown_mib()
        # The attack goes on: read nothing; kilnd must cut the connection by its deadline.
        t1 = time.monotonic()
        deadline = t1 + WRITE_DEADLINE_S + 10
        while not kilnd_closed(reach.d, sock) and time.monotonic() < deadline and not gauge.over_guard():
            time.sleep(0.1)
        if kilnd_closed(reach.d, sock):
            cut_after_stop = 0.0 if cut_slow is not None else time.monotonic() - t1
        gauge.stop()
        drained, ended = drain(sock)
        extra = after() if after else {}
    finally:
        sock.close()
    f = gauge.check(slowReadKiB=round(got / 1024, 1), growthWhileSlowMiB=round(slow_growth, 1),
                    cutSecondsIntoSlowRead=None if cut_slow is None else round(cut_slow, 1),
                    cutSecondsAfterStop=None if cut_after_stop is None else round(cut_after_stop, 1),
                    drainedMiB=round(drained / MiB, 2), **extra)
    assert got >= 16 * 1024, f"the stream barely flowed: {f}"
    # 1 KiB every 50 ms: kilnd's writes progress every few hundred ms, well inside the deadline.
    assert cut_slow is None, f"{name}: a reader taking bytes steadily was cut: {f}"
    assert cut_after_stop is not None, (f"{name}: kilnd did not cut the connection within "
                                        f"{WRITE_DEADLINE_S + 10} s of its reader stopping: {f}")
    assert ended, (f"{name}: reading again after the cut got {drained / MiB:.1f} MiB and no end: {f}")
    return f


def test_slow_reader_of_a_streamed_exec(reach):
    """Attack: an exec that streams ~400 MiB of output (stream: true), read 1 KiB at a time
    slowly by a client with a 4 KiB receive buffer, then not at all. Checks: kilnd holds no
    more than the stream's window (RSS at most +64 MiB), cuts the connection past the write
    deadline, stops the command, and its RSS and threads come back."""
    body = json.dumps({"command": "yes abcdefghijklmnopqrstuvwxyz0123456789 | head -c 419430400",
                       "stream": True, "timeoutMs": 120000}).encode()
    raw = request_bytes(reach.d, "POST", f"/v1/sandboxes/{reach.sid}:exec", reach.key,
                        headers=["Content-Type: application/json", "Accept: application/x-ndjson"], body=body)

    def command_stopped():
        check = "grep -lx yes /proc/[0-9]*/comm 2>/dev/null | wc -l"
        running = until("the streamed command stops once its reader is cut",
                        lambda: reach.api.sh(reach.sid, check).strip() == "0" or None, 20)
        return {"commandStopped": bool(running)}

    _slow_reader(reach, "slow reader: streamed exec of 400 MiB", raw, after=command_stopped)


def test_slow_reader_of_a_file_download(reach):
    """Attack: a 256 MiB file downloaded (files/content, streamed past 8 MiB), read 1 KiB at a
    time slowly by a client with a 4 KiB receive buffer, then not at all. Checks: kilnd's RSS
    grows at most 64 MiB, it cuts the connection past the write deadline, and its RSS and
    threads come back."""
    reach.api.sh(reach.sid, "truncate -s 256M /tmp/reach-big.bin")
    raw = request_bytes(reach.d, "GET", f"/v1/sandboxes/{reach.sid}/files/content?path=/tmp/reach-big.bin",
                        reach.key)
    _slow_reader(reach, "slow reader: download of 256 MiB", raw)


# ---- 4. a server behind a port that never answers ---------------------------------------------


def test_clients_that_leave_a_server_that_never_answers_give_back_slots_and_threads(reach):
    """Attack: the sandbox's server accepts and never answers; PORT_CAP clients (the
    --max-port-connections cap) request through kilnd and then leave, three rounds. Checks:
    each time, the server's side of every request is cut at once (within 5 s), a new request
    gets through within 5 s (the slots came back), and kilnd's threads and RSS return to
    their baseline."""
    gauge = Gauge(reach.d, f"port: {PORT_CAP} clients x 3 leave a server that never answers").start()
    raw = request_bytes(reach.d, "GET", reach.port_path("hang"), reach.key)
    rounds = []
    for _ in range(3):
        hangs = reach.stats()["hangs"]
        socks = []
        try:
            for _ in range(PORT_CAP):
                s = raw_socket(reach.d)
                s.sendall(raw)
                socks.append(s)
            until("the server holds every client's request",
                  lambda: reach.stats()["hangs"] >= hangs + PORT_CAP, 20)
            t0 = time.monotonic()
        finally:
            for s in socks:
                s.close()
        # Slots and the server's side come back at once.
        deadline = time.monotonic() + 5
        while reach.stats()["hanging"] and time.monotonic() < deadline:
            time.sleep(0.1)
        server_cut = time.monotonic() - t0
        held = reach.stats()["hanging"]
        status = None
        while time.monotonic() < deadline + 0.5:
            status = reach.api.get(reach.port_path("stats")).status
            if status == 200:
                break
            time.sleep(0.1)
        rounds.append({"serverCutSeconds": round(server_cut, 2), "stillHeld": held, "nextStatus": status,
                       "slotsBackSeconds": round(time.monotonic() - t0, 2)})
        if held or status != 200:
            break
    gauge.stop()
    gauge.check(rounds=rounds)
    for r in rounds:
        assert r["stillHeld"] == 0, f"the sandbox's server still held requests whose clients left: {rounds}"
        assert r["nextStatus"] == 200, f"no slot came back after the clients left: {rounds}"


def test_a_relay_with_no_byte_either_way_is_cut_after_relay_idle(reach):
    """Attack: a client requests the server that never answers and stays, sending nothing.
    Checks: kilnd cuts the relay after --relay-idle-seconds (not before), both sides: the
    client's connection ends and the server's request ends; threads come back."""
    gauge = Gauge(reach.d, "port: a silent relay to a server that never answers").start()
    hangs = reach.stats()["hangs"]
    sock = raw_socket(reach.d)
    try:
        sock.sendall(request_bytes(reach.d, "GET", reach.port_path("hang"), reach.key))

        def held():
            if reach.stats()["hangs"] > hangs:
                return True
            # kilnd answered instead of relaying (e.g. 429: earlier relays hold the slots)
            if select.select([sock], [], [], 0)[0]:
                early = sock.recv(4096, socket.MSG_PEEK)
                raise AssertionError(f"kilnd answered instead of relaying: {early[:400]!r}")
            return False
        until("the server holds the request", held, 20)
        t0 = time.monotonic()
        limit = RELAY_IDLE_S + 6
        sock.settimeout(0.5)
        ended_at, data = None, b""
        while time.monotonic() - t0 < limit:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                ended_at = time.monotonic() - t0
                break
            data += chunk
        server_held = reach.stats()["hanging"]
    finally:
        sock.close()
    gauge.stop()
    gauge.check(cutSeconds=None if ended_at is None else round(ended_at, 1), relayIdleSeconds=RELAY_IDLE_S,
                answered=data[:120].decode(errors="replace"))
    assert ended_at is not None, f"a relay with no byte either way was not cut within {limit} s"
    assert ended_at >= RELAY_IDLE_S - 1.5, f"cut after {ended_at:.1f} s, before the relay idle time"
    if server_held:
        until("the server's side of the idle relay ends", lambda: reach.stats()["hanging"] == 0, 5)


