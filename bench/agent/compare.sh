#!/usr/bin/env bash
# Side-by-side comparison of Netdata and `peerdns agent` on this host:
# CPU% and RSS while collecting, and requests/s + p99 under wrk with a new
# connection per request for /api/v1/data?chart=system.cpu,
# /api/v1/allmetrics?format=prometheus and /api/v1/info.
#
# Usage: bench/agent/compare.sh            (as root: installs netdata and wrk)
# Knobs: SAMPLE=30 (seconds of /proc sampling), DUR=5 (wrk seconds per
#        endpoint and round), ROUNDS=3, THREADS=2, CONNS=16, WARMUP=15,
#        ROUNDS=0 skips the wrk rounds (collection cost only).
# Besides the totals it reports dimensions, CPU per 1,000 dimensions and
# RSS per dimension for both agents, and the latency of a weights query
# (ks2 and volume over every dimension, 1-minute highlight) on both.
# Each round runs every endpoint on Netdata then on peerdns; the table shows
# the median of the rounds (the machine may be shared: medians of
# alternating runs keep one agent from getting all the quiet moments).
# It stops both agents by itself and prints a table with ratios.
set -euo pipefail

SAMPLE=${SAMPLE:-30}
DUR=${DUR:-5}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
CONNS=${CONNS:-16}
WARMUP=${WARMUP:-15}

cd "$(dirname "$0")/../.."
ROOT=$(pwd)

if ! command -v netdata >/dev/null || ! command -v wrk >/dev/null; then
	echo "installing netdata and wrk with apt-get" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq netdata wrk >/dev/null
fi

