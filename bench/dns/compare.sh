#!/usr/bin/env bash
# compare.sh: peerdns's DNS answer path against Knot, NSD, Unbound and
# dnsmasq, all serving the same 1,000 A records on loopback, each loaded
# with dnsperf in turn. Prints queries/s and latency side by side and
# peerdns's ratio to each.
#
#   bench/dns/compare.sh                      # defaults below
#   DURATION=20 ROUNDS=3 bench/dns/compare.sh
#
# peerdns is measured twice: "peerdns-node" is the real `peerdns node`
# binary, every record added through its admin API (POST
# /api/add-local-dns) as a user would; "peerdns" is bench/dns/serve, the
# node's dns.Server alone with the same names published as local records
# (the harness, to see what the rest of the node costs).
#
# Needs root for apt-get (skipped when every tool is installed). Binds
# only 127.0.0.1 ports BASE_PORT..BASE_PORT+9.
#
# A second table (FORWARD=1, the default) puts peerdns, Unbound and
# dnsmasq as caching forwarders in front of the Knot instance and asks
# them for the same names after one warm-up pass.
set -euo pipefail

NAMES=${NAMES:-1000}
DURATION=${DURATION:-10}          # seconds per dnsperf run
ROUNDS=${ROUNDS:-3}               # runs per server, interleaved; medians reported
DNSPERF_OPTS=${DNSPERF_OPTS:--T 2 -c 4 -q 500}
BASE_PORT=${BASE_PORT:-15301}
FORWARD=${FORWARD:-1}             # also compare caching forwarders (peerdns, Unbound, dnsmasq)
P99_SECONDS=${P99_SECONDS:-3}     # length of the verbose run that gives each server's p99 latency
BASELINE=${BASELINE:-}            # a git revision: also measure bench/dns/serve built from it ("peerdns-base"), same rounds

