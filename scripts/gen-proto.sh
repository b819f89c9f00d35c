#!/usr/bin/env bash
# gen-proto.sh: regenerate the Go code of the gRPC API (grpcapi/leafv1/) from
# proto/leaf/v1/leaf.proto, installing the tools it needs if they are missing:
# protoc from Debian's packages, the two Go plugins at pinned versions.
#
#   scripts/gen-proto.sh           regenerate grpcapi/leafv1/*.pb.go
#   scripts/gen-proto.sh --check   regenerate into a temporary directory and
#                                  fail if the committed files differ
#
# Idempotent: tools already installed at the pinned versions are reused, and
# regenerating unchanged sources leaves the files byte for byte the same (the
# generated headers name the protoc version, so use Debian's: 3.21.12 on
# bookworm). The plugins go to $PROTOBIN (default /tmp/protobin), not to the
# user's Go bin directory.
set -euo pipefail

readonly PROTOC_GEN_GO_VERSION=v1.36.12   # google.golang.org/protobuf, as in go.mod
readonly PROTOC_GEN_GO_GRPC_VERSION=v1.5.1 # google.golang.org/grpc/cmd/protoc-gen-go-grpc
readonly MODULE=github.com/leafgo/leaf
readonly PROTO=leaf/v1/leaf.proto
readonly OUT=grpcapi/leafv1
PROTOBIN=${PROTOBIN:-/tmp/protobin}

log() { printf 'gen-proto: %s\n' "$*" >&2; }
die() { printf 'gen-proto: error: %s\n' "$*" >&2; exit 1; }

check=false
case "${1:-}" in
'') ;;
--check) check=true ;;
*) die "usage: $0 [--check]" ;;
esac

cd "$(dirname "$0")/.."
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$GO" ] || die "go not found; set GO=/path/to/go"

# as_root runs a command as root, through sudo when we are not root.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo "$@"
	else
		die "need root to run: $*"
	fi
}

# protoc, from Debian. DPkg::Lock::Timeout waits for another apt to finish
# instead of failing at once.
if ! command -v protoc >/dev/null; then
	log "installing protoc (protobuf-compiler)"
	as_root apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
	as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq protobuf-compiler >&2
fi
# The well-known types' .proto files come with libprotobuf-dev, which
# protobuf-compiler pulls in; leaf.proto imports none today.

# plugin_version prints the version an installed plugin reports, or nothing.
plugin_version() {
	[ -x "$PROTOBIN/$1" ] || return 0
	"$PROTOBIN/$1" --version 2>/dev/null | awk '{print $2}' | sed 's/^v//'
}

install_plugin() { # name package version
	local have
	have=$(plugin_version "$1")
	if [ "$have" = "${3#v}" ]; then
		return
	fi
	log "installing $1 $3 into $PROTOBIN"
	GOBIN="$PROTOBIN" "$GO" install "$2@$3"
	have=$(plugin_version "$1")
	[ "$have" = "${3#v}" ] || die "$1 reports version '$have' after installing $3"
}
install_plugin protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
install_plugin protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"

# Generate into a scratch directory first: --check compares it with the
# committed files, and a failed run leaves them untouched.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PATH="$PROTOBIN:$PATH" protoc -I proto \
	--go_out="$tmp" --go_opt=module="$MODULE" \
	--go-grpc_out="$tmp" --go-grpc_opt=module="$MODULE" \
	"$PROTO"

if $check; then
	status=0
	for f in "$tmp/$OUT"/*.pb.go; do
		if ! cmp -s "$f" "$OUT/$(basename "$f")"; then
			log "$OUT/$(basename "$f") is out of date; run scripts/gen-proto.sh"
			status=1
		fi
	done
	for f in "$OUT"/*.pb.go; do
		[ -e "$tmp/$OUT/$(basename "$f")" ] || { log "$f is not generated from $PROTO any more"; status=1; }
	done
	[ "$status" -eq 0 ] && log "$OUT is up to date"
	exit "$status"
fi

mkdir -p "$OUT"
for f in "$tmp/$OUT"/*.pb.go; do
	if cmp -s "$f" "$OUT/$(basename "$f")"; then
		continue
	fi
	cp "$f" "$OUT/"
	log "wrote $OUT/$(basename "$f")"
done