TMP=$(mktemp -d /tmp/agent-compare.XXXXXX)
ND_PID=""
PD_PID=""
cleanup() {
	for p in $ND_PID $PD_PID; do
		kill "$p" 2>/dev/null || true
	done
	for p in $ND_PID $PD_PID; do
		for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
	done
	# netdata's plugins exit when their parent goes; make sure.
	if [ -n "$ND_PID" ]; then pkill -9 -P "$ND_PID" 2>/dev/null || true; fi
	rm -rf "$TMP"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_http() { # url, seconds
	local deadline=$((SECONDS + $2))
	until curl -fsS -o /dev/null "$1" 2>/dev/null; do
		if [ $SECONDS -ge $deadline ]; then echo "no answer from $1 after $2 s" >&2; exit 1; fi
		sleep 0.2
	done
}

# --- peerdns agent --------------------------------------------------------
echo "building the agent" >&2
if grep -q 'agent.Run' cmd/peerdns/*.go 2>/dev/null && go build -o "$TMP/peerdns" ./cmd/peerdns; then
	PD_CMD=("$TMP/peerdns" agent --data "$TMP/pd")
else
	echo "peerdns agent not available; using bench/agent/agentmain (same agent.Run)" >&2
	go build -o "$TMP/peerdns-agent" ./bench/agent/agentmain
	PD_CMD=("$TMP/peerdns-agent" --data "$TMP/pd")
fi
echo "agent command: ${PD_CMD[*]}" >&2
PD_PORT=$(free_port)
AGENT_PEER_ADDR=127.0.0.1:0 AGENT_REST_HOST=127.0.0.1 AGENT_REST_PORT=$PD_PORT "${PD_CMD[@]}" >"$TMP/pd.log" 2>&1 &
PD_PID=$!

# --- netdata ---------------------------------------------------------------
ND_PORT=$(free_port)
SD_PORT=$(free_port)
mkdir -p "$TMP/nd/cache" "$TMP/nd/lib" "$TMP/nd/log"
chown -R netdata:netdata "$TMP/nd" 2>/dev/null || true
chmod 755 "$TMP"
cat >"$TMP/netdata.conf" <<CONF
[global]
	run as user = netdata
	web files owner = root
	web files group = root
[directories]
	cache = $TMP/nd/cache
	lib = $TMP/nd/lib
	log = $TMP/nd/log
[web]
	bind to = 127.0.0.1
	default port = $ND_PORT
[statsd]
	bind to = udp:127.0.0.1:$SD_PORT tcp:127.0.0.1:$SD_PORT
[registry]
	enabled = no
CONF
netdata -D -c "$TMP/netdata.conf" -P "$TMP/nd/netdata.pid" >"$TMP/nd.log" 2>&1 &
ND_PID=$!

ND=http://127.0.0.1:$ND_PORT
PD=http://127.0.0.1:$PD_PORT
wait_http "$PD/api/v1/info" 30
wait_http "$ND/api/v1/info" 60
echo "both up (netdata :$ND_PORT pid $ND_PID, peerdns :$PD_PORT pid $PD_PID); warming up ${WARMUP}s" >&2
sleep "$WARMUP"

# --- CPU and RSS while collecting -----------------------------------------
tree() { # pid and all descendants
	local p=$1
	echo "$p"
	for c in $(pgrep -P "$p" 2>/dev/null); do tree "$c"; done
}
ticks() { # sum of utime+stime+cutime+cstime over a process tree
	# cutime/cstime carry the children a process reaped: a Netdata plugin
	# that exits during the sample moves its time there instead of
	# dropping out of the sum (which once made Netdata's CPU negative).
	local sum=0
	for p in $(tree "$1"); do
		if [ -r "/proc/$p/stat" ]; then
			# fields 14-17 after the ")" of comm
			set -- $(sed 's/^.*) //' "/proc/$p/stat")
			sum=$((sum + ${12} + ${13} + ${14} + ${15}))
		fi
	done
	echo $sum
}
rss_kib() { # sum of VmRSS over a process tree
	local sum=0 v
	for p in $(tree "$1"); do
		v=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
		sum=$((sum + ${v:-0}))
	done
	echo $sum
}
main_rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

HZ=$(getconf CLK_TCK)
echo "sampling CPU and RSS for ${SAMPLE}s" >&2
nd0=$(ticks $ND_PID); pd0=$(ticks $PD_PID); t0=$(date +%s.%N)
nd_rss_max=0; pd_rss_max=0; nd_main_max=0
for _ in $(seq 1 "$SAMPLE"); do
	sleep 1
	r=$(rss_kib $ND_PID); [ "$r" -gt "$nd_rss_max" ] && nd_rss_max=$r
	r=$(main_rss_kib $ND_PID); [ "$r" -gt "$nd_main_max" ] && nd_main_max=$r
	r=$(rss_kib $PD_PID); [ "$r" -gt "$pd_rss_max" ] && pd_rss_max=$r
done
nd1=$(ticks $ND_PID); pd1=$(ticks $PD_PID); t1=$(date +%s.%N)
elapsed=$(echo "$t1 - $t0" | bc -l)
nd_cpu=$(echo "($nd1 - $nd0) * 100 / $HZ / $elapsed" | bc -l)
pd_cpu=$(echo "($pd1 - $pd0) * 100 / $HZ / $elapsed" | bc -l)
nd_procs=$(tree $ND_PID | wc -l)

# Charts and dimensions, all of them and without the agents' monitoring of
# themselves (Netdata's netdata.* charts: its web server, database,
# plugins' own cost...), which are not host metrics.
dims() { curl -fsS "$1/api/v1/charts" | python3 -c 'import json,sys
d=json.load(sys.stdin); c=d["charts"]
host=[v for k,v in c.items() if not k.startswith("netdata.")]
print(d["charts_count"], d["dimensions_count"], len(host), sum(len(v["dimensions"]) for v in host))'; }
read -r nd_charts nd_dims nd_hcharts nd_hdims < <(dims "$ND")
read -r pd_charts pd_dims pd_hcharts pd_hdims < <(dims "$PD")

# --- wrk ------------------------------------------------------------------
declare -A RPS P99 SIZE CPUREQ
run_wrk() { # name base path server-pid
	local out rps p99 errs c0 c1 n
	c0=$(ticks "$4")
	out=$(wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" --latency -H 'Connection: close' "$2$3" 2>&1)
	c1=$(ticks "$4")
	n=$(awk '/requests in/ {print $1}' <<<"$out")
	# Server CPU time per request: unlike req/s it hardly depends on what
	# else the (shared) machine is doing.
	CPUREQ[$1]="${CPUREQ[$1]:-} $(echo "($c1 - $c0) * 1000000 / $HZ / ${n:-1}" | bc -l | xargs printf %.1f)"
	rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
	p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v=v*1000}; printf "%.2f", v}' <<<"$out")
	RPS[$1]="${RPS[$1]:-} $rps"
	P99[$1]="${P99[$1]:-} $p99"
	SIZE[$1]=$(curl -fsS "$2$3" | wc -c)
	errs=$(awk '/Non-2xx|Socket errors/' <<<"$out")
	if [ -n "$errs" ]; then echo "  $1: $errs" >&2; fi
	return 0
}
median() { tr ' ' '\n' <<<"$1" | awk 'NF' | sort -g | awk '{a[NR]=$1} END {if (NR == 0) print 0; else if (NR % 2) print a[(NR+1)/2]; else printf "%.2f\n", (a[NR/2]+a[NR/2+1])/2}'; }
# "data" uses each agent's defaults (Netdata: the last 600 s, every point;
# peerdns: the spec's -60 s in 60 points); "data60" asks both for the same
# 60 points, so the bodies have the same shape.
PATHS=("data:/api/v1/data?chart=system.cpu" "data60:/api/v1/data?chart=system.cpu&after=-60&points=60"
	"prometheus:/api/v1/allmetrics?format=prometheus" "info:/api/v1/info")
# PATHS_SPEC="name:path name:path ..." replaces the list; a name starting
# with "v2" is run on peerdns only (Netdata 1.37 has no /api/v2 or v3).
if [ -n "${PATHS_SPEC:-}" ]; then read -ra PATHS <<<"$PATHS_SPEC"; fi
for round in $(seq 1 "$ROUNDS"); do
	for e in "${PATHS[@]}"; do
		name=${e%%:*}; path=${e#*:}
		echo "round $round: wrk ${DUR}s $path (netdata, then peerdns)" >&2
		case $name in v2*) RPS[nd_$name]=0; P99[nd_$name]=0; CPUREQ[nd_$name]=0; SIZE[nd_$name]=0 ;; *) run_wrk "nd_$name" "$ND" "$path" "$ND_PID" ;; esac
		run_wrk "pd_$name" "$PD" "$path" "$PD_PID"
	done
done
for k in "${!RPS[@]}"; do
	echo "  $k req/s:${RPS[$k]}  p99 ms:${P99[$k]}  server CPU us/req:${CPUREQ[$k]}" >&2
	RPS[$k]=$(median "${RPS[$k]}")
	P99[$k]=$(median "${P99[$k]}")
	CPUREQ[$k]=$(median "${CPUREQ[$k]}")
done

# --- report ---------------------------------------------------------------
ratio() { echo "$1 $2" | awk '{ if ($1 > 0) printf "%.2fx", $2 / $1; else print "-" }'; }
printf '\nNetdata %s vs peerdns agent, %s, %s cores, load %s, wrk -t%s -c%s -d%ss x %s rounds (median), Connection: close\n\n' \
	"$(netdata -V 2>&1 | awk '{print $2}')" "$(uname -r)" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$THREADS" "$CONNS" "$DUR" "$ROUNDS"
printf '| %-44s | %14s | %14s | %10s |\n' "metric" "netdata" "peerdns" "peerdns/netdata"
printf '|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "$(printf -- '-%.0s' {1..16})" "$(printf -- '-%.0s' {1..16})" "$(printf -- '-%.0s' {1..17})"
row() { printf '| %-44s | %14s | %14s | %15s |\n' "$1" "$2" "$3" "$4"; }
row "charts / dimensions collected" "$nd_charts / $nd_dims" "$pd_charts / $pd_dims" "$(ratio "$nd_dims" "$pd_dims")"
row "host charts / dimensions (without netdata.*)" "$nd_hcharts / $nd_hdims" "$pd_hcharts / $pd_hdims" "$(ratio "$nd_hdims" "$pd_hdims")"
row "CPU % of one core while collecting (${SAMPLE}s)" "$(printf %.2f "$nd_cpu")" "$(printf %.2f "$pd_cpu")" "$(ratio "$nd_cpu" "$pd_cpu")"
row "RSS MiB, all processes (max)" "$(echo "$nd_rss_max/1024" | bc -l | xargs printf %.1f) ($nd_procs procs)" "$(echo "$pd_rss_max/1024" | bc -l | xargs printf %.1f)" "$(ratio "$nd_rss_max" "$pd_rss_max")"
row "RSS MiB, main process only (max)" "$(echo "$nd_main_max/1024" | bc -l | xargs printf %.1f)" "$(echo "$pd_rss_max/1024" | bc -l | xargs printf %.1f)" "$(ratio "$nd_main_max" "$pd_rss_max")"
# Per dimension: what one collected dimension costs each agent (all of
# Netdata's processes, since its plugins collect most of its dimensions).
per() { echo "$1 $2 $3" | awk '{ if ($2 > 0) printf "%.*f", $3, $1 / $2; else print "-" }'; }
nd_cpu_dim=$(per "$(echo "$nd_cpu * 1000" | bc -l)" "$nd_dims" 4); pd_cpu_dim=$(per "$(echo "$pd_cpu * 1000" | bc -l)" "$pd_dims" 4)
nd_rss_dim=$(per "$nd_rss_max" "$nd_dims" 1); pd_rss_dim=$(per "$pd_rss_max" "$pd_dims" 1)
row "CPU % of one core per 1,000 dimensions" "$nd_cpu_dim" "$pd_cpu_dim" "$(ratio "$nd_cpu_dim" "$pd_cpu_dim")"
row "RSS KiB per dimension (all processes)" "$nd_rss_dim" "$pd_rss_dim" "$(ratio "$nd_rss_dim" "$pd_rss_dim")"
if [ "$ROUNDS" -gt 0 ]; then
for e in "${PATHS[@]}"; do
	name=${e%%:*}
	row "$name req/s" "${RPS[nd_$name]}" "${RPS[pd_$name]}" "$(ratio "${RPS[nd_$name]}" "${RPS[pd_$name]}")"
	row "$name p99 ms" "${P99[nd_$name]}" "${P99[pd_$name]}" "$(ratio "${P99[nd_$name]}" "${P99[pd_$name]}")"
	row "$name server CPU us per request" "${CPUREQ[nd_$name]}" "${CPUREQ[pd_$name]}" "$(ratio "${CPUREQ[nd_$name]}" "${CPUREQ[pd_$name]}")"
	row "$name body bytes" "${SIZE[nd_$name]}" "${SIZE[pd_$name]}" ""
done
if [ -n "${RPS[nd_prometheus]:-}" ]; then
series() { curl -fsS "$1/api/v1/allmetrics?format=prometheus" | grep -vc '^#'; }
nd_series=$(series "$ND"); pd_series=$(series "$PD")
row "prometheus series per scrape" "$nd_series" "$pd_series" ""
nd_sps=$(echo "${RPS[nd_prometheus]} * $nd_series" | bc -l | xargs printf %.0f)
pd_sps=$(echo "${RPS[pd_prometheus]} * $pd_series" | bc -l | xargs printf %.0f)
row "prometheus series/s (req/s x series)" "$nd_sps" "$pd_sps" "$(ratio "$nd_sps" "$pd_sps")"
fi
fi
# Weights over every dimension for the last minute against the four before
# it (both agents' defaults), WEIGHTS_N queries each, median wall time seen
# by curl, Netdata's own statistics.query_time_ms, and how many dimensions
# each ranked. Both agents have been up WARMUP+SAMPLE(+wrk) seconds: with
# less than 5 minutes the baseline is what they have.
WEIGHTS_N=${WEIGHTS_N:-5}
wlat() { # base method
	for _ in $(seq 1 "$WEIGHTS_N"); do
		curl -fsS -o /dev/null -w '%{time_total}\n' "$1/api/v1/weights?method=$2&after=-60&before=0"
	done | sort -g | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]*1000}'
}
winfo() { # base method -> "dimensions query_time_ms"
	curl -fsS "$1/api/v1/weights?method=$2&after=-60&before=0" | python3 -c 'import json,sys
d=json.load(sys.stdin)
n=sum(len(ch.get("dimensions",{})) for c in d.get("contexts",{}).values() for ch in c.get("charts",{}).values())
print(n, d.get("statistics",{}).get("query_time_ms","-"))'
}
for m in $( [ "$WEIGHTS_N" -gt 0 ] && echo ks2 volume ); do
	read -r nd_wd nd_wq < <(winfo "$ND" "$m")
	read -r pd_wd pd_wq < <(winfo "$PD" "$m")
	nd_wl=$(wlat "$ND" "$m"); pd_wl=$(wlat "$PD" "$m")
	row "weights $m, 1-min highlight: wall ms (median)" "$nd_wl" "$pd_wl" "$(ratio "$nd_wl" "$pd_wl")"
	row "weights $m: query_time_ms / dimensions ranked" "$nd_wq / $nd_wd" "$pd_wq / $pd_wd" ""
done
echo
