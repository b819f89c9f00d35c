#!/usr/bin/env bash
# Runs every Go fuzz target of the module, one after the other, for FUZZTIME
# each, and stops at the first failure, naming the crasher file Go wrote (it
# goes to <package>/testdata/fuzz/<Target>/, where it stays as a regression
# seed once the bug is fixed) and the command that replays it.
#
# Targets are found in the source, every "func FuzzXxx(f *testing.F)" in a
# _test.go file, so a new one is fuzzed without being listed here; a target
# that go test then does not run (a build tag, a typo) fails the run.
#   scripts/fuzz.sh                  # every target, FUZZTIME=10s each
#   FUZZTIME=1m scripts/fuzz.sh      # longer
#   scripts/fuzz.sh Decode           # only targets whose name matches
# FUZZMINIMIZETIME bounds the shrinking of each new input (Go's default, 60s,
# can take a short run's whole time); a crasher is reported shrunk or not.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-3s}
filter=${1:-}

# "dir name" per target, sorted so that runs are in a stable order.
targets=$(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . |
  grep -v -e '/testdata/' -e '/vendor/' |
  sed -E 's#^\./(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*).*#\1 \2#; s#^\./[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*).*#. \1#' |
  sort -u)
if [ -n "$filter" ]; then
  targets=$(printf '%s\n' "$targets" | awk -v f="$filter" '$2 ~ f')
fi
if [ -z "$targets" ]; then
  echo "fuzz.sh: no fuzz target${filter:+ matching $filter}" >&2
  exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
n=0
while read -r dir name; do
  pkg=./$dir
  [ "$dir" = . ] && pkg=.
  t0=$(date +%s)
  status=ok
  if ! "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg" >"$log" 2>&1; then
    status=failed
  fi
  # Go 1.26's coordinator can fail a run that reached -fuzztime with a bare
  # "context deadline exceeded" and no input (go.dev/issue/75804, fixed in
  # Go 1.27): the target was fuzzed for its whole time and nothing failed.
  if [ "$status" = failed ] && ! grep -q 'Failing input written' "$log" &&
    grep -A1 -e "^--- FAIL: ${name} " "$log" | grep -qx '    context deadline exceeded'; then
    echo "fuzz.sh: $name ($pkg): ignoring Go's spurious 'context deadline exceeded' at the end of -fuzztime (go.dev/issue/75804)" >&2
    status=ok
  fi
  if [ "$status" = failed ]; then
    cat "$log"
    crasher=$(grep -oE 'testdata/fuzz/[^ ]+' "$log" | tail -n 1 || true)
    if [ -n "$crasher" ]; then
      echo "fuzz.sh: $name ($pkg) failed; crasher: $dir/$crasher" >&2
      echo "fuzz.sh: replay: $GO test -run '^${name}\$/^${crasher##*/}\$' $pkg" >&2
    else
      echo "fuzz.sh: $name ($pkg) failed without a crasher file: see the output above" >&2
    fi
    exit 1
  fi
  if grep -q -e 'no fuzz tests to fuzz' -e 'no tests to run' "$log" || ! grep -q 'fuzz: elapsed' "$log"; then
    cat "$log"
    echo "fuzz.sh: $name ($pkg) did not run" >&2
    exit 1
  fi
  execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -n 1 || true)
  printf 'ok  %-18s %-20s %3ss  %s\n' "$pkg" "$name" "$(($(date +%s) - t0))" "$execs"
  n=$((n + 1))
done <<<"$targets"
echo "fuzz.sh: $n targets, FUZZTIME=$FUZZTIME each, $(($(date +%s) - start))s in all"
