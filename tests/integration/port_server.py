"""A server the port tests run inside a sandbox (python3 of the base image, stdlib only).

HTTP on argv[1]: GET /echo answers what it got (method, path, headers) as JSON; POST/PUT
/upload answers the body's sha256 and length (chunked bodies too); GET /big?n=N answers N
bytes; GET /ws upgrades to a WebSocket that echoes each message (RFC 6455, server side).
Raw TCP on argv[2]: echoes every byte until the client ends its side, then closes.
"""
import base64
import hashlib
import http.server
import json
import socket
import socketserver
import struct
import sys
import threading
import urllib.parse


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _json(self, obj, status=200):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/ws":
            return self._websocket()
        if url.path == "/big":
            n = int(urllib.parse.parse_qs(url.query)["n"][0])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            block = b"x" * 65536
            while n > 0:
                self.wfile.write(block[:min(n, len(block))])
                n -= len(block)
            return
        self._json({"method": "GET", "path": self.path, "headers": dict(self.headers.items())})

    def do_DELETE(self):
        self._json({"method": "DELETE", "path": self.path, "headers": dict(self.headers.items())})

    def do_POST(self):
        data = self._body()
        self._json({"method": self.command, "path": self.path, "size": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(), "headers": dict(self.headers.items())})

    do_PUT = do_POST

    def _websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept.decode())
        self.end_headers()
        self.wfile.flush()
        rf, wf = self.rfile, self.wfile
        while True:
            head = rf.read(2)
            if len(head) < 2:
                return
            opcode, n = head[0] & 0x0F, head[1] & 0x7F
            if n == 126:
                n = struct.unpack("!H", rf.read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", rf.read(8))[0]
            mask = rf.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(rf.read(n)))
            if opcode == 8:
                wf.write(b"\x88\x02" + payload[:2])
                wf.flush()
                return
            out = bytes([0x80 | opcode])
            out += bytes([len(payload)]) if len(payload) < 126 else b"\x7e" + struct.pack("!H", len(payload)) \
                if len(payload) < 65536 else b"\x7f" + struct.pack("!Q", len(payload))
            wf.write(out + payload)
            wf.flush()
        self.close_connection = True


class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            data = self.request.recv(65536)
            if not data:
                break
            self.request.sendall(data)
        self.request.shutdown(socket.SHUT_WR)


class Threads(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog of 5 drops connects in the tests' bursts of 256 dials,
    # which would read as kiln refusing them.
    request_queue_size = 1024


if __name__ == "__main__":
    http.server.ThreadingHTTPServer.request_queue_size = 1024
    http_server = http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), Handler)
    http_server.daemon_threads = True
    if len(sys.argv) > 2:
        echo = Threads(("127.0.0.1", int(sys.argv[2])), Echo)
        threading.Thread(target=echo.serve_forever, daemon=True).start()
    print("ready", flush=True)
    http_server.serve_forever()
