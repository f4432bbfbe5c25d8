#!/usr/bin/python3
"""The language image of kiln's SandboxFusion front (/sandboxfusion/{key}/run_code):
Debian bookworm's compilers and runtimes, built by kiln's own images API from
the recipe below, under the key in KILN_API_KEY, named `sandboxfusion`
(kilnd --sandboxfusion-image).

Two sets: `core` (python, pytest, cpp, nodejs, go, go_test, java, rust,
bash: what the tests use) and `full` (every language the front serves; see
docs/api.md "SandboxFusion's API").

Cached by content: the recipe's SHA-256 is a label of the image; when the
newest ready image of that name carries the same label, nothing is built
(not even the warm copy of an unchanged rebuild). A changed recipe builds a
new version; its apt steps come from kiln's step cache when unchanged.

The apt steps reach the Debian mirror this machine's apt uses (read from
its sources, never named here), and nothing else.

Prints one JSON line: {image, name, version, built, recipeSha256, seconds}.
Usage: /usr/bin/python3 examples/images/sandboxfusion.py [--set core|full] [--name sandboxfusion]
"""
import argparse
import glob
import hashlib
import json
import os
import sys
import time
import urllib.parse

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "sdk", "python"))

from kiln import Runtime  # noqa: E402

# Debian packages per language; the front's language table (src/api/
# sandboxfusion/languages.cc) names the tool each step needs.
CORE = ["g++", "libc6-dev", "golang-go", "default-jdk-headless", "rustc", "python3-pytest"]
FULL = CORE + [
    "php-cli",                   # php
    "mono-mcs", "mono-runtime",  # csharp
    "node-typescript",           # typescript (tsc)
    "sqlite3",                   # sql
    "lua5.4",                    # lua
    "r-base-core",               # R
    "ldc",                       # D_ut
    "ruby",                      # ruby
    "scala",                     # scala
    "junit5",                    # junit
    "kotlin",                    # kotlin_script
    "iverilog",                  # verilog
    "racket",                    # racket
    "libssl-dev",                # cpp's -lssl -lcrypto, as SandboxFusion's image has
]


def recipe(packages):
    return {
        "apt": packages,
        # Go's build cache and Java's tools in the sandbox user's reach.
        "env": {"GOCACHE": "/tmp/go-build", "GOPROXY": "off"},
        "workdir": "/workspace",
    }


def debian_mirror_hosts():
    """The hosts of the Debian mirrors this machine's apt uses (deb822 or
    one-line sources), as images/base/build.sh finds its mirror."""
    hosts = set()
    for path in glob.glob("/etc/apt/sources.list.d/*.sources"):
        with open(path) as f:
            for line in f:
                if line.startswith("URIs:"):
                    for uri in line.split()[1:]:
                        hosts.add(urllib.parse.urlsplit(uri).hostname)
    if os.path.exists("/etc/apt/sources.list"):
        with open("/etc/apt/sources.list") as f:
            for line in f:
                words = line.split()
                if len(words) > 1 and words[0] == "deb":
                    hosts.add(urllib.parse.urlsplit(words[1]).hostname)
    return sorted(h for h in hosts if h)


def recipe_digest(r):
    return hashlib.sha256(json.dumps(r, sort_keys=True).encode()).hexdigest()


def ensure(rt, name, packages, pool=None, on_log=None):
    """The image `name` built from the recipe of `packages`, reused when the
    newest ready one has the same recipe. Returns (image, built)."""
    r = recipe(packages)
    digest = recipe_digest(r)
    for image in rt.images.list(name=name, state="ready", limit=1):
        if (image.get("labels") or {}).get("recipe-sha256") == digest:
            return image, False
    image = rt.images.build(name=name, recipe=r, labels={"recipe-sha256": digest},
                            network={"allow": debian_mirror_hosts()},
                            build={"timeoutSeconds": 3600, "diskMiB": 16384, "memoryMiB": 4096},
                            on_log=on_log)
    if pool:
        rt.images.pool(image.id, pool)
    return image, True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", choices=["core", "full"], default="core")
    ap.add_argument("--name", default="sandboxfusion")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    rt = Runtime()
    t0 = time.monotonic()
    log = None if args.quiet else (lambda line: print(line["text"], file=sys.stderr))
    image, built = ensure(rt, args.name, CORE if args.set == "core" else FULL, on_log=log)
    print(json.dumps({"image": image.id, "name": image.name, "version": image.version,
                      "built": built, "set": args.set,
                      "recipeSha256": (image.get("labels") or {}).get("recipe-sha256"),
                      "seconds": round(time.monotonic() - t0, 1)}))


if __name__ == "__main__":
    main()
