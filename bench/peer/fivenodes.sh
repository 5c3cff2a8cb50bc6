#!/usr/bin/env bash
# Five real `peerdns node` processes in network namespaces on a bridge (as
# root; on loopback otherwise): 1,000 claims on one node until all five
# agree, a 2|3 partition with conflicting claims healed, and a kill -9
# mid-burst. Prints the figures the test logs. Bounded: the test's own
# deadlines stop it within a few minutes. FIVE_DIAG_STOP=1 ends each round
# after the burst (with PEERDNS_CPUPROFILE=/tmp/p/%p.prof: profiles of the
# burst alone).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-3}
for r in $(seq 1 "$ROUNDS"); do
	echo "== round $r (load: $(cut -d' ' -f1-3 /proc/loadavg))"
	go test -count=1 -v -run 'TestFiveProcesses$' ./cmd/peerdns/ 2>&1 | grep -E 'fivenodes_linux_test.go|^(ok|FAIL|---)'
done
