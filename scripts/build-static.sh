#!/usr/bin/env bash
# Builds the release binary: static (CGO_ENABLED=0; the SQLite store is pure
# Go), reproducible paths, the version stamped in. The Dockerfile runs this
# script, and cmd/leaf's TestStaticBinary runs it too, so the binary the
# tests check is built exactly as the image's.
#
#   scripts/build-static.sh OUT [VERSION]
#
# OUT is relative to the repository root.
set -euo pipefail
out=${1:?usage: scripts/build-static.sh OUT [VERSION]}
cd "$(dirname "$0")/.."
# Described here, in the repository, whatever directory the script ran from;
# an empty VERSION (the Dockerfile's default) counts as none.
version=${2:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${version}" -o "$out" ./cmd/leaf
