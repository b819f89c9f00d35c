#!/usr/bin/env bash
# cluster.sh: three 'leaf serve' processes on this machine, sharing a MariaDB
# database (segment IDs) and ZooKeeper (snowflake worker IDs, Leaf's tree), as
# a cluster of hosts would; for trying leaf as several servers, not for
# production (see deploy/kubernetes for that).
#
#   scripts/cluster.sh up       start the nodes that are not running; print their URLs
#   scripts/cluster.sh status   which nodes run, and what their /readyz says
#   scripts/cluster.sh down     stop the nodes this script started (SIGTERM: they
#                               drain and give their unused IDs back)
#
# MariaDB on 127.0.0.1:3306 (root, no password) and ZooKeeper on
# 127.0.0.1:2181 are made sure of by scripts/services.sh, which installs
# them from Debian's packages only if they are missing. The nodes use the
# database leaf_cluster (created if missing; the test tag leaf-segment-test is
# seeded into it) and the ZooKeeper path /snowflake/leaf-cluster. Node N
# listens on 127.0.0.1, HTTP port 8180+N and gRPC port 9180+N, and keeps its
# pid file, log and data directory in the state directory:
#
#   leaf-cluster/leaf            the binary, built from this checkout by 'up'
#   leaf-cluster/nodeN.pid       "PID START_TIME" of a running node
#   leaf-cluster/nodeN.log       its log (appended to across restarts)
#   leaf-cluster/nodeN/          its data directory (the worker-ID cache)
#
# Idempotent: 'up' leaves running nodes alone and starts the others, 'down'
# stops only processes whose pid file it wrote (the start time guards against
# a PID reused since), 'status' changes nothing. None of the caller's LEAF_*
# variables reach the nodes. Settings, from the environment:
#
#   CLUSTER_DIR=./leaf-cluster  NODES=3  HTTP_BASE=8180  GRPC_BASE=9180
#   CLUSTER_DB=leaf_cluster     CLUSTER_NAME=leaf-cluster
#
# Exit status: 0 done (status: every node runs), 1 a failure, 2 bad usage,
# 3 status found a node not running.
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER_DIR=${CLUSTER_DIR:-./leaf-cluster}
NODES=${NODES:-3}
HTTP_BASE=${HTTP_BASE:-8180}
GRPC_BASE=${GRPC_BASE:-9180}
CLUSTER_DB=${CLUSTER_DB:-leaf_cluster}
CLUSTER_NAME=${CLUSTER_NAME:-leaf-cluster}
readonly MYSQL_ADDR=127.0.0.1:3306 ZK_ADDR=127.0.0.1:2181
# Time for a node to answer /healthz after start (it may wait out a stale
# ZooKeeper claim of its endpoint after a kill -9: up to the session timeout),
# and to exit after SIGTERM (shutdown_timeout is 10s).
readonly START_WAIT=60 STOP_WAIT=20

# usage CODE: the comment above, on stderr for a usage error.
usage() {
	if [ "$1" -eq 0 ]; then
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	else
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	fi
	exit "$1"
}
die() { printf 'cluster: %s\n' "$*" >&2; exit 1; }

for v in NODES HTTP_BASE GRPC_BASE; do
	case ${!v} in '' | *[!0-9]*) printf 'cluster: %s must be a whole number, got %q\n' "$v" "${!v}" >&2; exit 2 ;; esac
done
case $CLUSTER_DB in '' | *[!A-Za-z0-9_]*) printf 'cluster: CLUSTER_DB must be [A-Za-z0-9_]+, got %q\n' "$CLUSTER_DB" >&2; exit 2 ;; esac

bin=$CLUSTER_DIR/leaf
http_port() { echo $((HTTP_BASE + $1)); }
grpc_port() { echo $((GRPC_BASE + $1)); }
pidfile() { echo "$CLUSTER_DIR/node$1.pid"; }

# start_time PID: the process's start time in clock ticks since boot (field
# 22 of /proc/PID/stat), which with the PID names one process for good;
# status 1 when there is no such process or it has exited (a zombie: the
# nodes outlive this script, and the PID 1 of a container may never reap
# them).
start_time() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	# Fields after the command name, which may hold spaces: ") state ppid ...".
	# shellcheck disable=SC2086
	set -- ${stat##*) }
	case $1 in Z | X) return 1 ;; esac
	echo "${20}"
}

# running N: the PID of node N if the process its pid file names still runs,
# with the same start time; nothing (status 1) otherwise.
running() {
	local file pid started now
	file=$(pidfile "$1")
	[ -f "$file" ] || return 1
	read -r pid started <"$file" || return 1
	now=$(start_time "$pid") || return 1
	[ "$now" = "$started" ] || return 1
	echo "$pid"
}

# clean_env runs a command with the caller's environment less its LEAF_*
# variables. A simple command, so that a backgrounded one's $! is the PID of
# what it runs (env and nohup exec).
clean_env=(env)
for name in $(compgen -e); do
	case $name in LEAF_*) clean_env+=(-u "$name") ;; esac
done

# node_args N: the serve flags of node N.
node_args() {
	printf '%s\n' serve \
		--listen "127.0.0.1:$(http_port "$1")" \
		--grpc-listen "127.0.0.1:$(grpc_port "$1")" \
		--data-dir "$CLUSTER_DIR/node$1" \
		--segment-store mysql --segment-dsn "root@tcp($MYSQL_ADDR)/$CLUSTER_DB" \
		--snowflake-registry zookeeper --zk "$ZK_ADDR" --name "$CLUSTER_NAME"
}

