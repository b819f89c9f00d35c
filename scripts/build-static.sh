#!/usr/bin/env bash
# Builds the release binary: static (CGO_ENABLED=0; the SQLite store is pure
# Go), reproducible paths, the version stamped in. The Dockerfile runs this
# script, and cmd/leaf's TestStaticBinary runs it too, so the binary the
# tests check is built exactly as the image's.
#
#   scripts/build-static.sh OUT [VERSION]
set -euo pipefail
out=${1:?usage: scripts/build-static.sh OUT [VERSION]}
version=${2:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
cd "$(dirname "$0")/.."
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${version}" -o "$out" ./cmd/leaf
