#!/usr/bin/env bash
# Scale check (issue #13): a leaf_alloc of SIZES tags on each of STORES, one
# 'leaf serve' on it, and what a new user at that scale would see:
#   - start-up: from exec to the first /healthz answer (the tag listing is
#     done before the server listens);
#   - RSS idle, after touching 2% of the tags (one request each, evenly
#     spread), and after three /metrics scrapes (size and time of each);
#   - the size of the first page of /v2/tags, /db, /cache and
#     /v2/status?detail=1 (no admin token: on 127.0.0.1 the admin routes
#     need none);
#   - 3,000 requests for random never-created tag names: their answers, and
#     the store statements they caused, counted on the server's side: the
#     segment generator's debug line per store lookup that found nothing,
#     and on MariaDB also the server's Com_select delta (global: other
#     clients of the same MariaDB add to it, so it is an upper bound).
# Then, unless REFRESH_ROWS=0, the cost of a refresh at REFRESH_ROWS rows on
# MariaDB and PostgreSQL (go test -run TestScaleRefresh, LEAF_SCALE_ROWS):
# the change-counter read of a refresh with nothing changed, and the full
# listing.
#
# The tables are filled with one INSERT ... SELECT from a generated sequence
# (sqlite3's recursive CTE, MariaDB's seq_1_to_N): names scale-0000001...,
# step 1000. Each server gets a free 127.0.0.1 port, its own data dir and
# database, and none of the caller's LEAF_* variables. Everything made here
# is removed at exit (the MariaDB databases dropped, the servers stopped by
# PID); each step is bounded in time.
#   scripts/scale.sh                           # 100,000 tags, sqlite and mysql; refresh at 1,000,000
#   SIZES="100000 1000000" STORES=mysql scripts/scale.sh
#   REFRESH_ROWS=0 scripts/scale.sh            # skip the refresh measurement
# Needs sqlite3, the mysql client, curl, python3. MariaDB: MYSQL_HOST,
# MYSQL_PORT, MYSQL_USER (127.0.0.1, 3306, root, no password). The refresh
# measurement uses LEAF_TEST_MYSQL_DSN and LEAF_TEST_POSTGRES_DSN (defaults
# for the same local servers).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-100000}
STORES=${STORES:-"sqlite mysql"}
REFRESH_ROWS=${REFRESH_ROWS:-1000000}
UNKNOWN=${UNKNOWN:-3000}
MYSQL_HOST=${MYSQL_HOST:-127.0.0.1}
MYSQL_PORT=${MYSQL_PORT:-3306}
MYSQL_USER=${MYSQL_USER:-root}
GO=${GO:-go}
for c in sqlite3 mysql curl python3; do
  command -v "$c" >/dev/null || { echo "scale.sh: $c not found" >&2; exit 2; }
done

tmp=$(mktemp -d /tmp/leaf-scale.XXXXXX)
dbs=()
server_pid=

# ours reports whether PID is still a running child of this shell: bash
# reaps a child that exits, after which its PID may belong to anyone.
ours() {
  local stat state ppid
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  read -r state ppid _ <<<"${stat##*) }"
  [ "$state" != Z ] && [ "$ppid" = "$$" ]
}
stop_server() {
  [ -n "$server_pid" ] || return 0
  if ours "$server_pid"; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do ours "$server_pid" || break; sleep 0.1; done
    ours "$server_pid" && kill -KILL "$server_pid" 2>/dev/null
  fi
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}
mysql_cmd=(mysql -h "$MYSQL_HOST" -P "$MYSQL_PORT" -u "$MYSQL_USER" --batch --skip-column-names)
my() { timeout 60 "${mysql_cmd[@]}" "$@"; }
cleanup() {
  stop_server
  for d in "${dbs[@]}"; do my -e "DROP DATABASE IF EXISTS $d" || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
guard=()
if setpriv --help 2>/dev/null | grep -q -- --pdeathsig; then
  guard=(setpriv --pdeathsig TERM)
fi
unset_leaf=()
while IFS='=' read -r name _; do
  case $name in LEAF_*) unset_leaf+=(-u "$name") ;; esac
