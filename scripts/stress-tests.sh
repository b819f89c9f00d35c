#!/usr/bin/env bash
# stress-tests.sh: run tests many times while other processes compete for the
# CPU, and print every failure, to find the tests that pass on a quiet machine
# and fail on a busy one (a flaky test is a broken promise to the next person
# who clones the repository).
#
#   scripts/stress-tests.sh                          # every package of both modules, -count=5, 2 burners
#   COUNT=20 BURN=2 scripts/stress-tests.sh ./httpapi ./internal/doublebuf
#   RACE=1 CPU=1,2 RUN=Tombstone scripts/stress-tests.sh ./httpapi
#
# Settings (environment):
#   COUNT    runs of each test (go test -count), default 5
#   BURN     CPU-burning processes beside the tests, default 2 (0: none)
#   RACE     1 adds -race
#   CPU      go test -cpu list, e.g. 1,2
#   SHORT    1 adds -short
#   RUN      go test -run pattern
#   TIMEOUT  go test -timeout per package, default 30m
#   TAGS     go test -tags
#
# Packages run one after the other (never two suites at once on this 2-core
# machine), each with the services of scripts/services.sh and
# LEAF_TEST_STRICT=1, as `make test` runs them. The summary lists, per
# package, how many runs failed and which tests, with the lines each failure
# printed; the whole output of a failing package stays in $LOGDIR. Exit 1 if
# anything failed. The burners are this script's own children and stop with
# it, whatever way it ends.
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-5}
BURN=${BURN:-2}
TIMEOUT=${TIMEOUT:-30m}
LOGDIR=${LOGDIR:-$(mktemp -d /tmp/leaf-stress.XXXXXX)}
mkdir -p "$LOGDIR"

case $COUNT in '' | *[!0-9]*) echo "stress-tests.sh: COUNT=$COUNT is not a number" >&2; exit 2 ;; esac
case $BURN in '' | *[!0-9]*) echo "stress-tests.sh: BURN=$BURN is not a number" >&2; exit 2 ;; esac

eval "$(scripts/services.sh 2>"$LOGDIR/services.log")" || {
	cat "$LOGDIR/services.log" >&2
	echo "stress-tests.sh: services did not start" >&2
	exit 1
}
export LEAF_TEST_STRICT=1

pkgs=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
	mapfile -t pkgs < <(go list ./...; cd e2e && go list ./...)
fi

flags=(-count="$COUNT" -timeout="$TIMEOUT")
[ "${RACE:-}" = 1 ] && flags+=(-race)
[ "${SHORT:-}" = 1 ] && flags+=(-short)
[ -n "${CPU:-}" ] && flags+=(-cpu="$CPU")
[ -n "${RUN:-}" ] && flags+=(-run="$RUN")
[ -n "${TAGS:-}" ] && flags+=(-tags="$TAGS")

burners=()
stop_burners() {
	local pid
	for pid in "${burners[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	burners=()
}
trap stop_burners EXIT INT TERM
for ((i = 0; i < BURN; i++)); do
	# A shell loop spins one core; nothing else is needed.
	bash -c 'while :; do :; done' &
	burners+=($!)
done

echo "stress-tests.sh: ${#pkgs[@]} packages, go test ${flags[*]}, $BURN burners; logs in $LOGDIR"
start=$(date +%s)
failed=0
summary=()
for pkg in "${pkgs[@]}"; do
	name=${pkg#github.com/leafgo/leaf}
	name=${name#/}
	log="$LOGDIR/$(printf '%s' "${name:-root}" | tr '/' '_').log"
	t0=$(date +%s)
	rc=0
	# A package of the e2e module (the heavy tests) runs in that module.
	dir=. arg=$pkg
	case $pkg in
	github.com/leafgo/leaf/e2e/* | ./e2e/* | e2e/*) dir=e2e arg=./${pkg#*e2e/} ;;
	esac
	(cd "$dir" && go test "${flags[@]}" -v "$arg") >"$log" 2>&1 || rc=$?
	secs=$(($(date +%s) - t0))
	# Top-level tests only: a failing subtest also fails its parent.
	fails=$(grep -E '^--- FAIL: ' "$log" | awk '{print $3}' | sort | uniq -c | sort -rn || true)
	if [ "$rc" -eq 0 ]; then
		printf 'ok    %-40s %4ss\n' "${name:-.}" "$secs"
		rm -f "$log"
		continue
	fi
	failed=1
	nfail=$(grep -cE '^--- FAIL: ' "$log" || true)
	printf 'FAIL  %-40s %4ss  %s failing runs\n' "${name:-.}" "$secs" "$nfail"
	if [ -z "$fails" ]; then
		# A panic, a timeout or a build error: no --- FAIL line.
		summary+=("${name:-.}: exit $rc without a failing test; see $log:" "$(tail -n 20 "$log")")
		continue
	fi
	summary+=("${name:-.}:" "$fails")
	# What each failing run printed: go test -v names the test that output
	# belongs to (=== RUN, === CONT, === NAME), so the lines are kept per
	# test and shown when it fails; the first 8 lines of each failure.
	summary+=("$(awk '
		/^=== (RUN|CONT|NAME|PAUSE)/ { cur = $3; next }
		/^(\s*)--- FAIL: / {
			t = $3
			print "      " t ":"
			n = split(buf[t], lines, "\n")
			for (i = 1; i <= n && i <= 8; i++) if (lines[i] != "") print "        " lines[i]
			buf[t] = ""
			next
		}
		/^(\s*)--- (PASS|SKIP): / { buf[$3] = ""; next }
		cur != "" { buf[cur] = buf[cur] $0 "\n" }
	' "$log")")
	summary+=("        (whole output: $log)")
done
stop_burners
echo "stress-tests.sh: $(($(date +%s) - start))s"
if [ "$failed" -eq 0 ]; then
	echo "stress-tests.sh: no failures"
	exit 0
fi
echo
echo "stress-tests.sh: failures"
printf '%s\n' "${summary[@]}"
exit 1
