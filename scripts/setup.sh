#!/usr/bin/env bash
# Installs everything kiln needs on a Debian 12 (bookworm) host. Idempotent:
# a second run changes nothing and finishes in seconds. One line per step;
# the whole output goes to build/setup.log (scripts/step.sh).
#   packages  build tools and libraries from Debian (bookworm-backports added
#             with the mirror the machine's apt sources already use)
#   node      Node >= 20 for the TypeScript SDK; gymnasium for one test
#   runsc     the pinned gVisor, built from its Go module (build-runsc.sh)
#   console   the web console's bundle, build/console (needs node)
#   playwright Playwright in /opt/kiln/console-venv, for the console's tests
#             (not a default step: `make test` runs it)
#   ray       Ray in /opt/kiln/ray-venv, for kiln.ray's tests (not a default
#             step: `make test` runs it; `make demo` needs no Ray)
#
# Usage: setup.sh [STEP...]   (default: every step; a step alone is for step.sh)
set -euo pipefail

[ "$(id -u)" = 0 ] || { echo "setup.sh: run as root" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
here=$(cd "$(dirname "$0")" && pwd)

# The first URI that serves the bookworm suite, from deb822 or one-line sources.
debian_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN{RS=""} /Suites:[^\n]*bookworm( |$|\n)/ && /URIs:/ {
           match($0, /URIs:[ \t]*[^ \t\n]+/); u=substr($0, RSTART, RLENGTH);
           sub(/URIs:[ \t]*/, "", u); if (u !~ /security/) { print u; exit } }' "$f"
  done
  if [ -f /etc/apt/sources.list ]; then
    awk '$1=="deb" && $0 ~ / bookworm( |$)/ && $0 !~ /security/ {
           for (i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list
  fi
}

# Boost 1.81, not the default libboost-dev (1.74): Boost.URL first came in 1.81.
PKGS=(build-essential cmake ninja-build pkg-config clang-format
      libboost1.81-dev libboost-url1.81-dev
      nlohmann-json3-dev libsqlite3-dev libssl-dev libxxhash-dev libcli11-dev
      libgtest-dev libgmock-dev libbenchmark-dev
      libprotobuf-dev protobuf-compiler  # E2B's envd protocol (src/api/e2b/envd)
      debootstrap iproute2 procps psmisc python3 python3-pytest python3-pytest-xdist python3-pip curl ca-certificates
      openssl git  # openssl, git: the network tests' own test hosts (CA, git repository)
      python3-yaml  # the Kubernetes manifests' test (tests/integration/test_deploy_kubernetes.py)
      # Images: layers and build contexts (libarchive); pulls (skopeo); the
      # image tests' registry, image packer and shell-less or musl programs.
      libarchive-dev skopeo umoci docker-registry musl-tools busybox-static apache2-utils
      # bash for the tests' stand-ins of Docker Hub images (tests/integration/hub_images.py).
      bash-static
      # Terminals driven as a person would (tmux); the vendors' own clients
      # (withruntime, pandastack) installed from PyPI into a test's venv.
      tmux python3-venv
      # Fuzzing: clang and its libFuzzer + sanitizer runtimes (make fuzz).
      clang-14 libclang-rt-14-dev
      # SandboxFusion's own server in its lite isolation (bench/sandboxfusion.py).
      cgroup-tools
      # The web console's tests drive Debian's browser (Playwright's own
      # downloads are not used).
      chromium)

# promtool checks deploy/prometheus's rules. It comes in Debian's prometheus
# package, whose server is kept from starting or starting at boot: kiln
# needs only the tool.
PROMETHEUS_PKG=prometheus

step_packages() {
  local backports=/etc/apt/sources.list.d/kiln-bookworm-backports.sources updated=0
  if [ ! -f "$backports" ]; then
    local mirror
    mirror=$(debian_mirror | head -n 1)
    [ -n "$mirror" ] || { echo "setup.sh: no bookworm mirror found in apt sources" >&2; return 1; }
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: %s\n' \
      "$mirror" /usr/share/keyrings/debian-archive-keyring.gpg >"$backports"
    apt-get update -q
    updated=1
  fi
  local missing=() p
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  # What the node and runsc steps would otherwise install themselves, here,
  # so that those steps (which make runs at once, beside the base image)
  # never take dpkg's lock: npm (which then installs Node 20) and a Go that
  # can fetch the pinned toolchain.
  command -v npm >/dev/null || missing+=(nodejs npm)
  bash "$here/build-runsc.sh" --has-go || missing+=(golang-1.23-go/bookworm-backports)
  if [ ${#missing[@]} -gt 0 ]; then
    [ "$updated" = 1 ] || apt-get update -q
    apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}"
  fi
  if ! command -v promtool >/dev/null; then
    local guard=/usr/sbin/policy-rc.d own_guard=0
    if [ ! -e "$guard" ]; then
      printf '#!/bin/sh\nexit 101\n' >"$guard" && chmod 755 "$guard" && own_guard=1
    fi
    apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends "$PROMETHEUS_PKG" ||
      { [ "$own_guard" = 0 ] || rm -f "$guard"; return 1; }
    [ "$own_guard" = 0 ] || rm -f "$guard"
    if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
      systemctl disable --now prometheus >/dev/null 2>&1 || true
    fi
  fi
  echo "setup.sh: system packages ready"
}

# Node >= 20 for the TypeScript SDK. Debian 12 ships Node 18; its npm installs
# the official Node 20 binary from the npm registry (the `node` package).
node_ok() { command -v node >/dev/null && command -v npm >/dev/null &&
            node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)'; }
step_node() {
  if ! node_ok; then
    command -v npm >/dev/null || apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends nodejs npm
    npm install -g --no-fund --no-audit node@20.20.2
    hash -r
  fi
  node_ok || { echo "setup.sh: need Node >= 20" >&2; return 1; }
  # gymnasium, only for the test that runs its env checker on kiln.gym (the
  # SDK itself depends on nothing). Kept out of the system Python's packages.
  local pydeps=/opt/kiln/pydeps
  if ! PYTHONPATH=$pydeps /usr/bin/python3 -c 'import gymnasium' 2>/dev/null; then
    /usr/bin/python3 -m pip install -q --root-user-action=ignore --no-warn-script-location \
      --target "$pydeps" 'gymnasium==1.4.0'
  fi
  echo "setup.sh: node $(node --version), gymnasium in $pydeps"
}

step_runsc() { bash "$here/build-runsc.sh"; }

# Ray, only for the tests of kiln.ray (and for users who import it): its own
# venv, so the system Python and the SDK stay free of it.
RAY_VERSION=2.60.0
step_ray() {
  local venv=/opt/kiln/ray-venv
  if ! "$venv/bin/python" -c "import ray, sys; sys.exit(ray.__version__ != '$RAY_VERSION')" 2>/dev/null; then
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "ray==$RAY_VERSION"
  fi
  echo "setup.sh: ray $RAY_VERSION in $venv"
}

# E2B's own Python SDKs, only for `make bench`'s comparison (bench/e2b_clients.py);
# the tests install theirs in a venv of their own.
E2B_PACKAGES="e2b==2.63.0 e2b-code-interpreter==2.11.5"
step_e2b() {
  local venv=/opt/kiln/e2b-venv
  if ! "$venv/bin/python" -c "
import importlib.metadata as m, sys
sys.exit(m.version('e2b') != '2.63.0' or m.version('e2b-code-interpreter') != '2.11.5')" 2>/dev/null; then
    /usr/bin/python3 -m venv "$venv"
    # shellcheck disable=SC2086
    "$venv/bin/pip" install -q --disable-pip-version-check $E2B_PACKAGES
  fi
  echo "setup.sh: $E2B_PACKAGES in $venv"
}

# Daytona's Python SDK for test_daytona_sdk.py (/opt/kiln/daytona-venv); the
# tests install their own when this one lacks the pinned version.
DAYTONA_PACKAGES="daytona==0.226.1"
step_daytona() {
  local venv=/opt/kiln/daytona-venv
  if ! "$venv/bin/python" -c "
import importlib.metadata as m, sys
sys.exit(m.version('daytona') != '0.226.1')" 2>/dev/null; then
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check $DAYTONA_PACKAGES
  fi
  echo "setup.sh: $DAYTONA_PACKAGES in $venv"
}

# The web console (console/): its npm packages from the lockfile, bundled
# into build/console, which kilnd serves at /ui. Rebuilt when a source changed.
step_console() {
  local src="$here/../console" out="$here/../build/console"
  if [ -f "$out/index.html" ] && [ -z "$(find "$src" -path "$src/node_modules" -prune -o -newer "$out/index.html" -type f -print -quit)" ]; then
    echo "setup.sh: console up to date in build/console"
    return 0
  fi
  bash "$src/build.sh" "$out"
  echo "setup.sh: console built into build/console"
}

# Playwright for the console's tests, in its own venv; it drives Debian's
# chromium (no browser download).
PLAYWRIGHT_VERSION=1.65.2
step_playwright() {
  local venv=/opt/kiln/console-venv
  if ! "$venv/bin/python" -c "
import importlib.metadata as m, sys
sys.exit(m.version('playwright') != '$PLAYWRIGHT_VERSION')" 2>/dev/null; then
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "playwright==$PLAYWRIGHT_VERSION"
  fi
  echo "setup.sh: playwright $PLAYWRIGHT_VERSION in $venv"
}

# Harbor (the terminal-bench harness) for test_harbor.py and `make bench`'s
# trial figures (bench/harbor.py). It
# needs Python >= 3.12, which Debian 12 lacks: the machine's own (pyenv's, or
# one on PATH); without one the step says so and the figure is skipped.
HARBOR_PACKAGES="harbor[e2b]==0.25.0 e2b==2.63.0"
python_312() {
  local p
  for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3 \
           "$(command -v python3.12 || true)" "$(command -v python3.13 || true)"; do
    [ -x "$p" ] && "$p" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null &&
      { echo "$p"; return 0; }
  done
  return 1
}
step_harbor() {
  local venv=/opt/kiln/harbor-venv python
  if "$venv/bin/python" -c "
import importlib.metadata as m, sys
sys.exit(m.version('harbor') != '0.25.0')" 2>/dev/null; then
    echo "setup.sh: harbor 0.25.0 in $venv"
    return 0
  fi
  if ! python=$(python_312); then
    echo "setup.sh: no Python >= 3.12 here (Debian 12 has 3.11): harbor not installed, its figures skipped"
    return 0
  fi
  "$python" -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install -q --disable-pip-version-check $HARBOR_PACKAGES
  echo "setup.sh: $HARBOR_PACKAGES in $venv ($("$python" --version))"
}

# Without arguments, one step after the other (`make setup` runs node and
# runsc at once, beside the base image, after packages).
if [ $# -gt 0 ]; then
  for s in "$@"; do "step_$s"; done
  exit 0
fi
for s in packages node runsc console; do
  bash "$here/step.sh" "$s" bash "$here/setup.sh" "$s"
done
