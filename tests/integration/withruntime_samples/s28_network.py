"""python.md sample 28: set the sandbox's egress rules and read them back,
and the stateful interpreter (kiln's own kernel, src/interpreter)."""
from withruntime import Sandbox

with Sandbox.create() as sbx:
    sbx.network.set(internet=True, allow=["pypi.org", "files.pythonhosted.org"])
    rules = sbx.network.get()
    print(rules)
    assert rules["internet"] is True and rules["allow"] == ["pypi.org", "files.pythonhosted.org"], rules
    sbx.network.off()
    assert sbx.network.get()["internet"] is False
    execution = sbx.interpreter.run("x = 20\nx + 22")
    assert execution["status"] == "ok", execution
    assert execution["results"][0]["data"]["text/plain"] == "42", execution
    seen = []
    streamed = sbx.interpreter.run("print('hello'); x", on_stdout=seen.append)
    assert "".join(seen) == "hello\n" and streamed["results"][0]["data"]["text/plain"] == "20", (seen, streamed)
    ctx = sbx.interpreter.contexts.create(id="work")
    assert ctx["id"] == "work" and ctx["state"] == "running", ctx
    assert {c["id"] for c in sbx.interpreter.contexts.list()} == {"python", "work"}
    assert sbx.interpreter.contexts.remove("work") is True
