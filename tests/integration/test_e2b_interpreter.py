"""E2B's code-interpreter SDKs (Python e2b-code-interpreter 2.11.5, JS
@e2b/code-interpreter 2.8.0) unchanged against the interpreter port (49999)
kilnd serves with kiln's own interpreter (src/api/e2b/interpreter_port.cc):
run_code keeping variables, stdout, errors with their traceback, contexts,
and a matplotlib chart as a PNG from the code-interpreter-v1 template: the
image kilnd builds on its first need (issue 44, item 5; numpy, pandas and
matplotlib from PyPI), once, under the operator's key, for every key.
"""
from e2b_clients import (GROUP, e2b_env, e2b_http, e2b_key, e2b_node, e2b_python,  # noqa: F401
                         interpreter_template, run_node, run_python)

pytestmark = GROUP


def test_python_run_code_keeps_variables_streams_and_errors(e2b_python, e2b_env):
    out = run_python(e2b_python, e2b_env, """
        from e2b_code_interpreter import Sandbox
        s = Sandbox.create("base", timeout=300)
        a = s.run_code("x = 20\\nprint('hello', x)")
        b = s.run_code("x * 2 + 2")
        seen = []
        c = s.run_code("import sys\\nprint('out')\\nprint('err', file=sys.stderr)",
                       on_stdout=lambda m: seen.append(m.line))
        d = s.run_code("def f():\\n    return 1 / 0\\nf()")
        e = s.run_code("x")  # the error left the state alone
        s.kill()
        out({"a": a.logs.stdout, "b": b.text, "main": [r.is_main_result for r in b.results],
             "c_out": c.logs.stdout, "c_err": c.logs.stderr, "seen": seen,
             "err": [d.error.name, d.error.value, d.error.traceback] if d.error else None,
             "e": e.text, "count": e.execution_count})
    """)
    assert out["a"] == ["hello 20\n"], out
    assert out["b"] == "42" and out["main"] == [True], out
    assert out["c_out"] == ["out\n"] and out["c_err"] == ["err\n"] and out["seen"] == ["out\n"], out
    name, value, tb = out["err"]
    assert name == "ZeroDivisionError" and "division by zero" in value, out
    assert "return 1 / 0" in tb or "f()" in tb, tb
    assert out["e"] == "20", out


def test_python_contexts_create_list_restart_remove(e2b_python, e2b_env):
    out = run_python(e2b_python, e2b_env, """
        from e2b_code_interpreter import Sandbox
        s = Sandbox.create("base", timeout=300)
        ctx = s.create_code_context(cwd="/tmp")
        s.run_code("y = 5", context=ctx)
        in_ctx = s.run_code("import os\\n(y, os.getcwd())", context=ctx).text
        default = s.run_code("'y' in dir()")
        listed = [c.id for c in s.list_code_contexts()]
        s.restart_code_context(ctx)
        after = s.run_code("'y' in dir()", context=ctx).text
        s.remove_code_context(ctx)
        gone = ctx.id not in [c.id for c in s.list_code_contexts()]
        try:
            s.run_code("1", context=ctx)
            removed_run = "ran"
        except Exception as e:
            removed_run = type(e).__name__
        s.kill()
        out({"id": ctx.id, "lang": ctx.language, "cwd": ctx.cwd, "in_ctx": in_ctx,
             "default": default.text, "listed": ctx.id in listed, "after": after,
             "gone": gone, "removed_run": removed_run})
    """)
    assert out["lang"] == "python" and out["cwd"] == "/tmp", out
    assert out["in_ctx"] == "(5, '/tmp')" and out["default"] == "False", out
    assert out["listed"] and out["after"] == "False" and out["gone"], out
    assert out["removed_run"] != "ran", out


