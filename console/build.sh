#!/bin/sh
# Builds the console into OUTDIR from the committed lockfile: build.sh OUTDIR
set -eu
out=$(realpath -m "${1:?usage: console/build.sh OUTDIR}")
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
npm run build -- "$out"
