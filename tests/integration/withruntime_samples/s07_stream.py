"""python.md sample 7: on_stdout callback, then exec_stream's events."""
import sys

from withruntime import Sandbox

seen = []
with Sandbox.create() as sbx:
    result = sbx.exec("for i in 1 2 3; do echo line $i; sleep 0.1; done",
                      on_stdout=lambda text: (seen.append(text), sys.stdout.write(text)))
    assert result.exit_code == 0 and result.stdout == "line 1\nline 2\nline 3\n", result
    assert "".join(seen) == result.stdout

    kinds, out, code = [], "", None
    for event in sbx.exec_stream("npm --version"):
        kinds.append(event["type"])
        if event["type"] == "stdout":
            out += event["data"]
        elif event["type"] == "exit":
            code = event["exit_code"]
            assert event["exitCode"] == code
    print(kinds, out.strip(), code)
    assert kinds[0] == "start" and kinds[-1] == "exit" and "stdout" in kinds, kinds
    assert code == 0 and out.strip()[0].isdigit(), out
