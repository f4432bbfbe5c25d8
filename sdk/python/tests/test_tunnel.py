"""The tunnel's pure parts: frame encode/decode, the credit window, the WebSocket frame
codec (against a socketpair, no daemon)."""
import socket
import struct
import threading

import pytest

from kiln import _ws, tunnel


def test_frames_round_trip_and_refuse_bad_input():
    f = tunnel.encode_frame(b"d", 7, b"hello")
    assert f == b"d\x00\x00\x00\x07hello"
    assert tunnel.decode_frame(f) == (b"d", 7, b"hello")
    assert tunnel.decode_frame(tunnel.encode_frame(b"e", 0xFFFFFFFF)) == (b"e", 0xFFFFFFFF, b"")
    with pytest.raises(ValueError):
        tunnel.encode_frame(b"x", 1)
    with pytest.raises(ValueError):
        tunnel.encode_frame(b"d", 1 << 32)
    with pytest.raises(ValueError):
        tunnel.decode_frame(b"d\x00\x00")
    assert tunnel.decode_ack(struct.pack("!Q", 3 << 40)) == 3 << 40
    with pytest.raises(ValueError):
        tunnel.decode_ack(b"\x00" * 4)


def test_window_blocks_past_one_mebibyte_until_acknowledged():
    w = tunnel.CreditWindow()
    assert w.acquire(1 << 19) and w.acquire(1 << 19)  # exactly the window
    assert not w.acquire(1, timeout=0.05), "a byte past the window must wait"
    got = []
    t = threading.Thread(target=lambda: got.append(w.acquire(65536)))
    t.start()
    w.ack(65535)
    t.join(0.1)
    assert t.is_alive(), "one byte short of room"
    w.ack(65536)
    t.join(5)
    assert got == [True] and w.sent - w.acked == 1 << 20
    w.ack(100)  # an older count never moves it back
    assert w.acked == 65536
    with pytest.raises(ValueError):
        w.ack(w.sent + 1)
    w.end()
    assert not w.acquire(1), "an ended tunnel sends nothing"


def _server_frame(opcode, payload, fin=True):
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    if n < 126:
        head += bytes([n])
    elif n < 65536:
        head += bytes([126]) + struct.pack("!H", n)
    else:
        head += bytes([127]) + struct.pack("!Q", n)
    return head + payload


def _unmask(frame):
    b1 = frame[1] & 0x7F
    off = 2
    if b1 == 126:
        n, off = struct.unpack("!H", frame[2:4])[0], 4
    elif b1 == 127:
        n, off = struct.unpack("!Q", frame[2:10])[0], 10
    else:
        n = b1
    assert frame[1] & 0x80, "client frames are masked"
    mask = frame[off:off + 4]
    body = frame[off + 4:off + 4 + n]
    return frame[0] & 0x0F, bytes(b ^ mask[i % 4] for i, b in enumerate(body))


@pytest.mark.parametrize("size", [0, 5, 125, 126, 65535, 65536, 200000])
def test_client_frames_are_masked_with_the_right_length(size):
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    op, body = _unmask(_ws.encode_frame(_ws.OP_BINARY, payload, b"\x01\x02\x03\x04"))
    assert op == _ws.OP_BINARY and body == payload


def test_messages_fragments_ping_close_and_the_cap():
    a, b = socket.socketpair()
    ws = _ws.WebSocket(a)
    b.sendall(_server_frame(_ws.OP_TEXT, b'{"type":"ready"}')
              + _server_frame(_ws.OP_PING, b"p")
              + _server_frame(_ws.OP_BINARY, b"ab", fin=False) + _server_frame(_ws.OP_CONT, b"cd"))
    assert ws.recv() == '{"type":"ready"}'
    assert ws.recv() == b"abcd"
    op, body = _unmask(b.recv(100))
    assert (op, body) == (_ws.OP_PONG, b"p")
    # A frame announcing more than the cap ends the connection instead of being read.
    b.sendall(bytes([0x82, 127]) + struct.pack("!Q", _ws.MAX_MESSAGE + 1))
    assert ws.recv() is None and ws.closed
    b.close()
    a2, b2 = socket.socketpair()
    ws2 = _ws.WebSocket(a2)
    b2.sendall(_server_frame(_ws.OP_CLOSE, struct.pack("!H", 1000)))
    assert ws2.recv() is None
    op, body = _unmask(b2.recv(100))
    assert op == _ws.OP_CLOSE and body == struct.pack("!H", 1000)
    b2.close()
