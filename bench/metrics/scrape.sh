#!/usr/bin/env bash
# scrape.sh: what /metrics costs the node. The real `peerdns node`
# binary on loopback serves NAMES local A records (added through its
# admin API) and is loaded with dnsperf for DURATION seconds per run in
# three arms, interleaved within each round (the order rotates):
#
#   none    no scraping
#   1/s     /metrics scraped once a second (Prometheus' usual interval is 15 s)
#   100/s   /metrics scraped a hundred times a second (the bad-input case)
#
# and reports the median queries/s of each arm over ROUNDS rounds. Then
# the cost of one scrape: the node's CPU time (utime+stime from
# /proc/PID/stat) over SCRAPES scrapes spaced 200 ms apart (so no two
# share the node's 100 ms gather cache), minus its idle CPU over the same
# time, divided by SCRAPES; and the bytes of one scrape (gzip as
# Prometheus asks, and plain).
#
#   bench/metrics/scrape.sh
#   DURATION=10 ROUNDS=3 bench/metrics/scrape.sh
#
# Binds only 127.0.0.1; every process it starts stops when it exits.
set -euo pipefail

NAMES=${NAMES:-200}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
SCRAPES=${SCRAPES:-50}
DNSPERF_OPTS=${DNSPERF_OPTS:--T 1 -c 4 -q 200}
DNS_PORT=${DNS_PORT:-15391}

cd "$(dirname "$0")/../.."
command -v dnsperf >/dev/null || { echo "scrape.sh needs dnsperf (apt-get install dnsperf)" >&2; exit 1; }
W=$(mktemp -d /tmp/peerdns-scrapebench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT

go build -o "$W/peerdns" ./cmd/peerdns
go build -o "$W/scraper" ./bench/metrics/scraper

"$W/peerdns" node --data "$W/node" --admin-addr 127.0.0.1:0 --dns-addr "127.0.0.1:$DNS_PORT" --http-addr 127.0.0.1:0 \
  --https-addr 127.0.0.1:0 --p2p-addr 127.0.0.1:0 --upstream 127.0.0.1:9 >"$W/node.log" 2>&1 & NODE=$!; PIDS+=($NODE)
for _ in $(seq 1 100); do grep -q '^admin listening on' "$W/node.log" && break; sleep 0.1; done
ADMIN=$(sed -n 's/^admin listening on //p' "$W/node.log")
[ -n "$ADMIN" ] || { cat "$W/node.log" >&2; exit 1; }
for i in $(seq 0 $((NAMES - 1))); do
  "$W/peerdns" records add "host$i.bench.test" A "10.0.$((i >> 8 & 255)).$((i & 255))" --ttl 3600 --admin-addr "$ADMIN" >/dev/null
done
for i in $(seq 0 $((NAMES - 1))); do echo "host$i.bench.test A"; done > "$W/queries.txt"
echo "node on $ADMIN (pid $NODE), $NAMES records added with \`peerdns records add\`" >&2

run() { # arm → qps
  local arm=$1 sp=""
  case $arm in
    1/s) "$W/scraper" -addr "$ADMIN" -rate 1 -duration "${DURATION}s" >"$W/scraper.out" & sp=$! ;;
    100/s) "$W/scraper" -addr "$ADMIN" -rate 100 -duration "${DURATION}s" >"$W/scraper.out" & sp=$! ;;
  esac
  # shellcheck disable=SC2086
  dnsperf -s 127.0.0.1 -p "$DNS_PORT" -d "$W/queries.txt" -l "$DURATION" $DNSPERF_OPTS 2>/dev/null |
    awk '/Queries per second/ {print $4}'
  if [ -n "$sp" ]; then wait "$sp"; echo "  $arm: $(cat "$W/scraper.out")" >&2; fi
}

# A warm-up run first (discarded): GOMAXPROCS follows demand (package
# procs), so the node's first seconds under load are not its steady state.
echo "warm-up: $(run none) q/s (discarded)" >&2
declare -A QPS
ARMS=(none 1/s 100/s)
for r in $(seq 1 "$ROUNDS"); do
  for k in 0 1 2; do
    arm=${ARMS[$(( (k + r) % 3 ))]}
    q=$(run "$arm")
    QPS[$arm]="${QPS[$arm]:-} $q"
    echo "round $r $arm: $q q/s" >&2
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo
echo "| arm | median q/s | runs |"
echo "|---|---|---|"
for arm in "${ARMS[@]}"; do echo "| $arm | $(echo "${QPS[$arm]}" | median) | ${QPS[$arm]} |"; done

cpu() { awk '{print $14 + $15}' "/proc/$NODE/stat"; }
TCK=$(getconf CLK_TCK)
span=$(awk -v n="$SCRAPES" 'BEGIN {print n * 0.2}')
c0=$(cpu); sleep "$span"; c1=$(cpu)
"$W/scraper" -addr "$ADMIN" -rate 5 -duration "${span}s" >"$W/cost.out"
c2=$(cpu)
"$W/scraper" -addr "$ADMIN" -rate 5 -duration 1s -gzip=false >"$W/plain.out"
n=$(sed -n 's/.*ok=\([0-9]*\).*/\1/p' "$W/cost.out")
awk -v idle=$((c1 - c0)) -v busy=$((c2 - c1)) -v n="$n" -v tck="$TCK" \
  'BEGIN {printf "\none scrape: %.2f ms CPU (%d scrapes: %d ticks busy, %d idle over the same time, %d ticks/s)\n", (busy - idle) * 1000 / tck / n, n, busy, idle, tck}'
echo "bytes: gzip $(sed -n 's/.*wire_bytes=\([0-9]*\).*/\1/p' "$W/cost.out"), plain $(sed -n 's/.*body_bytes=\([0-9]*\).*/\1/p' "$W/plain.out")"