done < <(env)

echo "scale.sh: building leaf"
"$GO" build -o "$tmp/leaf" ./cmd/leaf
leaf=$tmp/leaf

now_ms() { date +%s%3N; }
rss_mb() { awk '/^VmRSS:/ {printf "%.1f MB", $2/1024}' "/proc/$server_pid/status"; }
human() { awk -v b="$1" 'BEGIN { if (b >= 1e6) printf "%.2f MB", b/1e6; else if (b >= 1e3) printf "%.1f kB", b/1e3; else printf "%d B", b }'; }

# Leaf's leaf_alloc DDL; the server adds its own tables beside it at start.
fill_sqlite() { # path n
  timeout 300 sqlite3 "$1" <<SQL
CREATE TABLE leaf_alloc (
  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
  max_id      BIGINT       NOT NULL DEFAULT 1,
  step        INT          NOT NULL,
  description VARCHAR(256)          DEFAULT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
);
WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < $2)
INSERT INTO leaf_alloc (biz_tag, max_id, step) SELECT 'scale-' || substr('0000000' || i, -7), 1, 1000 FROM seq;
SQL
}
fill_mysql() { # db n
  timeout 300 "${mysql_cmd[@]}" <<SQL
CREATE DATABASE $1;
USE $1;
CREATE TABLE leaf_alloc (
  biz_tag varchar(128) NOT NULL DEFAULT '',
  max_id bigint(20) NOT NULL DEFAULT '1',
  step int(11) NOT NULL,
  description varchar(256) DEFAULT NULL,
  update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB;
INSERT INTO leaf_alloc (biz_tag, max_id, step) SELECT CONCAT('scale-', LPAD(seq, 7, '0')), 1, 1000 FROM seq_1_to_$2;
SQL
}

# requests FILE: GETs every URL in FILE over one keep-alive connection and
# prints how many answers had each status code ("404 x 3000").
cat >"$tmp/requests.py" <<'PY'
import collections, http.client, sys, urllib.parse
urls = [l.strip() for l in open(sys.argv[1]) if l.strip()]
u = urllib.parse.urlsplit(urls[0])
conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
codes = collections.Counter()
for url in urls:
    conn.request("GET", urllib.parse.urlsplit(url).path)
    r = conn.getresponse()
    r.read()
    codes[r.status] += 1
print(", ".join(f"{c} x {n}" for c, n in sorted(codes.items())))
PY
requests() { timeout 300 python3 "$tmp/requests.py" "$1"; }

run() { # store n
  local store=$1 n=$2 dir=$tmp/$1-$2 dsn db base t0 t1 addr
  mkdir -p "$dir"
  echo
  echo "== $store, $n tags =="
  t0=$(now_ms)
  case $store in
    sqlite)
      fill_sqlite "$dir/leaf.db" "$n"
      dsn=$dir/leaf.db ;;
    mysql)
      db=leafscale_$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
      dbs+=("$db")
      fill_mysql "$db" "$n"
      dsn="$MYSQL_USER@tcp($MYSQL_HOST:$MYSQL_PORT)/$db" ;;
  esac
  echo "table filled in $(( $(now_ms) - t0 )) ms"

  t0=$(now_ms)
  "${guard[@]}" env "${unset_leaf[@]}" "$leaf" serve --listen 127.0.0.1:0 --data-dir "$dir/data" \
    --segment-store "$store" --segment-dsn "$dsn" --log-level debug >"$dir/server.log" 2>&1 &
  server_pid=$!
  addr=
  for _ in $(seq 1 3000); do # 30s
    addr=$(sed -nE 's/.*msg=listening addr=([^ ]+).*/\1/p' "$dir/server.log" | head -n 1)
    if [ -n "$addr" ] && curl -fs --max-time 1 "http://$addr/healthz" >/dev/null; then break; fi
    ours "$server_pid" || break
    addr=
    sleep 0.01
  done
  if [ -z "$addr" ]; then
    cat "$dir/server.log" >&2
    echo "scale.sh: the server did not start within 30s" >&2
    exit 1
  fi
  t1=$(now_ms)
  base=http://$addr
  echo "start-up:                 $(( t1 - t0 )) ms (exec to the first /healthz answer)"
  sleep 2
  echo "RSS idle:                 $(rss_mb)"

  local touch=$(( n / 50 ))
  awk -v n="$n" -v base="$base" 'BEGIN { for (i = 50; i <= n; i += 50) printf "%s/api/segment/get/scale-%07d\n", base, i }' >"$dir/touch.txt"
  t0=$(now_ms)
  local answers
  answers=$(requests "$dir/touch.txt")
  echo "touched 2% ($touch tags):  answers $answers in $(( $(now_ms) - t0 )) ms"
  sleep 1
  echo "RSS after touching 2%:    $(rss_mb)"

  local i out code size secs
  for i in 1 2 3; do
    out=$(curl -fsS --max-time 120 -o "$dir/metrics.txt" -w '%{size_download} %{time_total}' "$base/metrics")
    echo "/metrics scrape $i:        $(human "${out% *}"), $(awk -v s="${out#* }" 'BEGIN { printf "%.0f ms", s*1000 }'), $(grep -vc '^#' "$dir/metrics.txt") series"
  done
  echo "RSS after 3 scrapes:      $(rss_mb)"

  local path
  for path in /v2/tags /db /cache '/v2/status?detail=1'; do
    out=$(curl -sS --max-time 120 -o /dev/null -w '%{http_code} %{size_download} %{time_total}' "$base$path")
    read -r code size secs <<<"$out"
    printf '%-32s%s, HTTP %s, %s\n' "$path first page:" "$(human "$size")" "$code" "$(awk -v s="$secs" 'BEGIN { printf "%.0f ms", s*1000 }')"
  done

  python3 -c "
import secrets, sys
for _ in range($UNKNOWN): print('$base/api/segment/get/never-' + secrets.token_hex(8))" >"$dir/unknown.txt"
  local lookups0 com0 com1
  lookups0=$(grep -c 'segment tag not found in store' "$dir/server.log" || true)
  [ "$store" = mysql ] && com0=$(my -e "SHOW GLOBAL STATUS LIKE 'Com_select'" | awk '{print $2}')
  t0=$(now_ms)
  answers=$(requests "$dir/unknown.txt")
  t1=$(now_ms)
  [ "$store" = mysql ] && com1=$(my -e "SHOW GLOBAL STATUS LIKE 'Com_select'" | awk '{print $2}')
  sleep 0.5 # the last lookups' log lines
  local lookups=$(( $(grep -c 'segment tag not found in store' "$dir/server.log" || true) - lookups0 ))
  echo "$UNKNOWN unknown names:      answers $answers in $(( t1 - t0 )) ms"
  echo "  store lookups they caused (server's log): $lookups"
  if [ "$store" = mysql ]; then
    echo "  MariaDB Com_select delta meanwhile: $(( com1 - com0 )) (global: includes other clients of this MariaDB)"
  fi
  stop_server
}

for n in $SIZES; do
  for store in $STORES; do
    run "$store" "$n"
  done
done

if [ "$REFRESH_ROWS" != 0 ]; then
  echo
  echo "== refresh at $REFRESH_ROWS rows (MariaDB, PostgreSQL) =="
  export LEAF_TEST_MYSQL_DSN=${LEAF_TEST_MYSQL_DSN:-"$MYSQL_USER@tcp($MYSQL_HOST:$MYSQL_PORT)/"}
  export LEAF_TEST_POSTGRES_DSN=${LEAF_TEST_POSTGRES_DSN:-"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"}
  LEAF_SCALE_ROWS=$REFRESH_ROWS LEAF_TEST_STRICT=1 timeout 600 "$GO" test -count=1 -timeout 590s -run '^TestScaleRefresh$' -v ./mysql ./postgres |
    grep -E 'generator_test.go|^(ok|FAIL|---)' | sed -E 's/^ *generator_test.go:[0-9]+: /  /'
fi
