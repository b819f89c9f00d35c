#!/usr/bin/env bash
# The whole benchmark in one run, with ratios to a yardstick measured in the
# same run (numbers from different runs on a shared machine do not compare):
#   - HTTP single IDs, wrk at c=64 and c=8: leaf's /api/segment/get/bench and
#     /api/snowflake/get/bench against a bare fasthttp server answering a
#     fixed number (internal/fixedid): req/s and p99 ratios;
#   - HTTP batches of 1000 (segment, snowflake) with wrk: IDs/s;
#   - gRPC unary and batch(1000) with 'leaf bench --grpc --json', which also
#     checks every answer;
#   - the Go client's buffered mode (go test -bench BufferedNext ./client/).
# Loopback only; every step is bounded (wrk and leaf bench by DURATION), and
# only the processes started here are stopped, by PID.
#   scripts/bench.sh                 # DURATION=10s
#   DURATION=5s scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
# Ports away from leaf's default 8080, so a running server is not disturbed.
LEAF_PORT=${LEAF_PORT:-18180}
LEAF_GRPC_PORT=${LEAF_GRPC_PORT:-18181}
FIXED_PORT=${FIXED_PORT:-18190}
CLIENT_BENCHTIME=${CLIENT_BENCHTIME:-3s}
# Single-ID runs are repeated ROUNDS times, the three servers taking turns,
# and compared by their medians: on a small shared machine one run of the same
# server varies by 10% or more.
ROUNDS=${ROUNDS:-3}
# PIN=1 gives the servers CPU 0 and the load generators CPU 1 (taskset), so
# that they stop trading cores: steadier ratios of what each server costs.
if [ "${PIN:-0}" = 1 ]; then
  command -v taskset >/dev/null || { echo "PIN=1 needs taskset" >&2; exit 1; }
  on_server=(taskset -c 0) on_load=(taskset -c 1)
else
  on_server=() on_load=()
fi
command -v wrk >/dev/null || { echo "wrk not found: apt-get install -y wrk" >&2; exit 1; }

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/leaf" ./cmd/leaf
go build -o "$tmp/fixedid" ./internal/fixedid
"${on_server[@]}" "$tmp/leaf" serve --listen "127.0.0.1:$LEAF_PORT" --grpc-listen "127.0.0.1:$LEAF_GRPC_PORT" \
  --data-dir "$tmp/data" --log-level warn 2>"$tmp/leaf.log" & pids+=($!)
leaf_pid=$!
"${on_server[@]}" "$tmp/fixedid" --listen "127.0.0.1:$FIXED_PORT" 2>"$tmp/fixedid.log" & pids+=($!)
fixed_pid=$!

# wait_up URL PID LOG: until URL answers; fail if the process died (a port
# in use) or after 10s.
wait_up() {
  for _ in $(seq 100); do
    curl -fs "$1" >/dev/null && return 0
    kill -0 "$2" 2>/dev/null || { echo "server for $1 exited:" >&2; cat "$3" >&2; exit 1; }
    sleep 0.1
  done
  echo "$1 did not answer within 10s" >&2; cat "$3" >&2; exit 1
}
wait_up "http://127.0.0.1:$LEAF_PORT/healthz" "$leaf_pid" "$tmp/leaf.log"
wait_up "http://127.0.0.1:$FIXED_PORT/" "$fixed_pid" "$tmp/fixedid.log"
# A big step so the run measures the request path, not reloads.
"$tmp/leaf" tags create bench --step 1000000 --data-dir "$tmp/data" >/dev/null

to_us() { awk -v v="$1" 'BEGIN { n=v+0; if (v ~ /us$/) print n; else if (v ~ /ms$/) print n*1000; else print n*1000000 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.2fx", a/b }'; }
fmt_us() { awk -v u="$1" 'BEGIN { if (u >= 1000) printf "%.2fms", u/1000; else printf "%.0fus", u }'; }
ids_per_s() { awk -v r="$1" -v n="$2" 'BEGIN { printf "%.0f", r*n }'; }

# wrk_run NAME URL CONNS VAR → prints "NAME c=CONNS req/s p50 p99" (and any
# non-2xx answers or socket errors wrk saw), sets VAR_rps and VAR_p99 (µs).
wrk_run() {
  local out rps p50 p99 bad
  out=$("${on_load[@]}" wrk -t2 -c"$3" -d"$DURATION" --latency "$2")
  rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  bad=$(grep -E 'Non-2xx|Socket errors' <<<"$out" | tr -s ' ' | paste -sd';' - || true)
  printf '  %-34s c=%-3s %12s req/s  p50 %-9s p99 %s%s\n' "$1" "$3" "$rps" "$p50" "$p99" "${bad:+  !! $bad}"
  printf -v "${4}_rps" '%s' "$rps"
  printf -v "${4}_p99" '%s' "$(to_us "$p99")"
}

# json_num KEY: a number from leaf bench's --json summary on stdin.
json_num() { awk -v k="\"$1\":" '$1 == k { v=$2; sub(/,$/, "", v); print v; exit }'; }

