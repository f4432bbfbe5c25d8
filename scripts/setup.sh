#!/usr/bin/env bash
# Installs everything kiln needs on a Debian 12 (bookworm) host. Idempotent:
# a second run changes nothing and finishes in seconds.
#   - build tools and libraries from Debian
#   - runsc (gVisor) from bookworm-backports, added with the same mirror URI
#     the machine's apt sources already use (no host is written here)
#   - debootstrap for the base image
set -euo pipefail

[ "$(id -u)" = 0 ] || { echo "setup.sh: run as root" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive

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

BACKPORTS=/etc/apt/sources.list.d/kiln-bookworm-backports.sources
updated=0
if [ ! -f "$BACKPORTS" ]; then
  mirror=$(debian_mirror | head -n 1)
  [ -n "$mirror" ] || { echo "setup.sh: no bookworm mirror found in apt sources" >&2; exit 1; }
  cat > "$BACKPORTS" <<SRC
Types: deb
URIs: $mirror
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt-get update -q
  updated=1
fi

PKGS=(build-essential cmake ninja-build pkg-config clang-format
      libboost-dev nlohmann-json3-dev libsqlite3-dev libssl-dev libxxhash-dev
      libgtest-dev libgmock-dev libbenchmark-dev
      debootstrap iproute2 procps psmisc python3 python3-pytest python3-pip curl ca-certificates
      openssl git)  # openssl, git: the network tests' own test hosts (CA, git repository)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ! dpkg-query -W -f='${Status}' runsc 2>/dev/null | grep -q 'install ok installed'; then
  missing+=("runsc/bookworm-backports")
fi
if [ ${#missing[@]} -gt 0 ]; then
  [ "$updated" = 1 ] || apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
echo "setup.sh: system packages ready (runsc $(runsc --version 2>/dev/null | head -n 1 | awk '{print $3}'))"

# Node >= 20 for the TypeScript SDK. Debian 12 ships Node 18; its npm installs
# the official Node 20 binary from the npm registry (the `node` package).
node_ok() { command -v node >/dev/null && command -v npm >/dev/null &&
            node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)'; }
if ! node_ok; then
  apt-get install -y -q --no-install-recommends nodejs npm
  npm install -g --no-fund --no-audit node@20.20.2
  hash -r
fi
node_ok || { echo "setup.sh: need Node >= 20" >&2; exit 1; }

# gymnasium, only for the test that runs its env checker on kiln.gym (the SDK
# itself depends on nothing). Kept out of the system Python's packages.
PYDEPS=/opt/kiln/pydeps
if ! PYTHONPATH=$PYDEPS /usr/bin/python3 -c 'import gymnasium' 2>/dev/null; then
  /usr/bin/python3 -m pip install -q --root-user-action=ignore --no-warn-script-location --target "$PYDEPS" 'gymnasium==1.4.0'
fi
echo "setup.sh: node $(node --version), gymnasium in $PYDEPS"
