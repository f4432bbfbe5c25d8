"""python.md sample 12: a folder as a .tar.gz, unpacked elsewhere."""
from withruntime import Sandbox

with Sandbox.create() as sbx:
    sbx.files.write("/workspace/site/index.html", "<h1>hi</h1>")
    sbx.files.write("/workspace/site/css/main.css", "h1 { color: red }")
    data = sbx.files.archive("/workspace/site")
    assert data[:2] == b"\x1f\x8b", data[:8]
    sbx.files.unarchive("/workspace/copy", data)
    text = sbx.files.read_text("/workspace/copy/css/main.css")
    print(len(data), text)
    assert text == "h1 { color: red }"
    assert sbx.files.read_text("/workspace/copy/index.html") == "<h1>hi</h1>"
