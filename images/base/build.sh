#!/usr/bin/env bash
# Builds kiln's base root filesystem: Debian bookworm minbase with the tools an
# agent's commands expect, and user `user` (uid 1000, passwordless sudo) whose
# home is /workspace.
#
# Usage: build.sh OUT_DIR
# The image is keyed by the sha256 of this file (see image-path.sh), so any
# change to the recipe makes a new image; an existing one is never modified.
set -euo pipefail
out=${1:?usage: build.sh OUT_DIR}
[ ! -e "$out" ] || { echo "build.sh: $out exists" >&2; exit 1; }

mirror_of() {  # the Debian mirror the host's apt already uses
  local u
  u=$(grep -h -E '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n 1 || true)
  [ -n "$u" ] || u=$(awk '$1=="deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  echo "$u"
}
mirror=$(mirror_of)
[ -n "$mirror" ] || { echo "build.sh: no Debian mirror in apt sources" >&2; exit 1; }

tmp="$out.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
debootstrap --variant=minbase \
  --include=bash,coreutils,python3,python-is-python3,tar,gzip,ca-certificates,procps,sudo,curl,git,python3-pip,python3-venv \
  bookworm "$tmp" "$mirror"
# Node and npm in a second step: debootstrap cannot configure npm's hundreds
# of node-* packages in its own dependency order.
mount -t proc proc "$tmp/proc"
trap 'umount "$tmp/proc" 2>/dev/null; rm -rf "$tmp"' EXIT
chroot "$tmp" apt-get update -q
DEBIAN_FRONTEND=noninteractive chroot "$tmp" apt-get install -y -q --no-install-recommends nodejs npm
umount "$tmp/proc"

chroot "$tmp" /usr/sbin/groupadd -g 1000 user
chroot "$tmp" /usr/sbin/useradd -u 1000 -g 1000 -d /workspace -M -s /bin/bash user
mkdir -p "$tmp/workspace"
chown 1000:1000 "$tmp/workspace"
# E2B's templates keep the user's home at /home/user, and E2B's clients and
# tests name it: kiln-agent binds /workspace onto this empty folder at boot,
# so it is the same folder and getcwd() there says /home/user.
mkdir -p "$tmp/home/user"
chown 1000:1000 "$tmp/home/user"
# gVisor mounts a tmpfs (sandbox memory, no size) over an empty /tmp. A file
# in it keeps /tmp on the sandbox's disk: the root overlay, diskMiB of host
# disk, part of every snapshot.
install -m 0444 /dev/null "$tmp/tmp/.kiln-disk"
# KILN_OWNER ties a process to the command that started it (kiln-agent kills
# what a command leaves behind); sudo must not strip it.
printf '%s\n' 'Defaults env_keep += "KILN_OWNER"' 'user ALL=(ALL) NOPASSWD:ALL' > "$tmp/etc/sudoers.d/user"
chmod 0440 "$tmp/etc/sudoers.d/user"
# What users of the image expect (PEP 668 aside): `pip install` and
# `pip install --user` work for `user` (into ~/.local, first on PATH), and
# `npm install -g` goes to the user's prefix (~/.npm-global/bin, on PATH).
printf '[global]\nbreak-system-packages = true\n' > "$tmp/etc/pip.conf"
printf 'prefix=/workspace/.npm-global\n' > "$tmp/workspace/.npmrc"
mkdir -p "$tmp/workspace/.npm-global/bin" "$tmp/workspace/.local/bin"
chown -R 1000:1000 "$tmp/workspace"
# No package caches or logs in the image: smaller, and identical every build.
rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/* "$tmp"/var/log/*.log
mkdir -p "$tmp/opt/kiln"
mv "$tmp" "$out"
trap - EXIT
echo "build.sh: base image ready in $out"
