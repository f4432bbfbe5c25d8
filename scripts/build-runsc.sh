#!/usr/bin/env bash
# Builds the pinned runsc (gVisor) from the gvisor.dev/gvisor Go module named
# in third_party/runsc/go.mod, verified by its go.sum, into
#   /usr/local/lib/kiln/runsc-<module version>/runsc
# (stamped runsc.build) and does nothing when that build is already there. Needs Go >= 1.26: the
# machine's Go when new enough; otherwise Debian's Go (>= 1.21, from
# bookworm-backports), which fetches the pinned toolchain from the module
# proxy. Talks to no network but the package registries.
#
# Usage: build-runsc.sh [--print-path | --has-go]  (--has-go: exit 0 if runsc is
# built already or a Go here can build it; setup.sh installs one otherwise)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
mod_dir=$here/third_party/runsc
version=$(awk '$1 == "require" && $2 == "gvisor.dev/gvisor" {print $3}' "$mod_dir/go.mod")
[ -n "$version" ] || { echo "build-runsc.sh: no gvisor.dev/gvisor version in $mod_dir/go.mod" >&2; exit 1; }
prefix=${KILN_RUNSC_PREFIX:-/usr/local/lib/kiln}
dest=$prefix/runsc-$version/runsc
toolchain=go1.26.8  # fetched from the module proxy when the machine's Go is older

if [ "${1:-}" = --print-path ]; then echo "$dest"; exit 0; fi

# What the binary is built from: a changed recipe, generator or go.sum builds again.
stamp=$(cat "$0" "$mod_dir/go.sum" "$mod_dir/seccompgen/main.go" | sha256sum | cut -c1-16)
if [ -x "$dest" ] && [ "$(cat "$dest.build" 2>/dev/null)" = "$stamp" ] &&
   grep -q "runsc version $version\$" <<<"$("$dest" --version 2>/dev/null)"; then
  echo "build-runsc.sh: runsc $version already in $dest"
  exit 0
fi

# go1.X.Y -> X*1000+Y (major is 1).
go_minor() { "$1" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\)\.\{0,1\}\([0-9]*\).*/\1 \2/p' |
             awk '{print $1 * 1000 + ($2 == "" ? 0 : $2)}'; }

find_go() {
  local g
  for g in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go /usr/lib/go-1.2[0-9]/bin/go; do
    [ -n "$g" ] && [ -x "$g" ] || continue
    local m; m=$(go_minor "$g")
    [ -n "$m" ] && [ "$m" -ge 21000 ] && { echo "$g"; return; }
  done
}

go_bin=$(find_go)
# For setup.sh's packages step: is a Go here that can fetch the toolchain?
if [ "${1:-}" = --has-go ]; then [ -n "$go_bin" ]; exit; fi
if [ -z "$go_bin" ]; then
  # Debian's newest Go (backports) is old for gVisor, but new enough to fetch
  # the pinned toolchain from the module proxy (GOTOOLCHAIN, Go >= 1.21).
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "build-runsc.sh: no Go >= 1.21 here; installing golang-1.23-go from bookworm-backports"
    apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends golang-1.23-go/bookworm-backports ||
      { echo "build-runsc.sh: cannot install golang-1.23-go: add bookworm-backports to apt's sources (scripts/setup.sh does)" >&2; exit 1; }
  fi
  go_bin=$(find_go)
  [ -n "$go_bin" ] || { echo "build-runsc.sh: Go >= 1.21 not found: install golang-1.23-go from bookworm-backports, or Go >= 1.26 in /usr/local/go" >&2; exit 1; }
fi
if [ "$(go_minor "$go_bin")" -lt 26000 ]; then
  echo "build-runsc.sh: $go_bin is $("$go_bin" env GOVERSION), older than 1.26; using $toolchain from the module proxy"
  export GOTOOLCHAIN=$toolchain
else
  export GOTOOLCHAIN=local
fi

proxy=$("$go_bin" env GOPROXY)
case "$proxy" in
  off|"") echo "build-runsc.sh: GOPROXY is '$proxy': the gVisor module comes from the Go module proxy; set GOPROXY (e.g. the default) and retry" >&2; exit 1 ;;
esac

# The build happens in a copy of the module tree (go mod vendor, verified by
# go.sum), where two generated files take the place of the module's empty
# seccomp tables: the Sentry's and gofer's filters for kilnd's configurations,
# compiled ahead of time by seccompgen from the same source, as gVisor's own
# build does. Without them every sandbox start compiles its filters (~17 ms of
# CPU, ~12 ms of it on the start path).
export CGO_ENABLED=0 GOFLAGS="-buildvcs=false"
mkdir -p "$prefix/runsc-$version"
work=$(mktemp -d "$prefix/runsc-$version/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$mod_dir/go.mod" "$mod_dir/go.sum" "$mod_dir/tools.go" "$work/"
cp -r "$mod_dir/seccompgen" "$work/"
cd "$work"
if ! "$go_bin" mod download gvisor.dev/gvisor >/dev/null 2>"$work/err"; then
  echo "build-runsc.sh: cannot download gvisor.dev/gvisor@$version from the Go module proxy ($proxy):" >&2
  tail -n 5 "$work/err" >&2
  exit 1
fi
echo "build-runsc.sh: building runsc $version with $("$go_bin" env GOVERSION)"
"$go_bin" mod vendor
"$go_bin" run -mod=vendor ./seccompgen "$work"
cp "$work/boot_filter.go" vendor/gvisor.dev/gvisor/runsc/boot/filter/filter_precompiled.go
cp "$work/fsgofer_filter.go" vendor/gvisor.dev/gvisor/runsc/fsgofer/filter/filter_precompiled.go
"$go_bin" build -mod=vendor -trimpath \
  -ldflags "-s -w -X gvisor.dev/gvisor/runsc/version.version=$version" \
  -o "$work/runsc" gvisor.dev/gvisor/runsc
# (grep -q under pipefail could fail the pipe by closing it early: read it whole)
built=$("$work/runsc" --version)
grep -q "runsc version $version\$" <<<"$built" ||
  { echo "build-runsc.sh: the built binary does not report version $version" >&2; exit 1; }
chmod 0755 "$work/runsc"
mv -f "$work/runsc" "$dest"
echo "$stamp" >"$dest.build"
echo "build-runsc.sh: runsc $version ready in $dest"
