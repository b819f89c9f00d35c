#!/usr/bin/env bash
# Throughput of a segment store spread over two databases while one fails:
# two private MariaDB instances (their own data directories and ports under
# a temporary directory), three 'leaf serve' on them, and 'leaf bench'
# through all three servers (the Go client, single IDs) in three phases of
# PHASE seconds each:
#
#   healthy   both databases up
#   killed    database 0 kill -9'd at the start of the phase, restarted at its end
#   stopped   database 1 SIGSTOPped at the start of the phase, continued at its end
#
# and prints IDs/s, failed requests and p99 latency per phase, with each
# faulty phase's rate as a share of the healthy one (issue #17's goal:
# >= 80%). The figures depend on the machine: run it on an idle one.
#
# Only the processes started here are stopped, by PID; the temporary
# directory is removed. Needs mariadb-install-db and mariadbd
# (scripts/services.sh installs them).
#   scripts/multidb-bench.sh              # PHASE=10
#   PHASE=5 CONCURRENCY=32 scripts/multidb-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PHASE=${PHASE:-10}
CONCURRENCY=${CONCURRENCY:-16}
GO=${GO:-go}

work=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do
		kill -CONT "$pid" 2>/dev/null || true
		kill -KILL "$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# free_port prints a loopback port nothing listens on.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}

# wait_until runs its arguments every 100ms until they succeed, for at most
# 30s.
wait_until() {
	for _ in $(seq 300); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.1
	done
	echo "timed out waiting for: $*" >&2
	return 1
}

"$GO" build -o "$work/leaf" ./cmd/leaf
leaf=$work/leaf

# A MariaDB instance i: data directory, port, pid.
db_port=()
db_pid=()
db_args=()
start_db() {
	local i=$1
	# shellcheck disable=SC2086
	/usr/sbin/mariadbd ${db_args[$i]} >>"$work/db$i.log" 2>&1 &
	db_pid[i]=$!
	pids+=("${db_pid[$i]}")
	wait_until mariadb --protocol=tcp -h127.0.0.1 -P"${db_port[$i]}" -uroot -e 'SELECT 1'
}
dsns=()
for i in 0 1; do
	dir=$work/db$i
	mkdir -p "$dir"
	mariadb-install-db --no-defaults --datadir="$dir/data" --auth-root-authentication-method=normal \
		--skip-test-db --user=root --innodb-log-file-size=8M >"$work/install$i.log" 2>&1
	db_port[i]=$(free_port)
	db_args[i]="--no-defaults --datadir=$dir/data --port=${db_port[$i]} --bind-address=127.0.0.1 --skip-name-resolve
		--socket=$dir/mysqld.sock --pid-file=$dir/mysqld.pid --user=root --skip-log-bin --performance-schema=off
		--innodb-buffer-pool-size=64M --innodb-log-file-size=8M"
	start_db "$i"
	mariadb --protocol=tcp -h127.0.0.1 -P"${db_port[$i]}" -uroot -e 'CREATE DATABASE leaf'
	dsns+=("root@tcp(127.0.0.1:${db_port[$i]})/leaf?timeout=2s")
done

env_list=(env -i PATH="$PATH" HOME="$work" LEAF_SEGMENT_STORE=mysql
	"LEAF_SEGMENT_DSN=${dsns[0]}
${dsns[1]}" LEAF_SNOWFLAKE_ENABLED=false LEAF_LOG_LEVEL=warn)
"${env_list[@]}" "$leaf" db init >/dev/null
"${env_list[@]}" "$leaf" tags create bench.multi --step 1000 >/dev/null

servers=()
for i in 0 1 2; do
	port=$(free_port)
	"${env_list[@]}" LEAF_DATA_DIR="$work/leaf$i" "$leaf" serve --listen "127.0.0.1:$port" >"$work/leaf$i.log" 2>&1 &
	pids+=("$!")
	servers+=(--server "http://127.0.0.1:$port")
	wait_until curl -fsS "http://127.0.0.1:$port/api/segment/get/bench.multi"
done

# phase NAME runs the bench for PHASE seconds and prints a line.
healthy_rate=
phase() {
	local name=$1 out rate errors p99 share=""
	out=$("$leaf" bench "${servers[@]}" --tag bench.multi --duration "${PHASE}s" --concurrency "$CONCURRENCY" --json --quiet || true)
	rate=$(sed -n 's/^  "ids_per_second": \([0-9.]*\).*/\1/p' <<<"$out" | head -1)
	errors=$(sed -n 's/^  "errors": \([0-9]*\).*/\1/p' <<<"$out" | head -1)
	p99=$(tr -d '\n ' <<<"$out" | sed -n 's/.*"latency_us":{[^}]*"p99":\([0-9.]*\).*/\1/p')
	if [[ -z $healthy_rate ]]; then
		healthy_rate=$rate
	else
		share=$(awk -v r="$rate" -v h="$healthy_rate" 'BEGIN { printf "%.0f%% of healthy", 100 * r / h }')
	fi
	printf '%-8s %12.0f IDs/s  %6s failed requests  p99 %8.0f us  %s\n' "$name" "$rate" "$errors" "$p99" "$share"
}

echo "2 databases, 3 servers, leaf bench --concurrency $CONCURRENCY (single IDs through the Go client), ${PHASE}s a phase"
phase healthy

kill -KILL "${db_pid[0]}"
# Reaped at once, so that the shell does not report it killed.
{ wait "${db_pid[0]}" || true; } 2>/dev/null
phase killed
start_db 0

kill -STOP "${db_pid[1]}"
phase stopped
kill -CONT "${db_pid[1]}"
