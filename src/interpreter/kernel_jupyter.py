
# The Jupyter bridge, appended to kernel.py: where the image has ipykernel
# and jupyter_client (the code interpreter's image does), a Python context is
# a real IPython kernel (display(), _repr_*_, !cmd, %magic, rich MIME
# bundles), and an R, Java or Bash context the image's Jupyter kernel for it
# (its kernelspec: IRkernel, JJava, bash_kernel). This process speaks kiln's
# protocol on fd 1 and Jupyter's messaging to the kernel, over loopback
# ZeroMQ with a key made here. The kernel runs in this process group, so
# kilnd's SIGKILL ends both; kilnd's SIGINT reaches a kernel whose spec says
# interrupt by signal from the group, and one that says by message (JJava's:
# a JVM would exit) as an interrupt_request sent from here. One before the
# kernel has the run is kept here (jupyter_main's on_sigint).

KILN_SETUP = r"""
def _kiln_setup():
    ip = get_ipython()
    ip.run_line_magic("colors", "nocolor")
    try:  # PIL's show() opens no viewer here: it shows the image, as E2B's does,
        from PIL import Image  # and a save to a named file shows it too (E2B's)

        def show(self, *args, **kwargs):
            from IPython.display import display
            display(self)

        saved = Image.Image.save

        def save(self, fp, format=None, **params):
            if isinstance(fp, str):
                show(self)
            return saved(self, fp, format, **params)

        Image.Image.show, Image.Image.save = show, save
    except Exception:
        pass

    # A DataFrame's columns as data (E2B's result.data): each a JSON list.
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    class DataFormatter(BaseFormatter):
        format_type = Unicode("application/vnd.kiln.data+json")
        print_method = ObjectName("_repr_kiln_data_")
        _return_type = (dict,)

    def columns(df):
        import json
        return {str(c): json.loads(df[c].to_json(orient="values", date_format="iso"))
                for c in df.columns}

    data = DataFormatter(parent=ip.display_formatter)
    for module in ("pandas", "pandas.core.frame"):  # where pandas 3 and 2 say it lives
        data.for_type_by_name(module, "DataFrame", columns)
    ip.display_formatter.formatters[data.format_type] = data

    # A matplotlib figure's chart (E2B's result.chart), by E2B's own
    # e2b_charts where the image has it.
    import importlib.util
    if importlib.util.find_spec("e2b_charts"):
        import json, sys

        # By __call__, not a printer for Figure: matplotlib's inline backend
        # drops every formatter's Figure printer when it starts.
        class ChartFormatter(BaseFormatter):
            format_type = Unicode("application/vnd.kiln.chart+json")
            print_method = ObjectName("_repr_kiln_chart_")
            _return_type = (dict,)

            def __call__(self, obj):
                figure = sys.modules.get("matplotlib.figure")
                if figure is None or not isinstance(obj, figure.Figure):
                    return None
                from e2b_charts import chart_figure_to_dict
                try:
                    return json.loads(json.dumps(chart_figure_to_dict(obj))) or None
                except Exception:  # a figure it cannot read: no chart, the PNG stays
                    return None

        charts = ChartFormatter(parent=ip.display_formatter)
        ip.display_formatter.formatters[charts.format_type] = charts
_kiln_setup()
del _kiln_setup
"""


# The kernelspec names tried first for a language, then any spec of it.
SPEC_NAMES = {"r": ("ir", "r"), "java": ("java", "jjava"), "bash": ("bash",)}


def quoted(value):
    # A JSON string is a string literal in Java and R alike.
    return json.dumps(str(value))


def env_code(language, env, unset=()):
    """Code that sets `env` and unsets `unset` in the kernel, in its own
    language (E2B's server does the same with the same calls); Java's are
    its system properties, where E2B's clients read them."""
    import shlex
    lines = []
    for k, v in env.items():
        lines.append({
            "python": "__import__('os').environ[%s] = %s" % (quoted(k), quoted(v)),
            "r": "Sys.setenv(%s = %s)" % (quoted(k), quoted(v)),
            "java": "System.setProperty(%s, %s);" % (quoted(k), quoted(v)),
            "bash": "export %s=%s" % (k, shlex.quote(str(v))),
        }[language])
    for k in unset:
        lines.append({
            "python": "__import__('os').environ.pop(%s, None)" % quoted(k),
            "r": "Sys.unsetenv(%s)" % quoted(k),
            "java": "System.clearProperty(%s);" % quoted(k),
            "bash": "unset %s" % k,
        }[language])
    return "\n".join(lines)


