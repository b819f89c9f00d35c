#!/usr/bin/env bash
# test.sh: the whole test suite, as `make test` runs it. It makes sure the
# services run on 127.0.0.1 (scripts/services.sh), then runs five stages with
# LEAF_TEST_STRICT=1, so that a missing service fails instead of skipping:
#
#   lint    gofmt, go vet and staticcheck, with and without the chaos tag
#           (make lint)
#   tests   every test of the module
#   chaos   the chaos test (internal/chaos, a minute of faults per registry)
#           and the chaos build's clock tests
#   fuzz    every fuzz target for FUZZTIME (scripts/fuzz.sh)
#   race    the race detector over the short variant of the suite
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
run_stage() {
	case $1 in
	lint) make --no-print-directory lint ;;
	tests) "$GO" test -count=1 -parallel 4 ./... ;;
	chaos) LEAF_CHAOS=1 "$GO" test -count=1 -v -tags chaos -run Chaos ./cmd/leaf ./internal/chaos ;;
	fuzz) scripts/fuzz.sh ;;
	race) "$GO" test -race -short -count=1 -parallel 4 ./... ;;
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
