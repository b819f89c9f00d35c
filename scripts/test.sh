#!/usr/bin/env bash
# test.sh: the whole test suite, as `make test` runs it. It makes sure the
# services run on 127.0.0.1 (scripts/services.sh), then runs five stages with
# LEAF_TEST_STRICT=1, so that a missing service fails instead of skipping:
#
#   lint    gofmt, go vet and staticcheck, with and without the chaos tag
#           (make lint)
#   tests   every test of the module, and of the e2e module beside it (the
#           browser, OpenAPI, Kubernetes and Prometheus tests, kept apart
#           for their requirements), the two at once
#   chaos   the chaos test (internal/chaos, a minute of faults per registry)
#           and the chaos build's clock tests
#   fuzz    every fuzz target for FUZZTIME (scripts/fuzz.sh)
#   race    the race detector over the short variant of the suite (both
#           modules)
#
# Every stage runs even when an earlier one failed, so that one failing test
# cannot hide the others; the script fails at the end, naming the stages that
# failed, with each stage's time. STAGES="tests race" runs only those.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
export FUZZTIME=${FUZZTIME:-5s}
stages=${STAGES:-lint tests chaos fuzz race}

if ! services=$(scripts/services.sh); then
	echo "test.sh: the services did not start" >&2
	exit 1
fi
eval "$services"
export LEAF_TEST_STRICT=1

# Tests run four at a time within a package (go test's default is one per
# core): cmd/leaf's run real servers and mostly wait on them (leases to
# lapse, registries restarted, processes started), and on two cores one per
# core left the machine idle for minutes.
# both_modules FLAGS...: go test FLAGS over the leaf module and the e2e
# module at once (the e2e tests mostly wait on servers and a browser, so
# they overlap the long cmd/leaf package well); the e2e module's output is
# printed after the leaf module's, not interleaved with it. Fails if either
# failed.
both_modules() {
	local e2e_log rc=0
	e2e_log=$(mktemp)
	(cd e2e && "$GO" test "$@" ./...) >"$e2e_log" 2>&1 &
	local e2e_pid=$!
	"$GO" test "$@" ./... || rc=1
	wait "$e2e_pid" || rc=1
	cat "$e2e_log"
	rm -f "$e2e_log"
	return $rc
}

run_stage() {
	case $1 in
	lint) make --no-print-directory lint ;;
	tests) both_modules -count=1 -parallel 4 ;;
	chaos) LEAF_CHAOS=1 "$GO" test -count=1 -v -tags chaos -run Chaos ./cmd/leaf ./internal/chaos ;;
	fuzz) scripts/fuzz.sh ;;
	race) both_modules -race -short -count=1 -parallel 4 ;;
	*)
		echo "test.sh: unknown stage $1 (lint, tests, chaos, fuzz, race)" >&2
		return 2
		;;
	esac
}

failed=()
summary=()
start=$(date +%s)
for stage in $stages; do
	echo "=== stage $stage"
	t0=$(date +%s)
	if run_stage "$stage"; then
		result=ok
	else
		result=FAILED
		failed+=("$stage")
	fi
	summary+=("$(printf '%-6s %-6s %4ss' "$stage" "$result" "$(($(date +%s) - t0))")")
done
echo "=== summary ($(($(date +%s) - start))s)"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
	echo "test.sh: failed: ${failed[*]}" >&2
	exit 1
fi
