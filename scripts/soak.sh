#!/usr/bin/env bash
# Soak test: runs 'leaf serve' under a steady load for MINUTES and records,
# every INTERVAL seconds, the server's RSS (/proc/PID/status VmRSS), its
# goroutines (go_goroutines on /metrics), its open file descriptors, its Go
# heap in use and the IDs it has issued, to a CSV; then prints a summary and
# a verdict on growth.
#
# The server is bin/leaf, built here and copied into the run's directory (so
# that rebuilding bin/leaf during a long run neither fails on a busy binary
# nor changes what runs), on a free 127.0.0.1 port, with its own --data-dir
# (embedded SQLite, local snowflake worker 0) and no LEAF_* variables from
# the caller's environment. The load is three 'leaf bench' runs at once, each
# paced with --rate: single segment IDs, segment batches of BATCH_COUNT,
# single snowflake IDs (the single-ID runs also check every ID for repeats).
#
# Exit status 1 when the server dies, a request fails, an ID repeats, the
# goroutines grow past GOROUTINE_SLACK above their level after warm-up, or
# RSS grows past RSS_GROWTH_PCT percent and RSS_GROWTH_MB above it; 2 for
# bad arguments. Only the processes started here are stopped, by PID.
#   scripts/soak.sh                  # MINUTES=30
#   scripts/soak.sh 2                # two minutes
#   RATE_SINGLE=5000 OUT=/tmp/s scripts/soak.sh 10
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-${MINUTES:-30}}
INTERVAL=${INTERVAL:-10}
# Requests per second of each load; 3,000 requests (22,800 IDs) a second in
# all by default: steady work for the server, a fraction of a 2-core box.
RATE_SINGLE=${RATE_SINGLE:-2000}
RATE_BATCH=${RATE_BATCH:-200}
BATCH_COUNT=${BATCH_COUNT:-100}
RATE_SNOWFLAKE=${RATE_SNOWFLAKE:-800}
CONCURRENCY=${CONCURRENCY:-8}
# Warm-up: the samples of the first WARMUP seconds (default a tenth of the
# run, 20s to 120s) are the baseline's lead-in, not growth.
GOROUTINE_SLACK=${GOROUTINE_SLACK:-100}
RSS_GROWTH_PCT=${RSS_GROWTH_PCT:-50}
RSS_GROWTH_MB=${RSS_GROWTH_MB:-64}
GO=${GO:-go}

case $MINUTES in '' | *[!0-9]*) echo "soak.sh: MINUTES must be a whole number, got '$MINUTES'" >&2; exit 2 ;; esac
[ "$MINUTES" -ge 1 ] || { echo "soak.sh: MINUTES must be at least 1" >&2; exit 2; }
duration=$((MINUTES * 60))
WARMUP=${WARMUP:-$(( duration / 10 < 20 ? 20 : (duration / 10 > 120 ? 120 : duration / 10) ))}
OUT=${OUT:-/tmp/leaf-soak-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
csv=$OUT/samples.csv

# ours reports whether PID is still a running child of this shell: bash
# reaps a child that exits, after which its PID may belong to anyone.
ours() {
  local stat state ppid
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  read -r state ppid _ <<<"${stat##*) }"
  [ "$state" != Z ] && [ "$ppid" = "$$" ]
}
pids=()
cleanup() {
  local p
  # The load first, then the server, gracefully (it gives IDs back).
  for p in "${pids[@]}"; do
    [ "$p" != "${server_pid:-}" ] && ours "$p" && kill -TERM "$p" 2>/dev/null
  done
  if [ -n "${server_pid:-}" ] && ours "$server_pid"; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 150); do ours "$server_pid" || break; sleep 0.1; done
    ours "$server_pid" && kill -KILL "$server_pid" 2>/dev/null
  fi
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# The server and the load also get SIGTERM from the kernel if the shell that
# started them dies without running its traps (SIGKILL, or a signal bash
# takes before its trap is in place).
guard=()
if setpriv --help 2>/dev/null | grep -q -- --pdeathsig; then
  guard=(setpriv --pdeathsig TERM)
fi

echo "soak.sh: building bin/leaf"
"$GO" build -o bin/leaf ./cmd/leaf
cp bin/leaf "$OUT/leaf"
leaf=$OUT/leaf

# The caller's LEAF_* variables (LEAF_CONFIG, a store DSN, ...) must not
# configure this server.
unset_leaf=()
while IFS='=' read -r name _; do
  case $name in LEAF_*) unset_leaf+=(-u "$name") ;; esac
