#!/bin/bash
# SandboxFusion's server source for bench/sandboxfusion.py's peer, from a git
# directory of github.com/bytedance/SandboxFusion (a clone, or a mirror's bare
# git dir): its HEAD (or REV) extracted to DIR. The source is not part of
# kiln and is not committed here; its Python packages are installed by the
# bench into /opt/kiln/sandboxfusion-peer (versions of its poetry.lock).
#
# Usage: bash bench/sandboxfusion_peer_src.sh GIT_DIR [DIR] [REV]
#   DIR defaults to /opt/kiln/sandboxfusion-peer/src (the bench's --peer-src default).
set -euo pipefail
GIT_DIR=${1:?usage: $0 GIT_DIR [DIR] [REV]}
DIR=${2:-/opt/kiln/sandboxfusion-peer/src}
REV=${3:-HEAD}
[ -d "$GIT_DIR/.git" ] && GIT_DIR="$GIT_DIR/.git"
rm -rf "$DIR.tmp"
mkdir -p "$DIR.tmp"
git --git-dir="$GIT_DIR" archive "$REV" | tar -x -C "$DIR.tmp"
git --git-dir="$GIT_DIR" rev-parse "$REV" > "$DIR.tmp/.peer-commit"
rm -rf "$DIR"
mv "$DIR.tmp" "$DIR"
echo "SandboxFusion $(cat "$DIR/.peer-commit") in $DIR"