def kernel_command(language, conn):
    """The kernel's argv, env and interrupt mode; or the reason there is none."""
    if language == "python":
        return ([sys.executable, "-m", "ipykernel_launcher", "-f", conn,
                 "--HistoryManager.enabled=False"], {}, "signal"), None
    from jupyter_client.kernelspec import KernelSpecManager
    specs = KernelSpecManager().get_all_specs()
    name = next((n for n in SPEC_NAMES[language] if n in specs), None) or next(
        (n for n in sorted(specs)
         if specs[n]["spec"].get("language", "").lower() == language), None)
    if name is None:
        return None, ("this image has no Jupyter kernel for %s (code-interpreter-v1 has one; "
                      "kernels found: %s)" % (language, ", ".join(sorted(specs)) or "none"))
    spec, folder = specs[name]["spec"], specs[name]["resource_dir"]
    argv = [a.replace("{connection_file}", conn).replace("{resource_dir}", folder)
            for a in spec["argv"]]
    if argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return (argv, spec.get("env") or {}, spec.get("interrupt_mode", "signal")), None


def jupyter_main(language):
    # kilnd's SIGINT stands for the run it last sent. While the kernel starts,
    # or between the bridge reading that run and handing it over, the kernel
    # cannot take it (it would die starting, or ignores it between runs): the
    # bridge keeps it, and that run, still waiting in stdin, is answered as
    # interrupted when its turn comes. Set first: the imports below take a
    # second, and a start is when a client's short timeout ends.
    stdin = os.fdopen(os.dup(0), "rb")
    # "idle", "taken" (a run read, not yet the kernel's), "executing" or
    # "finishing".
    state, cancelled, forward = ["idle"], [False], [None]

    def on_sigint(*_):
        if state[0] == "executing":
            if forward[0]:
                forward[0]()
        elif state[0] == "taken" or (state[0] == "idle" and select.select([stdin], [], [], 0)[0]):
            cancelled[0] = True

    signal.signal(signal.SIGINT, on_sigint)
    import subprocess, tempfile, time
    from jupyter_client.blocking import BlockingKernelClient
    from jupyter_client.connect import write_connection_file

    context = argument("kiln-context")
    folder = tempfile.mkdtemp(prefix="kiln-kernel-")
    conn, _ = write_connection_file(os.path.join(folder, "kernel.json"), ip="127.0.0.1")
    command, why = kernel_command(language, conn)
    if command is None:
        refuse_main(language, why)
    argv, spec_env, interrupt_mode = command
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    by_message = interrupt_mode == "message"
    env = dict(os.environ)
    env.update({k: str(v) for k, v in spec_env.items()})
    # Figures as a notebook shows them (plt.show(), a figure left open).
    if language == "python" and importlib.util.find_spec("matplotlib_inline"):
        env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    # The kernel starts with SIGINT ignored, so one while it starts is
    # harmless. A kernel interrupted by signal then takes it from the group
    # while it runs code (ipykernel's handlers set Python's own, R sets its
    # own); one by message (a JVM would exit) gets it from here.
    kernel = subprocess.Popen(argv, stdin=devnull, stdout=devnull, stderr=devnull, env=env,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    kc = BlockingKernelClient(connection_file=conn)
    kc.load_connection_file()
    kc.start_channels(hb=False)
    if by_message:
        forward[0] = lambda: kc.control_channel.send(kc.session.msg("interrupt_request", {}))
    # Ready once it answers kernel_info. Not wait_for_ready: it calls a kernel
    # dead whose heartbeat has not begun within a second, and one starts
    # slower than that in a sandbox (a JVM's several seconds).
    deadline = time.monotonic() + 120
    while True:
        if kernel.poll() is not None or time.monotonic() > deadline:
            kernel.kill()
            refuse_main(language, "the %s kernel (%s) did not start (exit %s)"
                        % (language, argv[0], kernel.poll()))
        kc.kernel_info()
        try:
            # Any of the requests' answers: they come in order, one a try.
            if kc.get_shell_msg(timeout=1)["msg_type"] == "kernel_info_reply":
                break
        except Exception:  # queue.Empty: not up yet
            continue
    while True:  # the answers to the requests sent before the kernel was up
        try:
            kc.get_shell_msg(timeout=0.2)
        except Exception:
            break

    def await_reply(msg_id, seconds, poll):
        """Reads the shell socket up to the reply to msg_id (others dropped),
        for at most `seconds` or until the kernel ends."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            try:
                if kc.get_shell_msg(timeout=poll)["parent_header"].get("msg_id") == msg_id:
                    return
            except Exception:
                if kernel.poll() is not None:
                    return

    def quietly(code):
        """Runs code with no output kept and waits for it."""
        if code:
            await_reply(kc.execute(code, silent=True, store_history=False), 60, 1)

    if language == "python":
        quietly(KILN_SETUP)
    elif language == "java":
        # The context's environment as system properties, and its folder as
        # user.dir, as E2B's Java contexts have them.
        props = {k: v for k, v in os.environ.items() if k.replace("_", "").isalnum()}
        here = os.environ.get("PWD", "")
        props["user.dir"] = here if here and os.path.samefile(here, ".") else os.getcwd()
        quietly(env_code("java", props))
    send({"k": "ready", "context": context, "language": language, "pid": os.getpid(),
          "version": sys.version.split()[0], "kernel": os.path.basename(argv[0])})

    runs = [0]  # the count kept here: some kernels (JJava) count quiet runs too

    def run(req):
        extra = req.get("env") if isinstance(req.get("env"), dict) else {}
        quietly(env_code(language, extra))
        if cancelled[0]:
            return interrupted(req)
        state[0] = "executing"
        msg_id = kc.execute(str(req.get("code", "")), store_history=True, allow_stdin=False)
        runs[0] += 1
        count, sent, dropped, status = runs[0], {"stdout": 0, "stderr": 0}, {}, ["ok"]
        # Started now, not at the kernel's execute_input: nothing the kernel
        # says for this run can come before it (kilnd skips what does).
        send({"k": "start", "id": req.get("id", ""), "n": count})

        def take(msg):
            """Sends one of the kernel's messages for this run; whether it was the idle."""
            if msg["parent_header"].get("msg_id") != msg_id:
                return False
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                name = "stderr" if content.get("name") == "stderr" else "stdout"
                text = content.get("text", "")
                room = max(0, STREAM_CAP - sent[name])
                if len(text) > room:
                    dropped[name] = dropped.get(name, 0) + len(text) - room
                    text = text[:room]
                sent[name] += len(text)
                if text:
                    send({"k": name, "text": text})
            elif kind in ("execute_result", "display_data"):
                data = content.get("data", {})
                if len(json.dumps(data, default=str)) > RESULT_CAP:
                    data = {"text/plain": str(data.get("text/plain", ""))[:65536]}
                send({"k": "result", "main": kind == "execute_result", "data": data})
            elif kind == "error":
                name = content.get("ename", "Error")
                status[0] = "interrupted" if name in ("KeyboardInterrupt", "Interrupted") else "error"
                send({"k": "error", "name": name, "value": content.get("evalue", ""),
                      "traceback": "\n".join(content.get("traceback", []))})
            return kind == "status" and content.get("execution_state") == "idle"

        while True:
            try:
                msg = kc.get_iopub_msg(timeout=1)
            except Exception:  # queue.Empty: the kernel is quiet, or gone
                if kernel.poll() is not None:
                    send({"k": "error", "name": "KernelError", "value": "the kernel died",
                          "traceback": ""})
                    status[0] = "error"
                    break
                continue
            if take(msg):
                # What the kernel sent for this run after its idle (its reply
                # comes last on the other socket): read up to the reply.
                await_reply(msg_id, 2, 0.2)
                while True:
                    try:
                        take(kc.get_iopub_msg(timeout=0))
                    except Exception:
                        break
                break
        state[0] = "finishing"  # a late interrupt is this run's, not the next's
        # Put back what the run's own variables covered: the context's
        # value, or none.
        quietly(env_code(language, {k: os.environ[k] for k in extra if k in os.environ},
                         [k for k in extra if k not in os.environ]))
        send({"k": "done", "id": req.get("id", ""), "n": count, "status": status[0],
              "dropped": dropped})

    def interrupted(req):
        """A run interrupted before the kernel had it: answered, never run."""
        cancelled[0] = False
        send({"k": "start", "id": req.get("id", ""), "n": runs[0]})
        send({"k": "error", "name": "KeyboardInterrupt", "value": "interrupted before it began",
              "traceback": ""})
        send({"k": "done", "id": req.get("id", ""), "n": runs[0], "status": "interrupted",
              "dropped": {}})

    for req in run_requests(stdin):
        state[0] = "taken"
        if cancelled[0]:
            interrupted(req)
        else:
            run(req)
        state[0] = "idle"
        if kernel.poll() is not None:
            break
    kc.stop_channels()
    kernel.kill()
    os._exit(0)


LANGUAGE = argument("kiln-language") or "python"
if JUPYTER:
    jupyter_main(LANGUAGE)
elif LANGUAGE == "python":
    main()
else:
    refuse_main(LANGUAGE, "a %s context needs Jupyter (ipykernel, jupyter_client) and a %s "
                "kernel in the image (code-interpreter-v1 has them)" % (LANGUAGE, LANGUAGE))
