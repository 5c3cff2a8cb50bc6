#!/bin/sh
# Fifty real `peerdns node` processes in network namespaces on one bridge
# (bench/fifty, package doc in main.go): joins by invites, 5 x 20 claims
# resolved alike on all 50, kill -9 and restart of 3, a partition with
# claims and conflicts on both sides, the heal. Then the five mode: five
# processes, ROUNDS bursts of 1,000 claims on one node. Needs root,
# iproute2 and nftables. Bounded: each run stops itself (-timeout) and
# deletes every process and namespace on exit and on Ctrl-C.
#
#   bench/fifty/run.sh            # both
#   MODES=five ROUNDS=5 bench/fifty/run.sh
#   NODES=30 bench/fifty/run.sh   # a smaller fleet
set -eu
cd "$(dirname "$0")/../.."
ROUNDS="${ROUNDS:-3}"
MODES="${MODES:-fleet five}"
NODES="${NODES:-50}"
tmp=$(mktemp -d /tmp/f50-run-XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
go build -o "$tmp/peerdns" ./cmd/peerdns
go build -o "$tmp/fifty" ./bench/fifty
for mode in $MODES; do
	echo "== $mode (load: $(cut -d' ' -f1-3 /proc/loadavg))"
	case $mode in
	fleet) "$tmp/fifty" -bin "$tmp/peerdns" -mode fleet -nodes "$NODES" -timeout 20m ;;
	five) "$tmp/fifty" -bin "$tmp/peerdns" -mode five -rounds "$ROUNDS" -timeout 10m ;;
	*) echo "unknown mode $mode" >&2; exit 2 ;;
	esac
done
