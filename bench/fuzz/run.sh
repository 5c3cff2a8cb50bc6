#!/bin/sh
# Runs every native fuzzer of the module in turn, each for a set time.
#
#   bench/fuzz/run.sh [minutes per fuzzer, default 10] [package patterns, default ./...]
#   FUZZ='^(FuzzA|FuzzB)$' bench/fuzz/run.sh 10 ./pkg/...   # only fuzzers matching FUZZ
#
# Each fuzzer runs alone (-parallel 1: the machine is shared), with the
# go test cache of its own corpus under $GOCACHE/fuzz; new inputs that
# made a fuzzer fail land in the package's testdata/fuzz/<FuzzName>/ and
# are regular test cases from then on (check them in, with the fix).
# The script prints one line per fuzzer (ok or FAIL, executions and
# seconds) and exits non-zero if any failed.
set -u
mins=${1:-10}
[ $# -gt 0 ] && shift
[ $# -eq 0 ] && set -- ./...
cd "$(dirname "$0")/../.."
fail=0
for pkg in $(go list "$@"); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u | grep -E "${FUZZ:-.}"); do
		start=$(date +%s)
		before=$(ls "$dir/testdata/fuzz/$f" 2>/dev/null | wc -l)
		# -timeout above -fuzztime: go test's default (10m) would end a
		# 10-minute run as a failure.
		out=$(go test -run '^$' -fuzz "^${f}\$" -fuzztime "${mins}m" -timeout "$((mins * 2 + 5))m" -parallel 1 "$pkg" 2>&1)
		rc=$?
		after=$(ls "$dir/testdata/fuzz/$f" 2>/dev/null | wc -l)
		# Go 1.26's fuzz coordinator can end a run at its deadline with a
		# bare "context deadline exceeded" and no failing input
		# (golang/go#75804, fixed in Go 1.27): that is a finished run, not
		# a finding. A finding always writes its input to testdata.
		if [ $rc -ne 0 ] && [ "$after" = "$before" ] && printf '%s\n' "$out" | tail -5 | grep -q 'context deadline exceeded'; then
			rc=0
		fi
		secs=$(( $(date +%s) - start ))
		execs=$(printf '%s\n' "$out" | grep -o 'execs: [0-9]*' | tail -1 | cut -d' ' -f2)
		if [ $rc -eq 0 ]; then
			echo "ok    $pkg $f ${secs}s ${execs:-?} execs"
		else
			echo "FAIL  $pkg $f ${secs}s"
			printf '%s\n' "$out" | tail -20
			fail=1
		fi
	done
done
exit $fail
