# kiln's Python kernel: one interpreter context, started by kilnd as
# `python3 -u -c <this> kiln-context=<id>` (src/interpreter/interpreter.cc).
# Requests come on stdin, one JSON line each; answers go to the original
# fd 1 as JSON lines keyed "k". The user's code gets fresh pipes as fds 1
# and 2, read here, so print(), C-level writes and subprocesses all come
# back as stdout/stderr events. The standard library only; where the image
# has Jupyter's kernel, kernel_jupyter.py (appended) runs that instead.
import ast, base64, codecs, importlib.util, json, linecache, os, select, signal, sys, threading
import traceback

JUPYTER = all(importlib.util.find_spec(m) for m in ("ipykernel", "jupyter_client"))

PROTO = os.fdopen(os.dup(1), "wb", buffering=0)
LOCK = threading.Lock()
STREAM_CAP = 4 << 20  # bytes of each stream sent per run; the rest counted
RESULT_CAP = 8 << 20  # a result's data; past it only text/plain is kept


def send(msg):
    line = json.dumps(msg, default=str, ensure_ascii=False).encode("utf-8", "replace") + b"\n"
    with LOCK:
        PROTO.write(line)


class Capture(threading.Thread):
    """Reads one redirected fd and sends its text; `sync` waits until all
    written before it was sent (a marker through the pipe)."""

    def __init__(self, fd, name):
        super().__init__(daemon=True)
        self.name_, self.sent, self.dropped = name, 0, 0
        r, w = os.pipe()
        os.dup2(w, fd)
        os.close(w)
        self.r, self.fd = r, fd
        self.marker = ("\0kiln-sync-%d-%s\0" % (os.getpid(), name)).encode()
        self.seen = threading.Event()
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.start()

    def emit(self, data):
        if not data:
            return
        room = max(0, STREAM_CAP - self.sent)
        self.dropped += max(0, len(data) - room)
        data = data[:room]
        self.sent += len(data)
        text = self.decoder.decode(data)
        if text:
            send({"k": self.name_, "text": text})

    def run(self):
        buf, m = b"", self.marker
        while True:
            chunk = os.read(self.r, 65536)
            if not chunk:
                return
            # print() writes its text and its newline apart: what follows
            # within 2 ms joins the same event.
            while len(chunk) < 65536 and select.select([self.r], [], [], 0.002)[0]:
                more = os.read(self.r, 65536 - len(chunk))
                if not more:
                    break
                chunk += more
            buf += chunk
            while m in buf:
                before, buf = buf.split(m, 1)
                self.emit(before)
                self.seen.set()
            # Keep a tail that may be the start of a marker.
            keep = 0
            for n in range(min(len(m) - 1, len(buf)), 0, -1):
                if buf.endswith(m[:n]):
                    keep = n
                    break
            self.emit(buf[: len(buf) - keep])
            buf = buf[len(buf) - keep :]

    def sync(self):
        self.seen.clear()
        os.write(self.fd, self.marker)
        self.seen.wait(5)
        tail = self.decoder.decode(b"", final=True)
        if tail:
            send({"k": self.name_, "text": tail})
        self.decoder.reset()
        dropped, self.sent, self.dropped = self.dropped, 0, 0
        return dropped


RUNNING = False


def on_sigint(signum, frame):
    # Only user code is interrupted; between runs a SIGINT is a no-op.
    if RUNNING:
        raise KeyboardInterrupt


def bundle(value):
    data = {}
    for method, mime in (("_repr_html_", "text/html"), ("_repr_markdown_", "text/markdown"),
                         ("_repr_svg_", "image/svg+xml"), ("_repr_png_", "image/png"),
                         ("_repr_jpeg_", "image/jpeg"), ("_repr_json_", "application/json"),
                         ("_repr_latex_", "text/latex")):
        fn = getattr(value, method, None)
        if fn is None or isinstance(value, type):
            continue
        try:
            out = fn()
        except Exception:
            continue
        if isinstance(out, tuple):
            out = out[0]
        if out is None:
            continue
        if isinstance(out, (bytes, bytearray)):
            out = base64.b64encode(bytes(out)).decode()
        data[mime] = out
    try:
        data["text/plain"] = repr(value)
    except Exception as e:
        data["text/plain"] = "<repr failed: %s>" % type(e).__name__
    if len(json.dumps(data, default=str)) > RESULT_CAP:
        data = {"text/plain": data["text/plain"][:65536]}
    return data


def display(*values):
    for v in values:
        send({"k": "result", "main": False, "data": bundle(v)})


def figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    import io
    for num in plt.get_fignums():
        buf = io.BytesIO()
        try:
            plt.figure(num).savefig(buf, format="png", bbox_inches="tight")
            send({"k": "result", "main": False,
                  "data": {"image/png": base64.b64encode(buf.getvalue()).decode(),
                           "text/plain": "<Figure %d>" % num}})
        except Exception:
            pass
    plt.close("all")


def user_traceback(tb):
    # Frames of this kernel (file "<string>", the -c source) are not the user's.
    frames = [f for f in traceback.extract_tb(tb) if f.filename != "<string>"]
    return "".join(traceback.format_list(frames))


def run(code, n, scope, captures):
    global RUNNING
    name = "<cell-%d>" % n
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    value, status, err = None, "ok", None
    try:
        tree = ast.parse(code, name, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        body = compile(tree, name, "exec")
        RUNNING = True
        try:
            exec(body, scope)
            if last is not None:
                value = eval(compile(last, name, "eval"), scope)
        finally:
            RUNNING = False
    except KeyboardInterrupt as e:
        status, err = "interrupted", e
    except BaseException as e:  # SystemExit too: the kernel stays
        status, err = "error", e
    # What the code wrote comes before its error and results.
    sys.stdout.flush()
    sys.stderr.flush()
    dropped = {c.name_: c.sync() for c in captures}
    if err is not None:
        if isinstance(err, SyntaxError):
            text = "".join(traceback.format_exception_only(type(err), err))
        else:
            text = user_traceback(err.__traceback__)
            text = ("Traceback (most recent call last):\n" + text if text else "") + "".join(
                traceback.format_exception_only(type(err), err))
        send({"k": "error", "name": type(err).__name__, "value": str(err), "traceback": text})
    try:
        figures()
        if value is not None:
            scope["_"] = value
            send({"k": "result", "main": True, "data": bundle(value)})
    except BaseException as e:
        send({"k": "stderr", "text": "kiln kernel: result failed: %r\n" % (e,)})
    return status, dropped


def run_requests(stdin):
    """The run requests on `stdin`, one JSON line each, until "exit" or its end;
    a line that is not one is skipped."""
    while True:
        try:
            line = stdin.readline(64 << 20)
        except KeyboardInterrupt:
            continue
        if not line:
            return
        try:
            req = json.loads(line)
        except ValueError:
            continue
        if req.get("op") == "exit":
            return
        if req.get("op") == "run":
            yield req


class scoped_env:
    """A run's own environment variables, over the context's and put back after."""

    def __init__(self, env):
        self.env = {str(k): str(v) for k, v in (env or {}).items()} if isinstance(env, dict) else {}

    def __enter__(self):
        self.saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def argument(name):
    return next((a.split("=", 1)[1] for a in sys.argv if a.startswith(name + "=")), "")


def refuse_main(language, why):
    """A context for a language this image has no kernel for: it answers
    every run with the reason, so the caller reads it where it looks."""
    stdin = os.fdopen(os.dup(0), "rb")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    send({"k": "ready", "context": argument("kiln-context"), "language": language,
          "pid": os.getpid(), "version": ""})
    for count, req in enumerate(run_requests(stdin), 1):
        send({"k": "start", "id": req.get("id", ""), "n": count})
        send({"k": "error", "name": "KernelNotFound", "value": why, "traceback": ""})
        send({"k": "done", "id": req.get("id", ""), "n": count, "status": "error",
              "dropped": {}})
    os._exit(0)


def main():
    context = argument("kiln-context")
    stdin = os.fdopen(os.dup(0), "rb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # user code must not read the requests
    out, err = Capture(1, "stdout"), Capture(2, "stderr")
    # With -u, sys.stdout and sys.stderr write through to fds 1 and 2, now the pipes.
    signal.signal(signal.SIGINT, on_sigint)
    scope = {"__name__": "__main__", "__builtins__": __builtins__, "display": display}
    sys.argv = [""]
    count = 0
    send({"k": "ready", "context": context, "language": "python", "pid": os.getpid(),
          "version": sys.version.split()[0]})
    for req in run_requests(stdin):
        count += 1
        send({"k": "start", "id": req.get("id", ""), "n": count})
        with scoped_env(req.get("env")):
            status, dropped = run(str(req.get("code", "")), count, scope, (out, err))
        send({"k": "done", "id": req.get("id", ""), "n": count, "status": status,
              "dropped": dropped})
    os._exit(0)
