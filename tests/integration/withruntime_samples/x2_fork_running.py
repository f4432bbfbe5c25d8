"""A fork of a running sandbox: the copy carries its files, memory and a
process that was running when it was taken."""
import time

from withruntime import Sandbox

with Sandbox.create(memory_mib=512) as sbx:
    # Each count is written whole (a new file renamed over the old), so a
    # read never sees a half-written one.
    counter = sbx.spawn(["python3", "-c",
                         "import os, time\ni = 0\nwhile True:\n"
                         "    i += 1\n    open('/workspace/.count', 'w').write(str(i))\n"
                         "    os.replace('/workspace/.count', '/workspace/count')\n    time.sleep(0.05)"])
    time.sleep(0.5)
    sbx.files.write("/workspace/branch.txt", "trunk")
    fork = sbx.fork()
    try:
        assert fork.id != sbx.id and fork.state == "running"
        fork.files.write("/workspace/branch.txt", "fork")
        assert sbx.files.read_text("/workspace/branch.txt") == "trunk"
        first = int(fork.files.read_text("/workspace/count"))
        time.sleep(0.5)
        later = int(fork.files.read_text("/workspace/count"))
        print("fork's counter", first, "->", later)
        assert later > first, "the process did not go on running in the fork"
        assert any(p["id"] == counter.id and p["state"] == "running" for p in fork.processes())
    finally:
        fork.delete()
