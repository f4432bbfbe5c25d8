"""python.md sample 11: upload a folder, run in it, download the result."""
import os
import tempfile
from pathlib import Path

from withruntime import Sandbox

with tempfile.TemporaryDirectory() as tmp:
    project = Path(tmp, "project")
    (project / "pkg").mkdir(parents=True)
    (project / "main.py").write_text("import pkg.util\nprint(pkg.util.twice(21))\n")
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "util.py").write_text("def twice(x):\n    return 2 * x\n")
    (project / "run.sh").write_text("#!/bin/sh\npython3 main.py > out.txt\n")
    os.chmod(project / "run.sh", 0o755)

    with Sandbox.create() as sbx:
        sbx.files.upload(str(project), "/workspace/project")
        result = sbx.exec("./run.sh && cat out.txt", cwd="/workspace/project")
        print(result.exit_code, result.stdout)
        assert result.exit_code == 0 and result.stdout == "42\n", result
        copy = Path(tmp, "project-copy")
        sbx.files.download("/workspace/project", str(copy))
        assert (copy / "out.txt").read_text() == "42\n"
        assert (copy / "pkg" / "util.py").read_text() == (project / "pkg" / "util.py").read_text()
        assert os.stat(copy / "run.sh").st_mode & 0o111
        sbx.files.write("/workspace/report.bin", bytes(range(256)) * 8)
        sbx.files.download("/workspace/report.bin", str(Path(tmp, "report.bin")))
        assert Path(tmp, "report.bin").read_bytes() == bytes(range(256)) * 8