done < <(env)

"${guard[@]}" env "${unset_leaf[@]}" "$leaf" serve --listen 127.0.0.1:0 --data-dir "$OUT/data" --log-level info >"$OUT/server.log" 2>&1 &
server_pid=$!
pids+=("$server_pid")
addr=
for _ in $(seq 1 100); do
  addr=$(sed -nE 's/.*msg=listening addr=([^ ]+).*/\1/p' "$OUT/server.log" | head -n 1)
  [ -n "$addr" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$addr" ]; then
  cat "$OUT/server.log" >&2
  echo "soak.sh: the server did not start" >&2
  exit 1
fi
base=http://$addr
echo "soak.sh: server PID $server_pid on $base, data in $OUT/data; $MINUTES min, samples every ${INTERVAL}s to $csv"

# sample prints one CSV row: elapsed seconds, RSS KiB, goroutines, open fds,
# Go heap in use (bytes), IDs issued in all.
metrics_file=$OUT/metrics.txt
sample() {
  local rss fds gor heap ids
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status" 2>/dev/null) || return 1
  fds=$(find "/proc/$server_pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  curl -fsS --max-time 5 "$base/metrics" >"$metrics_file" || return 1
  gor=$(awk '$1 == "go_goroutines" {print $2}' "$metrics_file")
  heap=$(awk '$1 == "go_memstats_heap_inuse_bytes" {printf "%.0f", $2}' "$metrics_file")
  ids=$(awk '$1 ~ /^leaf_ids_issued_total/ {s += $2} END {printf "%.0f", s}' "$metrics_file")
  echo "$(($(date +%s) - t0)),$rss,$gor,$fds,$heap,$ids"
}

echo "elapsed_s,rss_kb,goroutines,open_fds,heap_inuse_bytes,ids_issued" >"$csv"
t0=$(date +%s)
sample >>"$csv" || { echo "soak.sh: cannot sample the server" >&2; exit 1; }

# bench runs one load in a background subshell. leaf bench runs at most an
# hour: a longer soak runs it again, hour by hour. Stopping the subshell
# stops its leaf bench.
bench() { # name, args...
  local name=$1 left=$duration d child status=0
  shift
  trap '[ -n "${child:-}" ] && kill -TERM "$child" 2>/dev/null; exit 143' TERM
  while [ "$left" -gt 0 ]; do
    d=$((left > 3600 ? 3600 : left))
    "${guard[@]}" "$leaf" bench --server "$base" --concurrency "$CONCURRENCY" --duration "${d}s" --quiet --json "$@" \
      >>"$OUT/bench-$name.json" 2>>"$OUT/bench-$name.err" &
    child=$!
    wait "$child" || status=$?
    child=
    [ "$status" -eq 0 ] || return "$status"
    left=$((left - d))
  done
}
bench single --mode segment --rate "$RATE_SINGLE" --check-unique &
pids+=($!) single_pid=$!
bench batch --mode segment --count "$BATCH_COUNT" --rate "$RATE_BATCH" &
pids+=($!) batch_pid=$!
bench snowflake --mode snowflake --rate "$RATE_SNOWFLAKE" --check-unique &
pids+=($!) snowflake_pid=$!

# Sample until the load is over (or the server dies), with a deadline in
# case a load generator hangs.
deadline=$((t0 + duration + 120))
died=0
next=$((t0 + INTERVAL))
while ours "$single_pid" || ours "$batch_pid" || ours "$snowflake_pid"; do
  if ! ours "$server_pid"; then
    died=1
    break
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "soak.sh: the load did not stop on time" >&2
    exit 1
  fi
  if [ "$(date +%s)" -ge "$next" ]; then
    if row=$(sample); then
      echo "$row" >>"$csv"
      IFS=, read -r el rss gor fds _ ids <<<"$row"
      printf 'soak.sh: %5ss  rss %6d KiB  goroutines %4s  fds %4s  ids %s\n' "$el" "$rss" "$gor" "$fds" "$ids"
    fi
    next=$((next + INTERVAL))
  fi
  sleep 1
done

if [ "$died" = 1 ]; then
  for p in "$single_pid" "$batch_pid" "$snowflake_pid"; do
    ours "$p" && kill -TERM "$p" 2>/dev/null
  done
fi
bench_failed=0
for n in single batch snowflake; do
  eval "p=\$${n}_pid"
  if ! wait "$p"; then
    bench_failed=1
    echo "soak.sh: load '$n' failed:" >&2
    tail -n 5 "$OUT/bench-$n.err" >&2 || true
  fi
done
if [ "$died" = 0 ] && ! ours "$server_pid"; then
  died=1
fi
if [ "$died" = 0 ]; then
  sample >>"$csv" || true
fi

# Requests and errors from the load generators' summaries (one JSON
# object per bench run, several for a soak over an hour).
sum_json() { # field, files...
  local field=$1
  shift
  cat "$@" 2>/dev/null | awk -v f="\"$field\":" '$1 == f {gsub(/,/, "", $2); s += $2} END {printf "%.0f", s}'
}
benches=("$OUT/bench-single.json" "$OUT/bench-batch.json" "$OUT/bench-snowflake.json")
requests=$(sum_json requests "${benches[@]}")
errors=$(sum_json errors "${benches[@]}")
duplicates=$(sum_json duplicates "${benches[@]}")

awk -F, -v warmup="$WARMUP" -v slack="$GOROUTINE_SLACK" -v pct="$RSS_GROWTH_PCT" -v mb="$RSS_GROWTH_MB" \
  -v requests="$requests" -v errors="$errors" -v dups="${duplicates:-0}" -v died="$died" -v bench_failed="$bench_failed" '
NR == 1 { next }
{
  n++; t = $1; rss = $2; g = $3; fds = $4; ids = $6
  if (n == 1) { rss0 = rss; g0 = g; fds0 = fds; rssmin = rss; rssmax = rss; gmax = g; fdsmax = fds }
  if (rss < rssmin) rssmin = rss; if (rss > rssmax) rssmax = rss
  if (g > gmax) gmax = g; if (fds > fdsmax) fdsmax = fds
  if (!warm && t >= warmup) { warm = 1; rssw = rss; gw = g; tw = t }
  if (warm && g > gwmax) gwmax = g
  rss1 = rss; g1 = g; fds1 = fds; ids1 = ids; t1 = t
}
END {
  if (!warm) { rssw = rss1; gw = g1; tw = t1 }
  printf "\nsoak summary (%d samples over %ds; warm-up %ds)\n", n, t1, tw
  printf "  RSS (MiB)    start %.1f  min %.1f  max %.1f  end %.1f  after warm-up %.1f\n", rss0/1024, rssmin/1024, rssmax/1024, rss1/1024, rssw/1024
  printf "  goroutines   start %d  max %d  end %d  after warm-up %d\n", g0, gmax, g1, gw
  printf "  open fds     start %d  max %d  end %d\n", fds0, fdsmax, fds1
  printf "  IDs issued   %d\n", ids1
  printf "  requests     %d  errors %d  duplicate IDs %d\n", requests, errors, dups
  fail = 0
  growth = rss1 - rssw
  if (growth > rssw * pct / 100 && growth > mb * 1024) {
    printf "  verdict RSS: GROWING, %+.1f MiB (%+.0f%%) since warm-up\n", growth/1024, 100*growth/rssw; fail = 1
  } else {
    printf "  verdict RSS: stable, %+.1f MiB (%+.0f%%) since warm-up\n", growth/1024, 100*growth/rssw
  }
  if (g1 > gw + slack || gwmax > gw + 2*slack) {
    printf "  verdict goroutines: GROWING, %d after warm-up, %d at the end, %d at most\n", gw, g1, gwmax; fail = 1
  } else {
    printf "  verdict goroutines: stable (%+d since warm-up)\n", g1 - gw
  }
  if (died) { print "  the server DIED"; fail = 1 }
  if (bench_failed || errors > 0 || dups > 0) { print "  requests FAILED (see the bench-*.err files)"; fail = 1 }
  exit fail
}' "$csv" && ok=1 || ok=0
echo "  samples: $csv; server log: $OUT/server.log"
if [ "$died" = 1 ]; then
  tail -n 20 "$OUT/server.log" >&2
fi
if [ "$ok" = 1 ]; then
  echo "soak.sh: PASS"
else
  echo "soak.sh: FAIL" >&2
  exit 1
fi