def test_python_chart_from_code_interpreter_v1(e2b_python, e2b_env, interpreter_template):
    out = run_python(e2b_python, e2b_env, """
        import base64
        from e2b_code_interpreter import Sandbox
        s = Sandbox.create(timeout=300)  # the SDK's default template, code-interpreter-v1
        info = s.get_info()
        r = s.run_code("import numpy as np, pandas as pd, matplotlib.pyplot as plt\\n"
                       "x = np.linspace(0, 6.3, 50)\\n"
                       "plt.plot(x, np.sin(x))\\n"
                       "plt.show()\\n"
                       "int(pd.DataFrame({'a': [1, 2]}).a.sum())")
        s.kill()
        pngs = [base64.b64decode(x.png)[:4] == b"\\x89PNG" for x in r.results if x.png]
        out({"template": info.template_id, "error": str(r.error) if r.error else None,
             "pngs": pngs, "text": r.text})
    """, timeout=600)
    assert out["template"] == "code-interpreter-v1" and out["error"] is None, out
    assert out["pngs"] == [True] and out["text"] == "3", out


def test_python_is_ipython_on_code_interpreter_v1(e2b_python, e2b_env, interpreter_template):
    """code-interpreter-v1 has ipykernel: a context is a real IPython kernel (display(), a
    custom _repr_html_, !cmd, %magic, a DataFrame's data, PIL's show()), and kiln's runs,
    timeouts and state keep working over it."""
    out = run_python(e2b_python, e2b_env, """
        from e2b_code_interpreter import Sandbox
        s = Sandbox.create(timeout=300, envs={"FROM_CREATE": "seen"})
        r1 = s.run_code("from IPython.display import display, HTML\\n"
                        "display(HTML('<b>shown</b>'))\\n"
                        "class A:\\n    def _repr_html_(self):\\n        return '<i>custom</i>'\\n"
                        "A()")
        r2 = s.run_code("!echo from-shell\\nimport os\\nos.environ['FROM_CREATE']")
        r3 = s.run_code("%time total = sum(range(10))\\ntotal")
        r4 = s.run_code("import pandas as pd\\npd.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', 'z']})")
        r5 = s.run_code("from PIL import Image\\nImage.new('RGB', (8, 8), 'red').show()")
        try:
            s.run_code("import time\\ntime.sleep(60)", timeout=3)
            timed_out = False
        except Exception:
            timed_out = True
        r6 = s.run_code("total + 1")
        s.kill()
        out({"r1": [[r.html, r.is_main_result] for r in r1.results],
             "r2": [r2.logs.stdout, r2.text], "r3": [r3.logs.stdout, r3.text],
             "r4": [r4.results[0].data, bool(r4.results[0].html)],
             "r5": [bool(r.png) for r in r5.results], "timed_out": timed_out, "r6": r6.text,
             "errors": [str(r.error) for r in (r1, r2, r3, r4, r5, r6) if r.error]})
    """, timeout=600)
    assert out["errors"] == [], out
    assert out["r1"] == [["<b>shown</b>", False], ["<i>custom</i>", True]], out
    # E2B's server takes a string's quotes off its text.
    assert "from-shell" in "".join(out["r2"][0]) and out["r2"][1] == "seen", out
    assert "Wall time" in "".join(out["r3"][0]) and out["r3"][1] == "45", out
    assert out["r4"] == [{"a": [1, 2, 3], "b": ["x", "y", "z"]}, True], out
    assert out["r5"] == [True], out
    assert out["timed_out"] and out["r6"] == "46", out


