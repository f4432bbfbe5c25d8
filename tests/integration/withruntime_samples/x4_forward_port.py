"""sbx.forward_port (§2.4): a local port whose connections ride the tunnel
WebSocket to a server inside the sandbox; HTTP through it with urllib, and a
port nothing listens on closes the local connection."""
import socket
import time
import urllib.request

from withruntime import Sandbox

with Sandbox.create() as sbx:
    sbx.files.write("/workspace/hello.txt", "through the tunnel\n")
    sbx.spawn("python3 -m http.server 8000", cwd="/workspace")
    with sbx.forward_port(8000) as fwd:
        url = f"http://{fwd.host}:{fwd.local_port}/hello.txt"
        deadline = time.monotonic() + 30
        while True:
            try:
                body = urllib.request.urlopen(url, timeout=10).read()
                break
            except OSError:
                assert time.monotonic() < deadline, "the forwarded server never answered"
                time.sleep(0.2)
        print(body)
        assert body == b"through the tunnel\n", body
        big = b"x" * 3_000_000
        sbx.exec("head -c 3000000 /dev/zero | tr '\\0' x > /workspace/big.bin", check=True)
        got = urllib.request.urlopen(f"http://{fwd.host}:{fwd.local_port}/big.bin", timeout=60).read()
        assert got == big, (len(got), got[:100], got[-100:])
    with sbx.forward_port(8999, local_port=0) as closed:
        s = socket.create_connection((closed.host, closed.local_port), timeout=10)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        try:
            got = s.recv(100)
        except ConnectionResetError:  # closed with the request unread
            got = b""
        assert got == b"", "a closed port ends the local connection"
        s.close()
