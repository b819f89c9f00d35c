#!/usr/bin/env bash
# What each ID shape of issue #16 costs over HTTP, beside the plain shape,
# in the same run (numbers from different runs on a shared machine do not
# compare):
#   - segment tags: plain, periodic, formatted, periodic+formatted, opaque,
#     one ID a request on /v2 over loopback (go test -bench V2Shapes);
#   - snowflake: the leaf layout, the js-safe layout and the ordinal
#     registry, each a 'leaf serve' of its own, single IDs through Leaf's
#     /api/snowflake/get route with 'leaf bench' (which checks every answer),
#     the servers taking turns ROUNDS times; the medians are compared.
# Loopback only; only the processes started here are stopped, by PID.
#   scripts/bench-shapes.sh                      # DURATION=3s ROUNDS=3
#   DURATION=2s ROUNDS=1 scripts/bench-shapes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-3s}
ROUNDS=${ROUNDS:-3}
CONCURRENCY=${CONCURRENCY:-32}
PORT=${PORT:-18380} # PORT, PORT+1, PORT+2
command -v python3 >/dev/null || { echo "python3 not found (reads leaf bench --json)" >&2; exit 1; }

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

echo "== segment tag shapes, one ID a request on /v2 (go test -bench V2Shapes, -count $ROUNDS)"
go test -run '^$' -bench V2Shapes -benchtime "$DURATION" -count "$ROUNDS" ./httpapi/ |
  awk '/^BenchmarkV2Shapes/ { for (i = 1; i <= NF; i++) if ($i == "IDs/s") print $1, $(i-1) }' |
  python3 -c '
import sys, statistics
runs = {}
for line in sys.stdin:
    name, rate = line.split()
    shape = name.split("/", 1)[1].rsplit("-", 1)[0]
    runs.setdefault(shape, []).append(float(rate))
plain = statistics.median(runs["plain"])
for shape, rates in runs.items():
    m = statistics.median(rates)
    print(f"  {shape:20} {m:>10,.0f} IDs/s  {m / plain:5.0%} of plain")
'

echo "== snowflake layouts and registries, single IDs on /api/snowflake/get (leaf bench, $CONCURRENCY clients)"
go build -o "$tmp/leaf" ./cmd/leaf
export LEAF_SEGMENT_ENABLED=false
names=(leaf js-safe ordinal)
LEAF_SNOWFLAKE_REGISTRY=local LEAF_SNOWFLAKE_WORKER_ID=1 \
  "$tmp/leaf" serve --listen "127.0.0.1:$PORT" --data-dir "$tmp/0" --log-level warn 2>"$tmp/0.log" & pids+=($!)
LEAF_SNOWFLAKE_REGISTRY=local LEAF_SNOWFLAKE_WORKER_ID=2 LEAF_SNOWFLAKE_LAYOUT=js-safe \
  "$tmp/leaf" serve --listen "127.0.0.1:$((PORT + 1))" --data-dir "$tmp/1" --log-level warn 2>"$tmp/1.log" & pids+=($!)
LEAF_SNOWFLAKE_REGISTRY=ordinal LEAF_SNOWFLAKE_ORDINAL_HOSTNAME=leaf-3 LEAF_SNOWFLAKE_ORDINAL_CLAIM=none \
  "$tmp/leaf" serve --listen "127.0.0.1:$((PORT + 2))" --data-dir "$tmp/2" --log-level warn 2>"$tmp/2.log" & pids+=($!)
for i in 0 1 2; do
  up=
  for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$((PORT + i))/healthz" >/dev/null && { up=1; break; }
    sleep 0.1
  done
  [ -n "$up" ] || { echo "server ${names[$i]} did not start:" >&2; cat "$tmp/$i.log" >&2; exit 1; }
done

rate() { # server index -> requests/s
  "$tmp/leaf" bench --server "http://127.0.0.1:$((PORT + $1))" --mode snowflake --duration "$DURATION" \
    --concurrency "$CONCURRENCY" --quiet --json >"$tmp/bench.json" || {
    echo "leaf bench against ${names[$1]} failed:" >&2; cat "$tmp/bench.json" >&2; exit 1; }
  python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["requests_per_second"]))' "$tmp/bench.json"
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -a r0 r1 r2
for _ in $(seq "$ROUNDS"); do
  r0+=("$(rate 0)"); r1+=("$(rate 1)"); r2+=("$(rate 2)")
done
m0=$(median "${r0[@]}"); m1=$(median "${r1[@]}"); m2=$(median "${r2[@]}")
for i in 0 1 2; do
  m=$([ $i = 0 ] && echo "$m0" || { [ $i = 1 ] && echo "$m1" || echo "$m2"; })
  printf '  %-20s %10s IDs/s  %s of the leaf layout\n' "${names[$i]}" "$m" "$(python3 -c "print(f'{$m/$m0:.0%}')")"
done
