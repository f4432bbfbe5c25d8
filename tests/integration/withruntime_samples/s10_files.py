"""python.md sample 10: file operations."""
from withruntime import Sandbox

with Sandbox.create() as sbx:
    files = sbx.files
    files.write("/workspace/data/sales.csv", "region,total\nnorth,10\n")
    files.write("/workspace/data/2026/q1.csv", b"region,total\nsouth,7\n")
    files.write("/workspace/notes.txt", "hello")
    assert files.read_text("/workspace/notes.txt") == "hello"
    assert files.read("/workspace/data/2026/q1.csv") == b"region,total\nsouth,7\n"
    assert files.exists("/workspace/notes.txt") and not files.exists("/workspace/nope.txt")
    info = files.stat("/workspace/data/sales.csv")
    assert info["type"] == "file" and info["size"] == 22, info
    names = sorted(e["path"] for e in files.list("/workspace", depth=2))
    print(names)
    assert "/workspace/data/sales.csv" in names and "/workspace/data/2026" in names
    csvs = sorted(e["path"] for e in files.glob("**/*.csv"))
    print(csvs)
    assert csvs == ["/workspace/data/2026/q1.csv", "/workspace/data/sales.csv"], csvs
    files.mkdir("/workspace/archive/old")
    files.rename("/workspace/notes.txt", "/workspace/archive/notes.txt")
    assert files.exists("/workspace/archive/notes.txt") and not files.exists("/workspace/notes.txt")
    assert files.remove("/workspace/archive", recursive=True) is True
    assert not files.exists("/workspace/archive")
