#!/usr/bin/python3
"""A code-interpreter image: python3 with numpy, pandas and matplotlib, built
once from a recipe and started warm for every sandbox.

The recipe is the JSON below (RECIPE). Its pip step runs in a kiln sandbox
that is offline except for the hosts the build allows; this example allows
the package index that this machine's pip uses (read from pip itself, so
nothing here names a host), with `network.allow`.

Where egress re-signs TLS with a site CA (PIP_CERT names its bundle, as on
kiln's test machines), the bundle goes into the image first and pip is told
to trust it: pass --ca-bundle FILE (default: $PIP_CERT if set).

Then it creates a sandbox from the image, plots a sine with pandas and
matplotlib, and downloads the PNG. Prints one JSON summary line last.

Uses the kilnd at KILN_API_URL / KILN_API_KEY. Standard library + SDK.
Usage: /usr/bin/python3 examples/images/code_interpreter.py [--name code-interpreter] [--out plot.png]
"""
import argparse
import json
import os
import subprocess
import sys
import time
import urllib.parse

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "sdk", "python"))

from kiln import Runtime  # noqa: E402

RECIPE = {
    "pip": ["numpy", "pandas", "matplotlib"],
    "env": {"MPLBACKEND": "Agg"},
    "files": [{"path": "/opt/ci/plot.py", "mode": "0644", "content": (
        "import numpy as np, pandas as pd, matplotlib.pyplot as plt\n"
        "x = np.linspace(0, 2 * np.pi, 200)\n"
        "df = pd.DataFrame({'x': x, 'sin': np.sin(x)})\n"
        "df.plot(x='x', y='sin')\n"
        "plt.savefig('/workspace/plot.png')\n"
        "print(len(df), round(float(df['sin'].max()), 3))\n")}],
}

PLOT = "python /opt/ci/plot.py"


def package_index_hosts():
    """The hosts this machine's pip downloads from: its index (pip config,
    else pip's default) and the files host PyPI serves wheels from."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                         capture_output=True, text=True)
    index = os.environ.get("PIP_INDEX_URL") or (out.stdout.strip() if out.returncode == 0 else "")
    from pip._internal.models.index import PyPI  # pip's own default, not a name typed here
    hosts = {urllib.parse.urlsplit(index or PyPI.url).hostname, PyPI.file_storage_domain}
    return sorted(h for h in hosts if h)


def recipe(ca_bundle):
    """RECIPE, or with a site CA: the bundle copied in, then pip trusting it
    (files come before commands in a recipe, after its pip step)."""
    if not ca_bundle:
        return RECIPE
    with open(ca_bundle) as f:
        bundle = f.read()
    r = {k: v for k, v in RECIPE.items() if k != "pip"}
    r["files"] = RECIPE["files"] + [{"path": "/etc/ssl/site-ca.pem", "content": bundle}]
    r["commands"] = ["python3 -m pip install --no-cache-dir --break-system-packages "
                     "--cert /etc/ssl/site-ca.pem " + " ".join(RECIPE["pip"])]
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", default="code-interpreter")
    ap.add_argument("--out", default="")
    ap.add_argument("--ca-bundle", default=os.environ.get("PIP_CERT", ""))
    args = ap.parse_args()
    rt = Runtime()
    t0 = time.monotonic()
    lines = []
    image = rt.images.build(name=args.name, recipe=recipe(args.ca_bundle), network={"allow": package_index_hosts()},
                            build={"timeout_seconds": 1200},
                            on_log=lambda line: lines.append(line["text"]))
    built_s = time.monotonic() - t0
    print(f"built {image['name']}@{image['version']} in {built_s:.1f} s "
          f"({image['stepsRun']} steps run, {image['stepsCached']} cached)", file=sys.stderr)
    t1 = time.monotonic()
    with rt.sandboxes.create(image=args.name, labels={"example": "code_interpreter"}) as sbx:
        created_s = time.monotonic() - t1
        r = sbx.exec(PLOT)
        assert r.exit_code == 0, r.stderr
        png = sbx.files.read("/workspace/plot.png")
        versions = sbx.exec("python -c 'import numpy, pandas, matplotlib; "
                            "print(numpy.__version__, pandas.__version__, matplotlib.__version__)'").stdout.split()
    if args.out:
        with open(args.out, "wb") as f:
            f.write(png)
    print(json.dumps({"ok": png.startswith(b"\x89PNG"), "image": image["id"], "buildSeconds": round(built_s, 1),
                      "createSeconds": round(created_s, 3), "plot": r.stdout.strip(), "pngBytes": len(png),
                      "numpy": versions[0], "pandas": versions[1], "matplotlib": versions[2]}))


if __name__ == "__main__":
    main()
