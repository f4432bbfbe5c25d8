"""python.md sample 28, its network half: set the sandbox's egress rules and
read them back (the interpreter half is not offered by kiln)."""
from withruntime import NotFoundError, Sandbox

with Sandbox.create() as sbx:
    sbx.network.set(internet=True, allow=["pypi.org", "files.pythonhosted.org"])
    rules = sbx.network.get()
    print(rules)
    assert rules["internet"] is True and rules["allow"] == ["pypi.org", "files.pythonhosted.org"], rules
    sbx.network.off()
    assert sbx.network.get()["internet"] is False
    try:
        sbx.interpreter.run("1 + 1")
        raise AssertionError("kiln answered interpreter:run: record it as offered")
    except NotFoundError as error:
        assert error.code == "route_not_found", error
