"""What a deployment of kiln with wildcard DNS and TLS puts in front of
kilnd, in one test process: E2B's clients reach a sandbox at
https://{port}-{id}.{domain}, which needs a name that resolves and a
certificate they trust. Neither exists on a test machine, so this is an
HTTP proxy (the SDKs' own `proxy` option) that

- for CONNECT to a name of the domain, answers 200 and terminates TLS with a
  certificate for *.{domain} signed by a CA of its own (the clients trust it
  through SSL_CERT_FILE / NODE_EXTRA_CA_CERTS), then passes the decrypted
  bytes to kilnd, whose Host-header routing does the rest;
- for a plain request in absolute form (the control plane, http://), sends
  it on to kilnd in origin form with Connection: close.

Nothing of kiln's is simulated: kilnd sees exactly the requests a TLS
front with wildcard DNS would pass it.
"""
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit


class WildcardFront:
    def __init__(self, domain, kilnd_port):
        self.domain, self.kilnd_port = domain, kilnd_port
        self.dir = Path(tempfile.mkdtemp(prefix="kiln-e2b-front-"))
        self._make_certs()
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(self.cert_path, self.key_path)
        self.ctx.set_alpn_protocols(["http/1.1"])  # kilnd speaks HTTP/1.1
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.tunnels = 0  # CONNECTs served: the host-name form was used
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _make_certs(self):
        d, openssl = self.dir, shutil.which("openssl")
        ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
        run = lambda *a: subprocess.run([str(x) for x in a], check=True, capture_output=True)
        run(openssl, "req", "-x509", *ec, "-keyout", d / "ca.key", "-out", d / "ca.pem",
            "-days", "2", "-subj", "/CN=kiln e2b test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        (d / "v3.ext").write_text(
            "[v3]\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\n"
            "authorityKeyIdentifier=keyid,issuer\n"
            f"subjectAltName=DNS:*.{self.domain},DNS:{self.domain}\n")
        run(openssl, "req", "-new", *ec, "-keyout", d / "server.key", "-out", d / "server.csr",
            "-subj", f"/CN=*.{self.domain}")
        run(openssl, "x509", "-req", "-in", d / "server.csr", "-CA", d / "ca.pem", "-CAkey",
            d / "ca.key", "-CAcreateserial", "-days", "2", "-sha256", "-extfile", d / "v3.ext",
            "-extensions", "v3", "-out", d / "server.pem")
        self.ca_path = str(d / "ca.pem")
        self.cert_path, self.key_path = str(d / "server.pem"), str(d / "server.key")
        # The system's CAs plus this one, for clients that read one bundle.
        system = Path("/etc/ssl/certs/ca-certificates.crt")
        bundle = (system.read_bytes() if system.exists() else b"") + (d / "ca.pem").read_bytes()
        (d / "bundle.pem").write_bytes(bundle)
        self.bundle_path = str(d / "bundle.pem")

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    @staticmethod
    def _read_head(s):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                return None, b""
            data += chunk
            if len(data) > 1 << 20:
                return None, b""
        head, rest = data.split(b"\r\n\r\n", 1)
        return head.decode("latin-1"), rest

    def _serve(self, c):
        try:
            head, rest = self._read_head(c)
            if head is None:
                return
            method, target, version = head.split("\r\n", 1)[0].split(" ", 2)
            if method == "CONNECT":
                c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                up = socket.create_connection(("127.0.0.1", self.kilnd_port))
                # A tunnel to kilnd's own http:// address (undici tunnels
                # everything) stays plain; one to a name of the domain is TLS.
                if c.recv(1, socket.MSG_PEEK) == b"\x16":
                    self.tunnels += 1
                    c = self.ctx.wrap_socket(c, server_side=True)
                self._pipe(c, up)
                return
            # Absolute form to origin form, one request per connection.
            u = urlsplit(target)
            origin = (u.path or "/") + (f"?{u.query}" if u.query else "")
            lines = [l for l in head.split("\r\n")[1:]
                     if not l.lower().startswith(("connection:", "proxy-connection:",
                                                  "keep-alive:"))]
            new_head = "\r\n".join([f"{method} {origin} {version}", *lines, "Connection: close"])
            up = socket.create_connection(("127.0.0.1", self.kilnd_port))
            up.sendall(new_head.encode("latin-1") + b"\r\n\r\n" + rest)
            self._pipe(c, up)
        except (OSError, ssl.SSLError, ValueError):
            pass
        finally:
            try:
                c.close()
            except OSError:
                pass

    @staticmethod
    def _pipe(a, b):
        def one_way(src, dst):
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    dst.sendall(data)
            except (OSError, ssl.SSLError):
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except (OSError, ssl.SSLError):
                        pass
        t = threading.Thread(target=one_way, args=(b, a), daemon=True)
        t.start()
        one_way(a, b)
        t.join(timeout=30)
        b.close()