# readyz N: node N's /readyz answer on one line, or why there is none.
readyz() {
	local body
	if body=$(curl -sS --max-time 2 "http://127.0.0.1:$(http_port "$1")/readyz" 2>&1); then
		printf '%s' "$body" | paste -sd ' ' -
	else
		echo "no answer (${body##*: })"
	fi
}

up() {
	mkdir -p "$CLUSTER_DIR"
	scripts/services.sh mariadb zookeeper >/dev/null
	mariadb -h127.0.0.1 -P3306 -uroot -e "CREATE DATABASE IF NOT EXISTS \`$CLUSTER_DB\`"
	# Built beside and renamed over the old binary, which running nodes may
	# be executing.
	local version
	version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
	go build -ldflags "-X main.version=$version" -o "$bin.new" ./cmd/leaf
	mv -f "$bin.new" "$bin"

	local n pid args started=() failed=0
	for ((n = 1; n <= NODES; n++)); do
		if pid=$(running "$n"); then
			echo "node$n: already running (pid $pid)"
			continue
		fi
		mapfile -t args < <(node_args "$n")
		# The seed: the shared database gets the test tag once, whichever
		# node comes first; the others find it there.
		if ! "${clean_env[@]}" LEAF_SEGMENT_SEED=true "$bin" "${args[@]}" --check >/dev/null; then
			die "node$n: its configuration is refused (above)"
		fi
		mkdir -p "$CLUSTER_DIR/node$n"
		printf '\n=== %s: cluster.sh up\n' "$(date -u +%FT%TZ)" >>"$CLUSTER_DIR/node$n.log"
		"${clean_env[@]}" LEAF_SEGMENT_SEED=true nohup "$bin" "${args[@]}" </dev/null >>"$CLUSTER_DIR/node$n.log" 2>&1 &
		pid=$!
		echo "$pid $(start_time "$pid")" >"$(pidfile "$n")"
		started+=("$n")
	done
	for n in "${started[@]}"; do
		if wait_healthy "$n"; then
			echo "node$n: started (pid $(running "$n"))"
		else
			failed=1
		fi
	done
	echo
	for ((n = 1; n <= NODES; n++)); do
		local url=http://127.0.0.1:$(http_port "$n")
		printf 'node%d  %s  monitor %s/monitor/  metrics %s/metrics  gRPC 127.0.0.1:%s  log %s\n' \
			"$n" "$url" "$url" "$url" "$(grpc_port "$n")" "$CLUSTER_DIR/node$n.log"
	done
	echo
	echo "Try: curl http://127.0.0.1:$(http_port 1)/api/segment/get/leaf-segment-test"
	echo "     curl http://127.0.0.1:$(http_port 2)/api/snowflake/get/any"
	return "$failed"
}

# wait_healthy N: wait until node N answers /healthz; on its death or after
# START_WAIT, show the end of its log and fail.
wait_healthy() {
	local i
	for ((i = 0; i < START_WAIT * 5; i++)); do
		if ! running "$1" >/dev/null; then
			echo "node$1: exited during start-up; the end of $CLUSTER_DIR/node$1.log:" >&2
			tail -n 5 "$CLUSTER_DIR/node$1.log" >&2
			rm -f "$(pidfile "$1")"
			return 1
		fi
		if curl -fsS --max-time 1 "http://127.0.0.1:$(http_port "$1")/healthz" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.2
	done
	echo "node$1: no answer on /healthz after ${START_WAIT}s; still starting? See $CLUSTER_DIR/node$1.log" >&2
	return 1
}

down() {
	local n pid pids=() nodes=()
	for ((n = 1; n <= NODES; n++)); do
		if pid=$(running "$n"); then
			kill -TERM "$pid"
			pids+=("$pid")
			nodes+=("$n")
		else
			echo "node$n: not running"
			rm -f "$(pidfile "$n")"
		fi
	done
	local i j
	for i in "${!nodes[@]}"; do
		n=${nodes[$i]}
		for ((j = 0; j < STOP_WAIT * 5; j++)); do
			running "$n" >/dev/null || break
			sleep 0.2
		done
		if running "$n" >/dev/null; then
			echo "node$n: still running ${STOP_WAIT}s after SIGTERM; killing pid ${pids[$i]}"
			kill -KILL "${pids[$i]}"
		else
			echo "node$n: stopped (pid ${pids[$i]})"
		fi
		rm -f "$(pidfile "$n")"
	done
	echo "The database $CLUSTER_DB, the ZooKeeper path /snowflake/$CLUSTER_NAME and $CLUSTER_DIR are kept;"
	echo "'up' continues from them."
}

status() {
	local n pid down=0
	for ((n = 1; n <= NODES; n++)); do
		local url=http://127.0.0.1:$(http_port "$n")
		if pid=$(running "$n"); then
			printf 'node%d  running (pid %s)  %s  readyz: %s\n' "$n" "$pid" "$url" "$(readyz "$n")"
		else
			printf 'node%d  not running        %s\n' "$n" "$url"
			down=3
		fi
	done
	return "$down"
}

[ $# -eq 1 ] || usage 2
case $1 in
up | down | status) "$1" ;;
-h | --help | help) usage 0 ;;
*)
	printf 'cluster: unknown command %q: want up, down or status\n' "$1" >&2
	exit 2
	;;
esac
