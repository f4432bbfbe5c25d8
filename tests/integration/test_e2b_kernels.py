"""E2B's code interpreter's other languages on code-interpreter-v1 (issue 45,
item 2), with E2B's Python SDK unchanged: R (IRkernel), Java (JJava) and Bash
(bash_kernel) contexts are the image's Jupyter kernels behind kiln's bridge
(src/interpreter/kernel_jupyter.py); TypeScript is kiln's JavaScript kernel
with the image's `typescript` package. What E2B's own tests of them ask
(code-interpreter python/tests: test_default_kernels, test_cwd, env_vars/*):
output, values, state between cells, the sandbox's envs, a run's own envs
put back after it, /home/user as the folder, and interrupts (a JVM by
Jupyter's interrupt message, R by signal). An image without a kernel for a
language answers each run with why.
"""
from e2b_clients import (GROUP, e2b_env, e2b_key, e2b_python, interpreter_template,  # noqa: F401
                         run_python)

pytestmark = GROUP


def test_r_java_bash_and_typescript_contexts(e2b_python, e2b_env, interpreter_template):
    out = run_python(e2b_python, e2b_env, """
        from e2b_code_interpreter import Sandbox
        s = Sandbox.create(timeout=600, envs={"FROM_CREATE": "seen"})
        def r(code, language, **kw):
            x = s.run_code(code, language=language, timeout=240, **kw)
            return {"stdout": x.logs.stdout, "text": x.text,
                    "results": [y.text for y in x.results],
                    "error": [x.error.name, x.error.value] if x.error else None}
        got = {
            "r": [r('print("Hello, World!")', "r"), r("Sys.getenv('FROM_CREATE')", "r"),
                  r("getwd()", "r"), r("x <- 41", "r"), r("x + 1", "R")],
            "java": [r('System.out.println("Hello, World!")', "java"),
                     r('System.getProperty("FROM_CREATE")', "java"),
                     r('System.getProperty("user.dir")', "java"),
                     r("int z = 41;", "java"), r("z + 1", "java")],
            "bash": [r("echo $FROM_CREATE", "bash"), r("pwd", "bash"), r("X=5", "bash"),
                     r("echo $((X + 1))", "bash")],
            "ts": [r("const message: string = 'Hello, World!'; console.log(message)", "ts"),
                   r("process.cwd()", "typescript"),
                   r("interface P { n: number }\\nconst p: P = { n: await Promise.resolve(6) }\\n"
                     "p.n * 7", "ts"),
                   r("const bad: = 1", "ts")],
        }
        got["home"] = ["".join(s.run_code("import os; print(os.getcwd())").logs.stdout).strip(),
                       s.run_code("process.cwd()", language="js").text,
                       s.commands.run("pwd").stdout.strip()]
        ctx = s.create_code_context(language="r")
        got["context"] = [ctx.language, r("exists('x')", None, context=ctx)["results"]]
        got["listed"] = sorted({c.language for c in s.list_code_contexts()})
        s.kill()
        out(got)
    """, timeout=900)
    r, java, bash, ts = out["r"], out["java"], out["bash"], out["ts"]
    assert [x["error"] for x in r + java + bash + ts[:3]] == [None] * 17, out
    assert r[0]["stdout"] == ['[1] "Hello, World!"\n'], r
    # E2B's test_cwd: every language's getcwd() in /home/user.
    assert out["home"] == ["/home/user"] * 3, out
    assert r[1]["results"] == ['[1] "seen"'] and r[2]["results"] == ['[1] "/home/user"'], r
    assert r[4]["results"] == ["[1] 42"], r
    assert java[0]["stdout"] == ["Hello, World!\n"], java
    assert [java[i]["text"] for i in (1, 2, 4)] == ["seen", "/home/user", "42"], java
    assert bash[0]["stdout"] == ["seen\n"] and bash[1]["stdout"] == ["/home/user\n"], bash
    assert bash[3]["stdout"] == ["6\n"], bash
    assert ts[0]["stdout"] == ["Hello, World!\n"], ts
    assert ts[1]["text"] == "/home/user" and ts[2]["text"] == "42", ts
    assert ts[3]["error"][0] == "SyntaxError", ts
    # A new R context is its own kernel: the default one's x is not in it.
    assert out["context"] == ["r", ["[1] FALSE"]], out
    assert {"python", "javascript", "r", "java", "bash", "typescript"} <= set(out["listed"]), out


