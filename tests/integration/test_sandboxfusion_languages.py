"""The full language matrix of kilnd's SandboxFusion front: every language the
front serves beyond the core set, from `make sandboxfusion-image-full`'s image
(examples/images/sandboxfusion.py --set full, named `sandboxfusion-full`), built
once per machine on the SandboxFusion state the core tests use.

Not part of `make test` (the image's first build takes ~20 min on 2 cores):
`make sandboxfusion-languages` runs it. Each language gets a program that
doubles the number on stdin (Success, "42") and a broken one: a compile error
for a compiled language (Failed, the compile step's non-zero code, no run), a
runtime error for the others (Failed, the run's non-zero code).
"""
import pytest

from client import Client
from conftest import start_kilnd, stop_kilnd
from test_sandboxfusion import SF_STATE, ensure_image

pytestmark = [pytest.mark.languages, pytest.mark.xdist_group("sandboxfusion")]

# language: (doubling program, broken program, compiled?)
PROGRAMS = {
    "php": ('$n = intval(trim(fgets(STDIN)));\necho $n * 2, "\\n";\n',
            'throw new Exception("boom");\n', False),
    "csharp": ("using System;\npublic class Program {\n  public static void Main(string[] a) {\n"
               "    int n = int.Parse(Console.ReadLine().Trim());\n    Console.WriteLine(n * 2);\n  }\n}\n",
               "public class Program { public static void Main( }\n", True),
    "typescript": ("const fs = require('fs');\nconst n: number = parseInt(fs.readFileSync(0, 'utf8'));\n"
                   "console.log(n * 2);\n",
                   "const x: number = 1;\nthrow new Error('boom ' + x);\n", False),
    "sql": ("CREATE TABLE t(x INTEGER);\nINSERT INTO t VALUES (21);\nSELECT x * 2 FROM t;\n",
            "SELECT * FROM no_such_table;\n", False),
    "lua": ("local n = tonumber(io.read())\nprint(n * 2)\n", "error('boom')\n", False),
    "R": ('n <- as.integer(readLines(file("stdin"), n = 1))\ncat(n * 2, "\\n", sep = "")\n',
          'stop("boom")\n', False),
    "perl": ("my $n = <STDIN>;\nprint $n * 2, \"\\n\";\n", "die \"boom\\n\";\n", False),
    # With unittest blocks, D's runtime runs them instead of main (a failing one is a
    # non-zero exit): the doubling program has none, as SandboxFusion's own D_ut sample.
    "D_ut": ("import std.stdio, std.conv, std.string;\n"
             "void main() { int n = to!int(readln().strip()); writeln(n * 2); }\n",
             "void main() { int x = ; }\n", True),
    "ruby": ("n = gets.to_i\nputs n * 2\n", "raise 'boom'\n", False),
    "scala": ("object Main {\n  def main(args: Array[String]): Unit = {\n"
              "    val n = scala.io.StdIn.readLine().trim.toInt\n    println(n * 2)\n  }\n}\n",
              "object Main { def main(args: Array[String]): Unit = { val x: Int = \"s\" } }\n", True),
    "junit": ("import org.junit.jupiter.api.Test;\nimport static org.junit.jupiter.api.Assertions.*;\n\n"
              "public class Doubler {\n  static int twice(int n) { return n * 2; }\n}\n\n"
              "class DoublerTest {\n  @Test\n  void doubles() {\n"
              "    assertEquals(42, Doubler.twice(21));\n    System.out.println(Doubler.twice(21));\n  }\n}\n",
              "public class Doubler { static int twice(int n) { return n * 2 } }\n", True),
    "kotlin_script": ("val n = readLine()!!.trim().toInt()\nprintln(n * 2)\n",
                      "throw IllegalStateException(\"boom\")\n", False),
    "verilog": ("module tb;\n  integer n;\n  initial begin\n    n = 21;\n    $display(\"%0d\", n * 2);\n"
                "    $finish;\n  end\nendmodule\n",
                "module tb;\n  initial begin\n    $display(\"x\")\n  end\nendmodule\n", True),
    "racket": ("#lang racket\n(define n (string->number (string-trim (read-line))))\n(displayln (* n 2))\n",
               "#lang racket\n(error 'boom \"no\")\n", False),
}


@pytest.fixture(scope="module")
def full_front(tmp_path_factory):
    """A kilnd on the machine's SandboxFusion state serving the full image, and a key."""
    SF_STATE.mkdir(parents=True, exist_ok=True)
    log = tmp_path_factory.mktemp("sf-full") / "kilnd.log"
    d = start_kilnd(SF_STATE, "--sandboxfusion-image", "sandboxfusion-full", log_path=log)
    try:
        built = ensure_image(d, d.admin_key, "--set", "full", "--name", "sandboxfusion-full")
        admin = Client(d.url, key=d.admin_key)
        key = admin.ok("POST", "/v1/keys", json={"name": "sandboxfusion-languages"})["secret"]
        yield d, key, built
    finally:
        stop_kilnd(d)


def _run(front, language, code, stdin=""):
    d, key, _ = front
    r = Client(d.url, timeout=600).post(
        f"/sandboxfusion/{key}/run_code",
        json={"code": code, "language": language, "stdin": stdin, "compile_timeout": 120,
              "run_timeout": 60})
    assert r.status == 200, r
    return r.json()


@pytest.mark.parametrize("language", sorted(PROGRAMS))
def test_each_language_doubles_and_fails_as_sandbox_fusion_does(full_front, language):
    good, bad, compiled = PROGRAMS[language]
    a = _run(full_front, language, good, "21\n")
    assert a["status"] == "Success", a
    assert "42" in a["run_result"]["stdout"].split(), a
    if compiled:
        assert a["compile_result"]["return_code"] == 0, a
    b = _run(full_front, language, bad, "21\n")
    assert b["status"] == "Failed", b
    if compiled:
        assert b["compile_result"]["status"] == "Finished" and b["compile_result"]["return_code"] != 0, b
        assert b["run_result"] is None, b
    else:
        assert b["run_result"]["status"] == "Finished" and b["run_result"]["return_code"] != 0, b
