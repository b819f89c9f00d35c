#!/usr/bin/env bash
# Measures leaf's HTTP ID routes with wrk next to a bare net/http server that
# returns a fixed number (internal/fixedid), in the same run, and prints the
# ratios. Loopback only; each wrk run is bounded by DURATION.
#   scripts/bench-http.sh            # DURATION=10s
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
LEAF_PORT=${LEAF_PORT:-18080}
FIXED_PORT=${FIXED_PORT:-18090}
command -v wrk >/dev/null || { echo "wrk not found: apt-get install -y wrk" >&2; exit 1; }

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

go build -o "$tmp/leaf" ./cmd/leaf
go build -o "$tmp/fixedid" ./internal/fixedid
"$tmp/leaf" serve --listen "127.0.0.1:$LEAF_PORT" --data-dir "$tmp/data" --log-level warn 2>"$tmp/leaf.log" & pids+=($!)
"$tmp/fixedid" --listen "127.0.0.1:$FIXED_PORT" & pids+=($!)
for url in "http://127.0.0.1:$LEAF_PORT/healthz" "http://127.0.0.1:$FIXED_PORT/"; do
  for _ in $(seq 100); do curl -fs "$url" >/dev/null && break; sleep 0.1; done
done
# A big step so the run measures the request path, not reloads.
"$tmp/leaf" tags create bench --step 1000000 --data-dir "$tmp/data" >/dev/null

# run NAME URL CONNS → prints "NAME req/s p50 p99" and keeps the numbers
run() {
  local out rps p50 p99
  out=$(wrk -t2 -c"$3" -d"$DURATION" --latency "$2")
  rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  printf '%-32s c=%-3s %12s req/s  p50 %-9s p99 %s\n' "$1" "$3" "$rps" "$p50" "$p99"
  eval "${4}_rps=$rps ${4}_p99=$(to_us "$p99")"
}
to_us() { awk -v v="$1" 'BEGIN { n=v+0; if (v ~ /us$/) print n; else if (v ~ /ms$/) print n*1000; else print n*1000000 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a/b }'; }

echo "wrk -t2 -d$DURATION, loopback, $(nproc) cores shared with the load generator"
for c in 64 8; do
  run "bare net/http (fixed number)" "http://127.0.0.1:$FIXED_PORT/" "$c" fixed
  run "leaf /api/segment/get/bench" "http://127.0.0.1:$LEAF_PORT/api/segment/get/bench" "$c" leaf
  echo "  ratio c=$c: req/s $(ratio "$leaf_rps" "$fixed_rps")x, p99 $(ratio "$leaf_p99" "$fixed_p99")x"
  run "leaf /api/snowflake/get/bench" "http://127.0.0.1:$LEAF_PORT/api/snowflake/get/bench" "$c" snow
  echo "  ratio c=$c: req/s $(ratio "$snow_rps" "$fixed_rps")x, p99 $(ratio "$snow_p99" "$fixed_p99")x"
done
run "leaf batch count=1000" "http://127.0.0.1:$LEAF_PORT/api/segment/get/bench?count=1000" 64 batch
echo "  batch: $(awk -v r="$batch_rps" 'BEGIN { printf "%.0f", r*1000 }') IDs/s"
run "leaf snowflake batch count=1000" "http://127.0.0.1:$LEAF_PORT/api/snowflake/get/bench?count=1000" 64 sbatch
echo "  snowflake batch: $(awk -v r="$sbatch_rps" 'BEGIN { printf "%.0f", r*1000 }') IDs/s (ceiling 4096000)"
