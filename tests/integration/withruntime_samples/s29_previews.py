"""python.md sample 29: a server in the sandbox, shared with previews.create; a
visitor sends the preview's token (x-runtime-preview-token) to its host name, and a
rotate refuses the old token. kiln's preview host names are {port}-{id}.localhost on
kilnd's listener (this machine's resolver does not map *.localhost, so the sample
connects to the listener and names the host). The desktop calls are not offered."""
import http.client
import os
import time
import urllib.parse

from withruntime import Sandbox


def visit(url, token):
    u = urllib.parse.urlsplit(url)
    api = urllib.parse.urlsplit(os.environ["RUNTIME_API_URL"])
    conn = http.client.HTTPConnection(api.hostname, api.port, timeout=30)
    conn.request("GET", "/", headers={"Host": u.netloc, **({"x-runtime-preview-token": token} if token else {})})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, body


with Sandbox.create() as sbx:
    sbx.files.write("/workspace/index.html", "<h1>hello from the sandbox</h1>")
    sbx.spawn("python3 -m http.server 3000", cwd="/workspace")
    preview = sbx.previews.create(3000)
    print(preview["url"], preview["visibility"])
    assert preview["visibility"] == "private" and preview["token"], preview
    assert preview["urlWithToken"].startswith(preview["url"]), preview
    deadline = time.monotonic() + 30
    while True:
        status, body = visit(preview["url"], preview["token"])
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # the server is still starting (502 port_closed)
    assert status == 200 and b"hello from the sandbox" in body, (status, body)
    assert visit(preview["url"], None)[0] == 401
    assert [p["port"] for p in sbx.previews.list()] == [3000]
    rotated = sbx.previews.rotate(3000)
    assert visit(preview["url"], preview["token"])[0] == 401
    assert visit(preview["url"], rotated["token"])[0] == 200
    assert sbx.previews.delete(3000)["deleted"] is True
    assert visit(preview["url"], rotated["token"])[0] == 404
