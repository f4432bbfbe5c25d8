"""python.md sample 9: an interactive terminal over a WebSocket."""
import time

from withruntime import Sandbox

with Sandbox.create() as sbx:
    term = sbx.terminal(cols=120, rows=40)
    term.write("echo $((6 * 7)) $COLUMNS\n")
    screen = b""
    deadline = time.monotonic() + 20
    while b"42 120" not in screen and time.monotonic() < deadline:
        chunk = term.recv()
        if chunk is None:
            break
        screen += chunk
    print(screen.decode(errors="replace")[-200:])
    assert b"42 120" in screen, screen
    term.write("exit\n")
    while term.recv() is not None:
        pass
    print("exit code", term.exit_code)
    assert term.exit_code == 0
    term.close()