# grpc_run NAME COUNT: leaf bench over gRPC, segment mode, c=64.
grpc_run() {
  local out rc=0
  out=$("${on_load[@]}" "$tmp/leaf" bench --grpc "127.0.0.1:$LEAF_GRPC_PORT" --tag bench --count "$2" --concurrency 64 \
    --duration "$DURATION" --json --quiet 2>"$tmp/bench.err") || rc=$?
  if [ -z "$out" ]; then
    printf '  %-34s FAILED: %s\n' "$1" "$(cat "$tmp/bench.err")"
    return
  fi
  printf '  %-34s c=64  %12.0f req/s  p50 %-9s p99 %-9s %.0f IDs/s, errors %s%s\n' "$1" \
    "$(json_num requests_per_second <<<"$out")" "$(fmt_us "$(json_num p50 <<<"$out")")" \
    "$(fmt_us "$(json_num p99 <<<"$out")")" "$(json_num ids_per_second <<<"$out")" "$(json_num errors <<<"$out")" \
    "$([ "$rc" = 0 ] || echo "  !! $(cat "$tmp/bench.err")")"
}

if [ "${PIN:-0}" = 1 ]; then
  echo "leaf benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ), servers pinned to CPU 0, load generators to CPU 1, loopback"
else
  echo "leaf benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores shared by servers and load generators, loopback"
fi
# median N...: the middle value (the lower middle for an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# ratio_num A B: A/B as a bare number, for medians of ratios.
ratio_num() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print 0; else printf "%.4f", a/b }'; }

echo "HTTP, one ID per request (wrk -t2 -d$DURATION, $ROUNDS rounds taking turns); ratios are of the medians, leaf / bare fasthttp"
echo "  (paired: the median of each round's ratio, leaf against the yardstick measured beside it; the machine's speed"
echo "  drifts between rounds, and odd rounds measure the yardstick first, even rounds last, so drift within a round"
echo "  cancels out in the median)"
for c in 64 8; do
  fixed_all=() fixed_p99_all=() seg_all=() seg_p99_all=() snow_all=() snow_p99_all=() seg_pair=() snow_pair=()
  for r in $(seq "$ROUNDS"); do
    fixed_first=$((r % 2))
    if [ "$fixed_first" = 1 ]; then
      wrk_run "bare fasthttp (fixed number)" "http://127.0.0.1:$FIXED_PORT/" "$c" fixed
    fi
    wrk_run "leaf /api/segment/get/bench" "http://127.0.0.1:$LEAF_PORT/api/segment/get/bench" "$c" seg
    wrk_run "leaf /api/snowflake/get/bench" "http://127.0.0.1:$LEAF_PORT/api/snowflake/get/bench" "$c" snow
    if [ "$fixed_first" = 0 ]; then
      wrk_run "bare fasthttp (fixed number)" "http://127.0.0.1:$FIXED_PORT/" "$c" fixed
    fi
    fixed_all+=("$fixed_rps") fixed_p99_all+=("$fixed_p99") seg_all+=("$seg_rps") seg_p99_all+=("$seg_p99")
    snow_all+=("$snow_rps") snow_p99_all+=("$snow_p99")
    seg_pair+=("$(ratio_num "$seg_rps" "$fixed_rps")") snow_pair+=("$(ratio_num "$snow_rps" "$fixed_rps")")
  done
  f=$(median "${fixed_all[@]}") fp=$(median "${fixed_p99_all[@]}")
  sg=$(median "${seg_all[@]}") sgp=$(median "${seg_p99_all[@]}")
  sn=$(median "${snow_all[@]}") snp=$(median "${snow_p99_all[@]}")
  echo "  medians c=$c: bare $f req/s p99 $(fmt_us "$fp"); segment $sg req/s p99 $(fmt_us "$sgp"); snowflake $sn req/s p99 $(fmt_us "$snp")"
  echo "    ratio c=$c segment:   req/s $(ratio "$sg" "$f") (paired $(printf '%.2f' "$(median "${seg_pair[@]}")")x), p99 $(ratio "$sgp" "$fp")"
  echo "    ratio c=$c snowflake: req/s $(ratio "$sn" "$f") (paired $(printf '%.2f' "$(median "${snow_pair[@]}")")x), p99 $(ratio "$snp" "$fp")"
done

echo "HTTP batches of 1000 IDs (wrk -t2 -d$DURATION)"
wrk_run "leaf segment ?count=1000" "http://127.0.0.1:$LEAF_PORT/api/segment/get/bench?count=1000" 64 batch
echo "    $(ids_per_s "$batch_rps" 1000) IDs/s"
wrk_run "leaf snowflake ?count=1000" "http://127.0.0.1:$LEAF_PORT/api/snowflake/get/bench?count=1000" 64 sbatch
echo "    $(ids_per_s "$sbatch_rps" 1000) IDs/s (one worker's ceiling: 4096000)"

echo "gRPC, segment (leaf bench --grpc, -d$DURATION, every answer checked)"
grpc_run "NextID (unary)" 1
grpc_run "NextIDs count=1000" 1000

echo "Go client, buffered mode (client.Buffered.Next against an in-process server, -benchtime $CLIENT_BENCHTIME)"
if [ -d client ] && out=$(timeout 600 go test -run '^$' -bench BufferedNext -benchtime "$CLIENT_BENCHTIME" ./client/ 2>&1) &&
  line=$(grep '^BenchmarkBufferedNext' <<<"$out"); then
  echo "  $(awk '{ for (i = 2; i <= NF; i++) if ($i == "IDs/s") { printf "%.0f IDs/s", $(i-1) } }' <<<"$line")  ($(tr -s ' \t' ' ' <<<"$line"))"
else
  echo "  client: not built"
fi
