#!/usr/bin/env bash
# Two revisions of the tree side by side: the DNS comparison
# (bench/dns/compare.sh), the edge comparison (bench/proxy/compare.sh)
# and the five-process run (bench/peer/fivenodes.sh), each run from a
# checkout of BEFORE and of AFTER in turn, ROUNDS times:
# BEFORE, AFTER, BEFORE, AFTER, ... so both see the same machine. Each
# suite runs one round per call (its own references, Knot or nginx, are
# measured beside it every time, so ratios compare across calls).
#
#   bench/ab/run.sh BEFORE [AFTER]          # revisions; AFTER defaults to HEAD
#   ROUNDS=3 SUITES="dns proxy five" bench/ab/run.sh 60013d2~1
#
# Root (the suites install their tools and the five-process run uses
# network namespaces). Outputs stay in $OUT (default a new
# /tmp/peerdns-ab.XXXXXX): one file per suite, revision and round; the
# lines with figures are printed at the end, revision by revision.
set -euo pipefail
BEFORE=${1:?usage: bench/ab/run.sh BEFORE [AFTER]}
AFTER=${2:-HEAD}
ROUNDS=${ROUNDS:-3}
SUITES=${SUITES:-dns proxy five}
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(mktemp -d /tmp/peerdns-ab.XXXXXX)}
trees=()
cleanup() {
	for t in "${trees[@]}"; do git worktree remove --force "$t" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT
declare -A tree
for side in before after; do
	rev=$BEFORE
	[ "$side" = after ] && rev=$AFTER
	t="$OUT/tree-$side"
	git worktree add --detach "$t" "$rev" >/dev/null
	trees+=("$t")
	tree[$side]=$t
	echo "$side: $(git -C "$t" rev-parse --short HEAD)"
done
suite() { # name dir → runs one round of the suite in dir
	case $1 in
	dns) (cd "$2" && ROUNDS=1 FORWARD=0 bash bench/dns/compare.sh) ;;
	proxy) (cd "$2" && ROUNDS=1 bash bench/proxy/compare.sh) ;;
	five) (cd "$2" && ROUNDS=1 bash bench/peer/fivenodes.sh) ;;
	*) echo "unknown suite $1" >&2; return 2 ;;
	esac
}
figures() { # suite file → the lines of the file that carry figures
	case $1 in
	dns) sed -n '/medians of/,/^$/p' "$2" ;;
	proxy) grep -E '^\| .* req/s' "$2" || true ;;
	five) grep -E 'fivenodes_linux_test.go|^(ok|FAIL)' "$2" || true ;;
	esac
}
for r in $(seq 1 "$ROUNDS"); do
	for s in $SUITES; do
		for side in before after; do
			f="$OUT/$s-$side-$r.txt"
			echo "round $r: $s, $side" >&2
			suite "$s" "${tree[$side]}" >"$f" 2>&1 || echo "  (exit $?; see $f)" >&2
		done
	done
done
for s in $SUITES; do
	for side in before after; do
		echo "== $s, $side"
		for r in $(seq 1 "$ROUNDS"); do
			echo "-- round $r"
			figures "$s" "$OUT/$s-$side-$r.txt"
		done
	done
done
echo "outputs in $OUT"
