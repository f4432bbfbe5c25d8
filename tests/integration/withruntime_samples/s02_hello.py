"""python.md sample 2 (hello): create, write a file, run it; the block's end deletes it."""
from withruntime import NotFoundError, Sandbox

with Sandbox.create() as sbx:
    sbx.files.write("/workspace/invoice.py", "items = [250, 500]\nprint(sum(items))\n")
    result = sbx.exec("python3 /workspace/invoice.py")
    print(result.exit_code, result.stdout, end="")
    assert result.exit_code == 0, result
    assert result.stdout == "750\n", result

try:  # withruntime 0.35 deletes a sandbox it created at the block's end
    Sandbox.connect(sbx.id)
    raise AssertionError("sandbox still there after the with block")
except NotFoundError:
    pass
