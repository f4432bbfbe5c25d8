
# The Jupyter bridge, appended to kernel.py: where the image has ipykernel
# and jupyter_client (the code interpreter's image does), a context is a real
# IPython kernel (display(), _repr_*_, !cmd, %magic, rich MIME bundles), and
# this process speaks kiln's protocol on fd 1 and Jupyter's messaging to the
# kernel, over loopback ZeroMQ with a key made here. The kernel runs in this
# process group, so kilnd's SIGINT interrupts its code and SIGKILL ends both.

KILN_SETUP = r"""
def _kiln_setup():
    ip = get_ipython()
    ip.run_line_magic("colors", "nocolor")
    try:  # PIL's show() opens no viewer here: it shows the image, as E2B's does
        from PIL import Image

        def show(self, *args, **kwargs):
            from IPython.display import display
            display(self)

        Image.Image.show = show
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
_kiln_setup()
del _kiln_setup
"""


def jupyter_main():
    import subprocess, tempfile, time
    from jupyter_client.blocking import BlockingKernelClient
    from jupyter_client.connect import write_connection_file

    context = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("kiln-context=")), "")
    stdin = os.fdopen(os.dup(0), "rb")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    # SIGINT is for the kernel's code, which gets it from the group.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    folder = tempfile.mkdtemp(prefix="kiln-kernel-")
    conn, _ = write_connection_file(os.path.join(folder, "kernel.json"), ip="127.0.0.1")
    env = dict(os.environ)
    # Figures as a notebook shows them (plt.show(), a figure left open).
    if importlib.util.find_spec("matplotlib_inline"):
        env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    kernel = subprocess.Popen(
        [sys.executable, "-m", "ipykernel_launcher", "-f", conn, "--HistoryManager.enabled=False"],
        stdin=devnull, stdout=devnull, stderr=devnull, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    kc = BlockingKernelClient(connection_file=conn)
    kc.load_connection_file()
    kc.start_channels(hb=False)
    # Ready once it answers kernel_info. Not wait_for_ready: it calls a kernel
    # dead whose heartbeat has not begun within a second, and one starts
    # slower than that in a sandbox.
    deadline = time.monotonic() + 60
    while True:
        if kernel.poll() is not None or time.monotonic() > deadline:
            send({"k": "stderr", "text": "kiln kernel: ipykernel did not start (exit %s)\n"
                  % kernel.poll()})
            kernel.kill()
            os._exit(1)
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
    kc.execute(KILN_SETUP, silent=True, store_history=False)
    kc.get_shell_msg(timeout=30)
    send({"k": "ready", "context": context, "language": "python", "pid": os.getpid(),
          "version": sys.version.split()[0], "kernel": "ipykernel"})

    def run(req):
        msg_id = kc.execute(str(req.get("code", "")), store_history=True, allow_stdin=False)
        count, sent, dropped, status = 0, {"stdout": 0, "stderr": 0}, {}, "ok"
        started = False
        while True:
            try:
                msg = kc.get_iopub_msg(timeout=1)
            except Exception:  # queue.Empty: the kernel is quiet, or gone
                if kernel.poll() is not None:
                    send({"k": "error", "name": "KernelError", "value": "the kernel died",
                          "traceback": ""})
                    status = "error"
                    break
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "execute_input":
                count = content.get("execution_count", 0)
                send({"k": "start", "id": req.get("id", ""), "n": count})
                started = True
            elif kind == "stream":
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
                status = "interrupted" if name == "KeyboardInterrupt" else "error"
                send({"k": "error", "name": name, "value": content.get("evalue", ""),
                      "traceback": "\n".join(content.get("traceback", []))})
            elif kind == "status" and content.get("execution_state") == "idle":
                break
        if not started:
            send({"k": "start", "id": req.get("id", ""), "n": count})
        send({"k": "done", "id": req.get("id", ""), "n": count, "status": status,
              "dropped": dropped})

    for req in run_requests(stdin):
        run(req)
        if kernel.poll() is not None:
            break
    kc.stop_channels()
    kernel.kill()
    os._exit(0)


if JUPYTER:
    jupyter_main()
else:
    main()
