"""python.md sample 8: background server, a process with a stdin pipe, list, kill."""
import time

from withruntime import Sandbox

with Sandbox.create() as sbx:
    server = sbx.spawn("python3 -m http.server 8000", cwd="/workspace")
    print("server", server.id)

    upper = sbx.spawn(["python3", "-c", "import sys; print(sys.stdin.read().upper(), end='')"], stdin="pipe")
    upper.write("hello ")
    upper.write("world\n", eof=True)
    done = upper.wait()
    print(repr(done.stdout))
    assert done.exit_code == 0 and done.stdout == "HELLO WORLD\n", done

    ids = {p["id"]: p for p in sbx.processes()}
    assert server.id in ids and upper.id in ids, ids
    assert ids[server.id]["state"] == "running", ids[server.id]

    for _ in range(50):  # the server answers on the sandbox's loopback
        got = sbx.exec("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/")
        if got.stdout == "200":
            break
        time.sleep(0.1)
    assert got.stdout == "200", got

    server.kill("SIGTERM")
    ended = server.wait()
    print("server ended", server.refresh()["state"], ended.exit_code)
    assert server.refresh()["state"] in ("exited", "killed")