def test_a_runs_own_envs_in_every_language_are_put_back(e2b_python, e2b_env,
                                                        interpreter_template):
    """E2B's env_vars tests: a run's envs over the sandbox's, and the sandbox's value (or
    none) in the next run."""
    out = run_python(e2b_python, e2b_env, """
        from e2b_code_interpreter import Sandbox
        s = Sandbox.create(timeout=600, envs={"TEST_ENV_VAR": "supertest"})
        read = {
            "python": ("import os; os.environ.get('{k}', 'default')", "text"),
            "js": ("process.env.{k} || 'default'", "text"),
            "ts": ("process.env.{k} ?? 'default'", "text"),
            "r": ("Sys.getenv('{k}', unset = 'default')", "results"),
            "java": ('System.getProperty("{k}", "default")', "text"),
            "bash": ("echo ${{{k}:-default}}", "stdout"),
        }
        def value(language, key, **kw):
            code, field = read[language]
            x = s.run_code(code.format(k=key), language=language, timeout=240, **kw)
            if x.error:
                return "error: %s %s" % (x.error.name, x.error.value)
            v = {"text": x.text, "results": x.results[0].text if x.results else None,
                 "stdout": "".join(x.logs.stdout)}[field]
            return v.strip().replace('[1] ', '').strip(chr(34) + chr(39))
        got = {}
        for language in read:
            got[language] = [value(language, "FOO", envs={"FOO": "bar"}), value(language, "FOO"),
                             value(language, "TEST_ENV_VAR", envs={"TEST_ENV_VAR": "overwrite"}),
                             value(language, "TEST_ENV_VAR")]
        s.kill()
        out(got)
    """, timeout=900)
    for language, values in out.items():
        assert values == ["bar", "default", "overwrite", "supertest"], (language, values)


def test_interrupts_reach_a_jvm_by_message_and_r_by_signal(e2b_python, e2b_env,
                                                           interpreter_template):
    out = run_python(e2b_python, e2b_env, """
        import time
        from e2b_code_interpreter import Sandbox
        s = Sandbox.create(timeout=600)
        got = {}
        for language, slow, after in (("java", "Thread.sleep(120000);", "1 + 1"),
                                      ("r", "Sys.sleep(120)", "1 + 1")):
            s.run_code(after, language=language, timeout=240)  # the kernel is up
            t = time.monotonic()
            try:
                s.run_code(slow, language=language, timeout=5)
                timed_out = False
            except Exception:
                timed_out = True
            x = s.run_code(after, language=language, timeout=60)
            got[language] = [timed_out, round(time.monotonic() - t, 1),
                             x.text or (x.results[0].text if x.results else None),
                             str(x.error) if x.error else None]
        s.kill()
        out(got)
    """, timeout=900)
    assert out["java"][0] and out["java"][2] == "2" and out["java"][3] is None, out
    assert out["r"][0] and out["r"][2] == "[1] 2" and out["r"][3] is None, out
    # Interrupted, not killed and restarted: well under kiln's 10 s grace.
    assert out["java"][1] < 30 and out["r"][1] < 30, out


def test_an_image_without_the_kernel_says_so(e2b_python, e2b_env):
    out = run_python(e2b_python, e2b_env, """
        from e2b_code_interpreter import Sandbox
        s = Sandbox.create("base", timeout=300)
        x = s.run_code("1 + 1", language="r")
        y = s.run_code("1 + 1", language="python")
        s.kill()
        out({"r": [x.error.name, x.error.value] if x.error else None, "python": y.text})
    """)
    assert out["r"][0] == "KernelNotFound" and "code-interpreter-v1" in out["r"][1], out
    assert out["python"] == "2", out