cd "$(dirname "$0")/../.."
need=()
for t in dnsperf:dnsperf knotd:knot nsd:nsd unbound:unbound dnsmasq:dnsmasq-base; do
  command -v "${t%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${t%%:*}" ] || need+=("${t##*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
export PATH=$PATH:/usr/sbin

W=$(mktemp -d /tmp/peerdns-dnsbench.XXXXXX)
chmod 755 "$W"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT

go build -o "$W/serve" ./bench/dns/serve
go build -o "$W/peerdns" ./cmd/peerdns

# The same data for everyone.
ip() { echo "10.$(( $1 >> 16 & 255 )).$(( $1 >> 8 & 255 )).$(( $1 & 255 ))"; }
{
  echo '$ORIGIN bench.test.'
  echo '$TTL 3600'
  echo '@ IN SOA ns.bench.test. admin.bench.test. 1 3600 600 86400 60'
  echo '@ IN NS ns.bench.test.'
  echo 'ns IN A 127.0.0.1'
  for i in $(seq 0 $((NAMES - 1))); do echo "host$i IN A $(ip "$i")"; done
} > "$W/bench.test.zone"
for i in $(seq 0 $((NAMES - 1))); do echo "host$i.bench.test A"; done > "$W/queries.txt"
for i in $(seq 0 $((NAMES - 1))); do echo "$(ip "$i") host$i.bench.test"; done > "$W/hosts"
chmod 644 "$W/bench.test.zone" "$W/queries.txt" "$W/hosts"

P_KNOT=$BASE_PORT P_NSD=$((BASE_PORT + 1)) P_UNBOUND=$((BASE_PORT + 2)) P_DNSMASQ=$((BASE_PORT + 3)) P_PEERDNS=$((BASE_PORT + 4))
P_NODE=$((BASE_PORT + 8))

mkdir -p "$W/knot"
cat > "$W/knot/knot.conf" <<CONF
server:
    listen: 127.0.0.1@$P_KNOT
    rundir: $W/knot
database:
    storage: $W/knot
zone:
  - domain: bench.test
    file: $W/bench.test.zone
    storage: $W/knot
log:
  - target: stderr
    any: warning
CONF
knotd -c "$W/knot/knot.conf" >"$W/knot.log" 2>&1 & PIDS+=($!)

mkdir -p "$W/nsd"
cat > "$W/nsd/nsd.conf" <<CONF
server:
    ip-address: 127.0.0.1@$P_NSD
    server-count: $(nproc)
    reuseport: yes
    username: ""
    zonesdir: "$W"
    pidfile: "$W/nsd/nsd.pid"
    xfrdfile: "$W/nsd/xfrd.state"
    zonelistfile: "$W/nsd/zone.list"
    logfile: "$W/nsd/nsd.log"
    verbosity: 0
remote-control:
    control-enable: no
zone:
    name: bench.test
    zonefile: bench.test.zone
CONF
nsd -d -c "$W/nsd/nsd.conf" >"$W/nsd.log" 2>&1 & PIDS+=($!)

{
  cat <<CONF
server:
    interface: 127.0.0.1@$P_UNBOUND
    port: $P_UNBOUND
    num-threads: $(nproc)
    so-reuseport: yes
    username: ""
    chroot: ""
    directory: "$W"
    pidfile: "$W/unbound.pid"
    do-daemonize: no
    use-syslog: no
    logfile: ""
    verbosity: 0
    access-control: 127.0.0.0/8 allow
    local-zone: "bench.test." static
CONF
  for i in $(seq 0 $((NAMES - 1))); do echo "    local-data: \"host$i.bench.test. 3600 IN A $(ip "$i")\""; done
  echo "remote-control:"
  echo "    control-enable: no"
} > "$W/unbound.conf"
unbound -d -c "$W/unbound.conf" >"$W/unbound.log" 2>&1 & PIDS+=($!)

dnsmasq -k --conf-file=/dev/null --port="$P_DNSMASQ" --listen-address=127.0.0.1 --bind-interfaces \
  --no-resolv --no-hosts --addn-hosts="$W/hosts" --pid-file= --user=root --local-ttl=3600 \
  >"$W/dnsmasq.log" 2>&1 & PIDS+=($!)

"$W/serve" -addr "127.0.0.1:$P_PEERDNS" -n "$NAMES" >"$W/peerdns.log" 2>&1 & PIDS+=($!)

declare -A PID_OF
i=0
for s in knot nsd unbound dnsmasq peerdns; do PID_OF[$s]=${PIDS[$i]}; i=$((i + 1)); done

# The real node: its own data dir, everything on 127.0.0.1, no public
# upstream, the records loaded through the admin API.
"$W/peerdns" node --data "$W/node" --admin-addr 127.0.0.1:0 --dns-addr "127.0.0.1:$P_NODE" --http-addr 127.0.0.1:0 \
  --https-addr 127.0.0.1:0 --p2p-addr 127.0.0.1:0 --upstream 127.0.0.1:9 >"$W/peerdns-node.log" 2>&1 & PID_OF[peerdns-node]=$!; PIDS+=($!)
for _ in $(seq 1 100); do grep -q '^admin listening on' "$W/peerdns-node.log" && break; sleep 0.1; done
NODE_ADMIN=$(sed -n 's/^admin listening on //p' "$W/peerdns-node.log")
python3 - "$NODE_ADMIN" "$NAMES" <<'PY'
import http.client, json, sys
host, n = sys.argv[1], int(sys.argv[2])
c = http.client.HTTPConnection(host, timeout=30)
for i in range(n):
    ip = "10.%d.%d.%d" % (i >> 16 & 255, i >> 8 & 255, i & 255)
    body = json.dumps({"name": "host%d.bench.test" % i, "type": "A", "ttl": 3600, "data": ip})
    c.request("POST", "/api/add-local-dns", body, {"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    if r.status != 200:
        sys.exit("add-local-dns host%d: %d" % (i, r.status))
PY
echo "peerdns node: $NAMES records added through its admin API" >&2

# The harness as it was at BASELINE, for a before/after in one run.
P_BASE=""
if [ -n "$BASELINE" ]; then
  P_BASE=$((BASE_PORT + 9))
  mkdir -p "$W/base"
  git archive "$BASELINE" | tar -x -C "$W/base"
  (cd "$W/base" && go build -o "$W/serve-base" ./bench/dns/serve)
  "$W/serve-base" -addr "127.0.0.1:$P_BASE" -n "$NAMES" >"$W/peerdns-base.log" 2>&1 & PID_OF[peerdns-base]=$!; PIDS+=($!)
  echo "peerdns-base: bench/dns/serve at $(git rev-parse --short "$BASELINE")" >&2
fi

wait_up() {
  local name=$1 port=$2
  for _ in $(seq 1 100); do
    "$W/serve" -probe "127.0.0.1:$port" 2>/dev/null && return 0
    sleep 0.1
  done
  "$W/serve" -probe "127.0.0.1:$port" && return 0
  echo "$name did not come up on $port:" >&2
  cat "$W/$name.log" >&2
  exit 1
}

# Forwarding scenario: caching forwarders in front of Knot, asked for the
# same names after one warm-up pass (so every answer is a cache hit).
# They start once Knot answers: an early NXDOMAIN would be cached.
if [ "$FORWARD" = 1 ]; then
  wait_up knot "$P_KNOT"
  P_FPEERDNS=$((BASE_PORT + 5)) P_FUNBOUND=$((BASE_PORT + 6)) P_FDNSMASQ=$((BASE_PORT + 7))
  "$W/serve" -addr "127.0.0.1:$P_FPEERDNS" -n 0 -upstream "127.0.0.1:$P_KNOT" >"$W/fwd-peerdns.log" 2>&1 & PID_OF[fwd-peerdns]=$!; PIDS+=($!)
  cat > "$W/unbound-fwd.conf" <<CONF
server:
    interface: 127.0.0.1@$P_FUNBOUND
    port: $P_FUNBOUND
    num-threads: $(nproc)
    so-reuseport: yes
    username: ""
    chroot: ""
    directory: "$W"
    pidfile: "$W/unbound-fwd.pid"
    do-daemonize: no
    use-syslog: no
    logfile: ""
    verbosity: 0
    access-control: 127.0.0.0/8 allow
    do-not-query-localhost: no
    module-config: "iterator"
    domain-insecure: "bench.test."
    # .test is one of Unbound's built-in NXDOMAIN zones (RFC 6761)
    local-zone: "test." nodefault
forward-zone:
    name: "bench.test."
    forward-addr: 127.0.0.1@$P_KNOT
remote-control:
    control-enable: no
CONF
  unbound -d -c "$W/unbound-fwd.conf" >"$W/fwd-unbound.log" 2>&1 & PID_OF[fwd-unbound]=$!; PIDS+=($!)
  dnsmasq -k --conf-file=/dev/null --port="$P_FDNSMASQ" --listen-address=127.0.0.1 --bind-interfaces \
    --no-resolv --no-hosts --server="127.0.0.1#$P_KNOT" --cache-size=10000 --pid-file= --user=root \
    >"$W/fwd-dnsmasq.log" 2>&1 & PID_OF[fwd-dnsmasq]=$!; PIDS+=($!)
fi


# CPU ticks (user+system) of a process and all its descendants (NSD and
# others fork workers).
cpu_ticks() {
  local total=0 p
  for p in $1 $(pgrep -P "$1" 2>/dev/null); do
    if [ "$p" != "$1" ]; then total=$((total + $(cpu_ticks "$p"))); continue; fi
    [ -r "/proc/$p/stat" ] || continue
    total=$((total + $(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$p/stat")))
  done
  echo "$total"
}
HZ=$(getconf CLK_TCK)

# median of the numbers on stdin (one per line; the mean of the middle
# two for an even count)
median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# measure "TITLE" name:port ... : dnsperf against each, ROUNDS rounds with
# the servers interleaved, then a table of each server's medians over the
# rounds (queries/s, average latency, CPU per query, each the median of
# its own column, as the issue measures), the range of its queries/s,
# and the first server's ratio to each. The best round alone would favour
# the server whose figure moves most between rounds (one that gets its
# clients' flows spread evenly by luck).
measure() {
  local title=$1
  shift
  local -A QPS LAT LOST CPU RUNS
  local s name port round before after out done_q cpu qps lat lost
  for s in "$@"; do wait_up "${s%%:*}" "${s##*:}"; done
  local load
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  for round in $(seq 1 "$ROUNDS"); do
    for s in "$@"; do
      name=${s%%:*} port=${s##*:}
      before=$(cpu_ticks "${PID_OF[$name]}")
      # shellcheck disable=SC2086
      out=$(dnsperf -s 127.0.0.1 -p "$port" -d "$W/queries.txt" -l "$DURATION" $DNSPERF_OPTS 2>&1)
      after=$(cpu_ticks "${PID_OF[$name]}")
      done_q=$(awk '/Queries completed/ {print $3}' <<<"$out")
      # server CPU microseconds per answered query
      cpu=$(awk -v t=$((after - before)) -v hz="$HZ" -v q="$done_q" 'BEGIN {printf "%.2f", (q > 0 ? t / hz * 1e6 / q : 0)}')
      qps=$(awk '/Queries per second/ {print $4}' <<<"$out")
      # The queries' average (over TCP dnsperf adds one for connections).
      lat=$(awk '/Average Latency/ {print $4; exit}' <<<"$out")
      lost=$(awk '/Queries lost/ {gsub(/[()%]/, "", $4); print $4}' <<<"$out")
      # Every name queried exists: any other answer than NOERROR means the
      # server measured is not serving them (the figure would be void).
      if ! grep -qE 'Response codes: +NOERROR [0-9]+ \(100\.00%\)$' <<<"$out"; then
        echo "$name: $(grep 'Response codes' <<<"$out" | tr -s ' '): figures void" >&2
        exit 1
      fi
      echo "round $round $name: $qps qps, avg latency ${lat}s, lost ${lost}%, server CPU ${cpu}us/query" >&2
      RUNS[$name]+="$qps $lat $lost $cpu"$'\n'
    done
  done
  local -A RANGE
  for s in "$@"; do
    name=${s%%:*}
    QPS[$name]=$(awk 'NF {print $1}' <<<"${RUNS[$name]}" | median)
    LAT[$name]=$(awk 'NF {print $2}' <<<"${RUNS[$name]}" | median)
    LOST[$name]=$(awk 'NF {print $3}' <<<"${RUNS[$name]}" | median)
    CPU[$name]=$(awk 'NF {print $4}' <<<"${RUNS[$name]}" | median)
    RANGE[$name]=$(awk 'NF {print $1}' <<<"${RUNS[$name]}" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.1fk-%.1fk", lo / 1000, hi / 1000}')
  done
  # p99 latency: a verbose dnsperf run per server with the same options
  # (dnsperf prints no percentiles; -v prints each answer's latency, and
  # printing costs dnsperf some speed, so this run's load is a little
  # lower than the qps runs').
  local -A P99
  for s in "$@"; do
    name=${s%%:*} port=${s##*:}
    # shellcheck disable=SC2086
    P99[$name]=$(dnsperf -s 127.0.0.1 -p "$port" -d "$W/queries.txt" -l "$P99_SECONDS" -v $DNSPERF_OPTS 2>/dev/null |
      awk '/^> / {print $NF}' | sort -g | awk '{a[NR] = $1} END {if (NR) printf "%.3f", a[int(NR * 0.99)] * 1000; else print "-"}')
  done
  local first=${1%%:*}
  echo
  echo "$title: dnsperf $DNSPERF_OPTS -l $DURATION, $NAMES names, medians of $ROUNDS interleaved rounds, $(nproc) CPUs, $(date -u +%FT%TZ)"
  echo "(load average before: $load; other processes share these CPUs, so also see the server CPU per query)"
  printf '%-12s %12s %16s %14s %14s %8s %14s %16s\n' server "queries/s" "range" "avg lat (ms)" "p99 lat (ms)" "lost %" "CPU us/query" "$first/server"
  for s in "$@"; do
    name=${s%%:*}
    printf '%-12s %12.0f %16s %14.3f %14s %8s %14s %16.2f\n' "$name" "${QPS[$name]}" "${RANGE[$name]}" "$(awk -v l="${LAT[$name]}" 'BEGIN {print l * 1000}')" "${P99[$name]}" "${LOST[$name]}" \
      "${CPU[$name]}" "$(awk -v a="${QPS[$first]}" -v b="${QPS[$name]}" 'BEGIN {print a / b}')"
  done
}

measure "authoritative (1,000 names served by each)" \
  "peerdns-node:$P_NODE" "peerdns:$P_PEERDNS" ${P_BASE:+"peerdns-base:$P_BASE"} "knot:$P_KNOT" "nsd:$P_NSD" "unbound:$P_UNBOUND" "dnsmasq:$P_DNSMASQ"

if [ "$FORWARD" = 1 ]; then
  for s in "fwd-peerdns:$P_FPEERDNS" "fwd-unbound:$P_FUNBOUND" "fwd-dnsmasq:$P_FDNSMASQ"; do
    wait_up "${s%%:*}" "${s##*:}"
    # warm the cache: one pass over every name
    dnsperf -s 127.0.0.1 -p "${s##*:}" -d "$W/queries.txt" -n 1 -q 50 >/dev/null 2>&1
  done
  echo
  measure "forwarding with a warm cache (in front of Knot)" \
    "fwd-peerdns:$P_FPEERDNS" "fwd-unbound:$P_FUNBOUND" "fwd-dnsmasq:$P_FDNSMASQ"
fi
