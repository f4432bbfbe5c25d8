#!/usr/bin/env bash
# Runs CI (.ci/run, the README's test command) as a machine that never ran
# kiln would: a fresh clone of the committed HEAD, in a mount and PID
# namespace where
#   /tmp, /var/tmp               start empty (Ray's /tmp/ray, test leftovers)
#   $HOME/.cache, $HOME/.npm     start empty (pip, npm and other caches)
#   /var/lib/kiln                starts empty but for images/ (the base image
#                                that setup installs)
#   processes                    none of the host's are visible (pgrep, kill)
# What setup legitimately installs stays as it is: Debian packages, the pinned
# runsc (/usr/local/lib/kiln), /opt/kiln (Ray's venv, gymnasium) and the base
# image. The namespace ends with the run, and every process in it.
#
# Usage: ci-fresh.sh [--demo] [--bare] [REV]   (default HEAD; as root)
#   --demo   runs `make demo` (the README's first command) instead of CI
#   --bare   also starts without what setup installs but Debian's packages:
#            the pinned runsc (/usr/local/lib/kiln), Go's module and build
#            caches, /opt/kiln and the base image, as a new machine would
#            (apt's packages stay: they cannot be hidden)
#   KILN_CI_FRESH_DIR   where runs go (default /var/cache/kiln-ci-fresh);
#                       each run's clone, log and scratch folders stay there
#                       until the next run starts
set -euo pipefail

[ "$(id -u)" = 0 ] || { echo "ci-fresh.sh: run as root" >&2; exit 1; }
job="CI=true bash .ci/run" bare=0
while [ $# -gt 0 ]; do
  case "$1" in
    --demo) job="make demo"; shift ;;
    --bare) bare=1; shift ;;
    *) break ;;
  esac
done
repo=$(cd "$(dirname "$0")/.." && pwd)
rev=$(git -C "$repo" rev-parse --verify "${1:-HEAD}^{commit}")
base=${KILN_CI_FRESH_DIR:-/var/cache/kiln-ci-fresh}
run=$base/run
home=${HOME:-/root}

# One run at a time; the previous run's folders go now, not at its end, so a
# failed run can be looked at.
if [ -d "$run" ]; then
  # An earlier run's test mounts (loop file systems, runsc's) died with its
  # namespace; anything left mounted under it is unmounted before removal.
  findmnt -rn -o TARGET | grep "^$run/" | sort -r | xargs -r -n1 umount -l || true
  rm -rf "$run"
fi
mkdir -p "$run"/{tmp,vartmp,cache,npm,varlib/images,runsc,go,opt}
chmod 1777 "$run/tmp" "$run/vartmp"
git clone -q --no-hardlinks "$repo" "$run/repo"
git -C "$run/repo" checkout -q --detach "$rev"
log=$run/ci.log
echo "ci-fresh: $rev in $run/repo; log: $log"

inner=$(cat <<'EOF'
set -euo pipefail
mount --make-rprivate /
mount --bind "$RUN/tmp" /tmp
mount --bind "$RUN/vartmp" /var/tmp
for d in "$HOME_DIR/.cache:$RUN/cache" "$HOME_DIR/.npm:$RUN/npm"; do
  mkdir -p "${d%%:*}"
  mount --bind "${d#*:}" "${d%%:*}"
done
if [ "$BARE" = 1 ]; then
  mkdir -p /usr/local/lib/kiln /opt/kiln "$HOME_DIR/go"
  mount --bind "$RUN/runsc" /usr/local/lib/kiln
  mount --bind "$RUN/opt" /opt/kiln
  mount --bind "$RUN/go" "$HOME_DIR/go"
else
  mount --bind "$IMAGES" "$RUN/varlib/images"
fi
mount --rbind "$RUN/varlib" /var/lib/kiln
cd "$RUN/repo"
exec env -u KILN_BIN_DIR -u KILN_IMAGE_DIR -u KILN_VERBOSE -u TMPDIR -u RAY_TMPDIR \
  -u GOPATH -u GOMODCACHE -u GOCACHE CI=true bash -c "$JOB" </dev/null
EOF
)
# The base image as setup left it (an empty folder if it never ran: then
# .ci/run's setup builds it there, as on a new machine).
mkdir -p /var/lib/kiln/images
t0=$(date +%s)
set +e
RUN=$run HOME_DIR=$home IMAGES=/var/lib/kiln/images JOB=$job BARE=$bare \
  unshare --mount --pid --fork --mount-proc bash -c "$inner" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
secs=$(($(date +%s) - t0))
printf 'ci-fresh: %s %s in %d min %d s (exit %d); log: %s\n' "$job" \
  "$([ "$rc" = 0 ] && echo passed || echo FAILED)" $((secs / 60)) $((secs % 60)) "$rc" "$log" |
  tee -a "$log"
exit "$rc"