def test_js_cells_take_es_modules_and_top_level_await(e2b_python, e2b_env):
    """E2B's JavaScript tests (languages/test_js.py): an ESM import, top-level await, a
    string result shown as it is, declarations kept between cells; and its contexts tests'
    default contexts, listed before their first run."""
    out = run_python(e2b_python, e2b_env, """
        from e2b_code_interpreter import Sandbox
        s = Sandbox.create("base", timeout=300)
        languages = sorted(c.language for c in s.list_code_contexts())  # before any run
        runs = [s.run_code(code, language="js") for code in (
            "import { join } from 'path'\\nimport * as os from 'os'\\n"
            "join('a', typeof os.cpus)",
            "async function main() {\\n    return 'Hello, World!'\\n}\\n\\nawait main()",
            "const add = (x, y) => x + y;\\nadd(1, 2);",
            "const n = await Promise.resolve(41)",
            "n + 1",
            "const m = await import('path'); m.sep",
        )]
        s.kill()
        out({"languages": languages,
             "runs": [[r.text, str(r.error) if r.error else None] for r in runs]})
    """)
    assert out["languages"] == ["javascript", "python"], out
    assert out["runs"] == [["a/function", None], ["Hello, World!", None], ["3", None],
                           [None, None], ["42", None], ["/", None]], out


def test_js_run_code_errors_and_contexts(e2b_node, e2b_env):
    out = run_node(e2b_node, e2b_env, """
        import { Sandbox } from '@e2b/code-interpreter'
        const s = await Sandbox.create('base', { timeoutMs: 300000 })
        await s.runCode('x = 7')
        const b = await s.runCode('x * 6')
        const lines = []
        await s.runCode('print("from js client")', { onStdout: (m) => lines.push(m.line) })
        const e = await s.runCode('undefined_name')
        const ctx = await s.createCodeContext({ cwd: '/tmp' })
        await s.runCode('z = 3', { context: ctx })
        const inCtx = await s.runCode('z', { context: ctx })
        const listed = (await s.listCodeContexts()).map((c) => c.id).includes(ctx.id)
        await s.restartCodeContext(ctx)
        const after = await s.runCode("'z' in dir()", { context: ctx })
        await s.removeCodeContext(ctx)
        await s.kill()
        out({ b: b.text, lines, err: e.error && [e.error.name, e.error.traceback.length > 0],
              inCtx: inCtx.text, listed, after: after.text, lang: ctx.language })
    """)
    assert out == {"b": "42", "lines": ["from js client\n"], "err": ["NameError", True],
                   "inCtx": "3", "listed": True, "after": "False", "lang": "python"}, out


def test_a_figure_carries_e2b_chart_data(e2b_python, e2b_env, interpreter_template):
    """E2B's charts tests (code-interpreter python/tests/charts): a matplotlib figure's
    result has `chart`, read by E2B's own e2b_charts in code-interpreter-v1, beside its PNG."""
    out = run_python(e2b_python, e2b_env, """
        from e2b_code_interpreter import Sandbox
        from e2b_code_interpreter.charts import BarChart, LineChart
        s = Sandbox.create(timeout=300)
        bar = s.run_code("import matplotlib.pyplot as plt\\n"
                         "plt.figure(figsize=(10, 6))\\n"
                         "plt.bar(['A', 'B', 'C'], [100, 200, 300], label='Sold')\\n"
                         "plt.xlabel('Authors'); plt.ylabel('Books'); plt.title('Sales')\\n"
                         "plt.show()")
        line = s.run_code("import numpy as np\\nx = np.linspace(0, 1, 5)\\n"
                          "plt.plot(x, x * 2, label='double'); plt.title('Line'); plt.show()")
        plain = s.run_code("1 + 1")
        s.kill()
        b, l = bar.results[0].chart, line.results[0].chart
        out({"bar": [isinstance(b, BarChart), b.title, b.x_label, b.y_label,
                     [e.label for e in b.elements], [e.value for e in b.elements],
                     [e.group for e in b.elements], bool(bar.results[0].png)],
             "line": [isinstance(l, LineChart), l.title, [e.label for e in l.elements],
                      len(l.elements[0].points)],
             "plain": [r.chart for r in plain.results]})
    """, timeout=600)
    assert out["bar"] == [True, "Sales", "Authors", "Books", ["A", "B", "C"], [100, 200, 300],
                          ["Sold"] * 3, True], out
    assert out["line"] == [True, "Line", ["double"], 5], out
    assert out["plain"] == [None], out
