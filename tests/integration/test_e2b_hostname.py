"""E2B's clients in the host-name form: no E2B_SANDBOX_URL, so they reach
envd at https://49983-{id}.{E2B_DOMAIN} and the interpreter at
https://49999-{id}.{E2B_DOMAIN}, as a deployment with wildcard DNS and TLS
in front of kilnd serves them. kilnd runs with --preview-domain kiln.test;
e2b_host_front.WildcardFront stands in for the DNS and the TLS front (the
SDKs' own `proxy` option, a CA of its own that the clients trust).
"""
import os
import tempfile

import pytest

from conftest import start_kilnd, stop_kilnd
from e2b_clients import GROUP, e2b_node, e2b_python, run_node, run_python  # noqa: F401  fixtures
from e2b_host_front import WildcardFront

pytestmark = GROUP
DOMAIN = "kiln.test"


@pytest.fixture(scope="module")
def hosted():
    state = tempfile.mkdtemp(prefix="kiln-e2b-host-", dir="/tmp")
    d = start_kilnd(state, "--preview-domain", DOMAIN)
    front = WildcardFront(DOMAIN, int(d.url.rsplit(":", 1)[1]))
    try:
        yield d, front
    finally:
        front.close()
        stop_kilnd(d)


@pytest.fixture(scope="module")
def host_env(hosted):
    from client import Client
    d, front = hosted
    secret = Client(d.url, key=d.admin_key).post("/v1/keys", json={"name": "e2b-host"}).json()["secret"]
    env = dict(os.environ, E2B_API_URL=d.url + "/e2b", E2B_DOMAIN=DOMAIN,
               E2B_API_KEY="e2b_" + secret[len("kiln_"):], SSL_CERT_FILE=front.bundle_path,
               NODE_EXTRA_CA_CERTS=front.ca_path, KILN_TEST_PROXY=front.url)
    for k in ("E2B_SANDBOX_URL", "E2B_DEBUG", "HTTPS_PROXY", "HTTP_PROXY", "https_proxy",
              "http_proxy", "ALL_PROXY", "NO_PROXY", "no_proxy"):
        env.pop(k, None)
    return env


def test_python_sdk_by_host_name(e2b_python, host_env, hosted):
    front = hosted[1]
    before = front.tunnels
    got = run_python(e2b_python, host_env, """
        import os
        from e2b_code_interpreter import Sandbox
        proxy = os.environ["KILN_TEST_PROXY"]
        s = Sandbox.create(template="base", proxy=proxy)
        r = s.commands.run("echo by host name; hostname >/dev/null")
        s.files.write("/tmp/host.txt", "written over TLS")
        text = s.files.read("/tmp/host.txt")
        x = s.run_code("x = 20; x * 2")
        url = s.get_host(8080)
        s.kill()
        out({"stdout": r.stdout, "text": text, "code": x.text, "host": url, "id": s.sandbox_id})
    """)
    assert got["stdout"] == "by host name\n"
    assert got["text"] == "written over TLS"
    assert got["code"] == "40"
    assert got["host"] == f"8080-{got['id']}.{DOMAIN}"
    # envd's and the interpreter's requests went by host name, over TLS.
    assert front.tunnels > before


def test_js_sdk_by_host_name(e2b_node, host_env, hosted):
    front = hosted[1]
    before = front.tunnels
    got = run_node(e2b_node, host_env, """
        import { Sandbox } from '@e2b/code-interpreter'
        import { ProxyAgent, setGlobalDispatcher } from 'undici'
        const proxy = process.env.KILN_TEST_PROXY
        // The interpreter client uses the global fetch, not the proxy option:
        // the test's stand-in for wildcard DNS is Node's global dispatcher.
        setGlobalDispatcher(new ProxyAgent({ uri: proxy, proxyTunnel: true }))
        const s = await Sandbox.create('base', { proxy })
        const r = await s.commands.run('echo by host name')
        await s.files.write('/tmp/host.txt', 'written over TLS')
        const text = await s.files.read('/tmp/host.txt')
        const x = await s.runCode('y = 21; y * 2')
        await s.kill()
        out({ stdout: r.stdout, text, code: x.text })
    """)
    assert got == {"stdout": "by host name\n", "text": "written over TLS", "code": "42"}
    assert front.tunnels > before


def test_signed_file_links_by_host_name(e2b_python, host_env, hosted):
    """download_url / upload_url of a secure sandbox: links signed with its envd token
    (envd/file_signature.h), usable with no token or key, until they expire."""
    got = run_python(e2b_python, host_env, """
        import json, os, ssl, urllib.error, urllib.request, uuid
        from e2b import Sandbox
        proxy = os.environ["KILN_TEST_PROXY"]
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({"https": proxy}),
            urllib.request.HTTPSHandler(context=ssl.create_default_context()))
        def fetch(url, data=None, headers={}):
            try:
                with opener.open(urllib.request.Request(url, data=data, headers=headers)) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, e.read().decode()
        s = Sandbox.create(template="base", secure=True, proxy=proxy)
        s.files.write("signed.txt", "by a signed link")
        plain = fetch(s.download_url("signed.txt", "user"))
        timed = fetch(s.download_url("signed.txt", "user", 120))
        expired = fetch(s.download_url("signed.txt", "user", use_signature_expiration=-120))
        url = s.download_url("signed.txt", "user")
        forged = fetch(url.replace("signed.txt", "other.txt", 1))
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\\r\\nContent-Disposition: form-data; name=\\"file\\"; "
                f"filename=\\"up.txt\\"\\r\\n\\r\\nuploaded\\r\\n--{boundary}--\\r\\n").encode()
        up = fetch(s.upload_url("up.txt", "user", 120), data=body,
                   headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        read_only = fetch(url, data=body,
                          headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        uploaded = s.files.read("up.txt")
        s.kill()
        out({"plain": plain, "timed": timed, "expired": [expired[0], json.loads(expired[1])],
             "forged": [forged[0], json.loads(forged[1])], "up": up[0], "uploaded": uploaded,
             "read_only": read_only[0]})
    """)
    assert got["plain"] == [200, "by a signed link"], got
    assert got["timed"] == [200, "by a signed link"], got
    assert got["expired"] == [401, {"code": 401, "message": "signature is already expired"}], got
    assert got["forged"] == [401, {"code": 401, "message": "invalid signature"}], got
    assert got["up"] == 200 and got["uploaded"] == "uploaded", got
    assert got["read_only"] == 401, got  # a read link opens no write
