#!/usr/bin/env bash
# compare.sh: a tunnel through a relay against a direct tunnel, in one
# interleaved run, between real `peerdns node` processes in network
# namespaces on this machine.
#
#   bench/relay/compare.sh
#   ROUNDS=3 DURATION=10 LOAD_SECONDS=60 bench/relay/compare.sh
#
# The lab (documentation addresses only, no route out, deleted on exit):
#
#   R   203.0.113.10 on the public segment (a bridge): the relay node
#   B   192.0.2.2 behind router r1 (203.0.113.11)     random-port
#   C   198.51.100.2 behind router r2 (203.0.113.12)  masquerade both
#
# B and C join R with invites. Behind two "symmetric" NATs they cannot
# reach each other, so their session runs through R (relayed); B reaches
# R directly (QUIC). Tunnel servers on R and on C front an iperf3 server
# and an echo server in their own namespace (127.0.0.1); B runs a tunnel
# client for each, so
#
#   direct    B -> R over QUIC (crossing r1)
#   relayed   B -> R -> C, TLS 1.3 end to end between B and C, through
#             R's copy loop (crossing r1 and r2)
#
# The relay runs with RELAY_MAX_MBPS=0 (the setting: no byte-rate cap; the default is
# 400 Mbit/s) so the figure is the path's, not the cap's.
#
# Figures (median of ROUNDS interleaved rounds, with the range):
#   Gbit/s      iperf3 -J -t DURATION through the tunnel, end.sum_received
#   conns/s     bench/tunnel/connrate conn: CONN_WORKERS workers open a
#               connection through the tunnel, echo 1 byte, close
#   relay CPU   user+system CPU seconds of R's process per GB relayed
#               (during the relayed iperf3 runs)
#   relay RSS   R's resident memory every 5 s during LOAD_SECONDS of
#               relayed iperf3 -P LOAD_STREAMS (flat = no growth)
#
# Needs root (namespaces, nftables), iperf3, jq, curl. Every process the
# script starts is stopped on exit; every load run is bounded in time.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONN_SECONDS=${CONN_SECONDS:-5}
CONN_WORKERS=${CONN_WORKERS:-8}
LOAD_SECONDS=${LOAD_SECONDS:-60}
LOAD_STREAMS=${LOAD_STREAMS:-4}
READY_TIMEOUT=${READY_TIMEOUT:-60}
KEEP=${KEEP:-0}

cd "$(dirname "$0")/../.."
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
[ "$(id -u)" = 0 ] || { echo "compare.sh needs root (network namespaces)" >&2; exit 1; }
for t in ip nft iperf3 jq curl; do
	command -v $t >/dev/null || { echo "compare.sh needs $t (apt-get install iproute2 nftables iperf3 jq curl)" >&2; exit 1; }
done

P=rl-bench-$$
TMP=$(mktemp -d)
PIDS=()
NSS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	# Background jobs started through inns are subshells: what they ran
	# (iperf3, the echo server) is found by namespace instead.
	for n in "${NSS[@]}"; do ip netns pids "$n" 2>/dev/null | xargs -r kill 2>/dev/null || true; done
	for n in "${NSS[@]}"; do ip netns del "$n" 2>/dev/null || true; done
	if [ "$KEEP" = 1 ]; then log "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

log "building peerdns and connrate"
go build -o "$TMP/peerdns" ./cmd/peerdns
go build -o "$TMP/connrate" ./bench/tunnel/connrate

# --- the lab -----------------------------------------------------------------
mkns() { ip netns add "$P-$1"; NSS+=("$P-$1"); ip -n "$P-$1" link set lo up; }
inns() { local n=$1; shift; ip netns exec "$P-$n" "$@"; }
for n in pub r1 r2 b c; do mkns $n; done
ip -n "$P-pub" link add br0 type bridge
ip -n "$P-pub" link set br0 up
ip -n "$P-pub" addr add 203.0.113.10/24 dev br0
i=0
for r in r1 r2; do
	i=$((i + 1))
	ip -n "$P-$r" link add wan type veth peer name p$i netns "$P-pub"
	ip -n "$P-$r" addr add 203.0.113.$((10 + i))/24 dev wan
	ip -n "$P-$r" link set wan up
	ip -n "$P-pub" link set p$i master br0
	ip -n "$P-pub" link set p$i up
	inns $r sysctl -qw net.ipv4.ip_forward=1
	inns $r nft -f - <<EOF
table ip nat {
	chain post { type nat hook postrouting priority 100; oifname "wan" masquerade random; }
}
table ip filter {
	chain forward_lan { type filter hook forward priority 0; policy drop;
		ct state established,related accept
		iifname != "wan" accept
	}
}
EOF
done
ip -n "$P-r1" link add lan type veth peer name v0 netns "$P-b"
ip -n "$P-r1" addr add 192.0.2.1/24 dev lan
ip -n "$P-r1" link set lan up
ip -n "$P-b" addr add 192.0.2.2/24 dev v0
ip -n "$P-b" link set v0 up
ip -n "$P-b" route add default via 192.0.2.1
ip -n "$P-r2" link add lan type veth peer name v0 netns "$P-c"
ip -n "$P-r2" addr add 198.51.100.1/24 dev lan
ip -n "$P-r2" link set lan up
ip -n "$P-c" addr add 198.51.100.2/24 dev v0
ip -n "$P-c" link set v0 up
ip -n "$P-c" route add default via 198.51.100.1

# --- nodes ---------------------------------------------------------------------
start_node() { # ns p2p [env...] -- [flags...]
	local n=$1 p2p=$2
	shift 2
	# ip netns exec and env exec: $! is the node's own pid.
	ip netns exec "$P-$n" env "$@" "$TMP/peerdns" node --data "$TMP/$n" --admin-addr 127.0.0.1:7710 --dns-addr 127.0.0.1:0 \
		--http-addr 127.0.0.1:0 --https-addr 127.0.0.1:0 --upstream 127.0.0.1:9 --p2p-addr "$p2p" \
		${JOIN:+--join "$JOIN"} >"$TMP/$n.out" 2>"$TMP/$n.err" &
	PIDS+=($!)
	NODE_PID=$!
}
api() { # ns method path [json]
	local n=$1 m=$2 p=$3
	if [ $# -ge 4 ]; then
		inns "$n" curl -fsS -X "$m" -H 'Content-Type: application/json' --data "$4" "http://127.0.0.1:7710$p"
	else
		inns "$n" curl -fsS -X "$m" "http://127.0.0.1:7710$p"
	fi
}
wait_for() { # desc cmd...
	local desc=$1 deadline=$((SECONDS + READY_TIMEOUT))
	shift
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || { log "timed out waiting for $desc (logs in $TMP; KEEP=1 keeps them)"; KEEP=1; exit 1; }
		sleep 0.2
	done
}
ready() { api "$1" GET '/api/health?probe=readiness'; }
peer_path() { # ns peer-id: prints transport once connected
	api "$1" GET /api/diagnostics/invites | jq -er --arg id "$2" '.peers[] | select(.id == $id and .state == "connected") | .transport'
}
is_path() { [ "$(peer_path "$1" "$2")" = "$3" ]; }

JOIN= start_node pub 203.0.113.10:7740 RELAY_MAX_MBPS=0
R_PID=$NODE_PID
wait_for "R ready" ready pub
JOIN=$(api pub POST /api/invites | jq -r .invite) start_node b 192.0.2.2:7740
wait_for "B ready" ready b
JOIN=$(api pub POST /api/invites | jq -r .invite) start_node c 198.51.100.2:7740
wait_for "C ready" ready c
ID_R=$(api pub GET /api/diagnostics/invites | jq -r .summary.peerId)
ID_C=$(api c GET /api/diagnostics/invites | jq -r .summary.peerId)
wait_for "B connected to R directly" is_path b "$ID_R" quic
wait_for "B connected to C through R" is_path b "$ID_C" relayed
log "B reaches R over quic and C relayed through R"

# --- servers and tunnels -------------------------------------------------------
for n in pub c; do
	inns $n iperf3 -s -B 127.0.0.1 -p 5201 >"$TMP/iperf-$n.log" 2>&1 &
	PIDS+=($!)
	inns $n "$TMP/connrate" echo -addr 127.0.0.1:7001 >"$TMP/echo-$n.log" 2>&1 &
	PIDS+=($!)
done
server_url() { api "$1" GET /api/tunnel-servers | jq -er --arg id "$2" '.[] | select(.id == $id and .info.state == "running" and (.info.url // "") != "") | .info.url'; }
client_addr() { api b GET /api/tunnel-clients | jq -er --arg id "$1" '.[] | select(.id == $id and .info.state == "running") | .info.address'; }
declare -A ADDR
tunnel() { # server-ns target-port domain local-port key
	local n=$1 port=$2 domain=$3 lport=$4 key=$5 sid url cid
	sid=$(api "$n" POST /api/tunnel-create "{\"name\":\"$domain\",\"port\":$port,\"host\":\"127.0.0.1\"}" | jq -r .id)
	wait_for "tunnel server $domain" server_url "$n" "$sid"
	url=$(server_url "$n" "$sid")
	api b POST /api/add-domain "{\"domain\":\"$domain\",\"hash\":\"$url\"}" >/dev/null
	local deadline=$((SECONDS + READY_TIMEOUT))
	# The client needs B to own the domain: retry until it does.
	until cid=$(api b POST /api/tunnel-client-create "{\"domain\":\"$domain\",\"key\":\"$url\",\"port\":$lport}" 2>/dev/null | jq -er .id); do
		[ $SECONDS -lt $deadline ] || { log "tunnel-client-create $domain kept failing"; exit 1; }
		sleep 0.2
	done
	wait_for "tunnel client $domain running" client_addr "$cid"
	ADDR[$key]=$(client_addr "$cid")
	log "$key: $domain via $(client_addr "$cid")"
}
tunnel pub 5201 direct-iperf.p2p 18001 direct-iperf
tunnel pub 7001 direct-echo.p2p 18002 direct-echo
tunnel c 5201 relayed-iperf.p2p 18003 relayed-iperf
tunnel c 7001 relayed-echo.p2p 18004 relayed-echo
for k in direct-echo relayed-echo; do
	wait_for "echo through $k" inns b "$TMP/connrate" probe -addr "${ADDR[$k]}" -timeout 1s
done

# --- measurements --------------------------------------------------------------
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; } # clock ticks
TCK=$(getconf CLK_TCK)
declare -A GB CONN
RELAY_TICKS=0
RELAY_BYTES=0
for r in $(seq 1 "$ROUNDS"); do
	for p in direct relayed; do
		c0=$(cpu_of "$R_PID")
		j=$(inns b timeout $((DURATION + 30)) iperf3 -J -c "${ADDR[$p-iperf]%:*}" -p "${ADDR[$p-iperf]##*:}" -t "$DURATION" || echo '{}')
		c1=$(cpu_of "$R_PID")
		bytes=$(jq -r '.end.sum_received.bytes // 0' <<<"$j")
		g=$(jq -r '(.end.sum_received.bits_per_second // 0) / 1e9' <<<"$j")
		GB[$p]+="$g "
		if [ $p = relayed ]; then
			RELAY_TICKS=$((RELAY_TICKS + c1 - c0))
			RELAY_BYTES=$((RELAY_BYTES + bytes))
		fi
		log "round $r $p: $(printf %.2f "$g") Gbit/s (R cpu $(((c1 - c0)))/$TCK s)"
		j=$(inns b timeout $((CONN_SECONDS + 30)) "$TMP/connrate" conn -addr "${ADDR[$p-echo]}" -d "${CONN_SECONDS}s" -c "$CONN_WORKERS" || echo '{}')
		cr=$(jq -r '.rate // 0' <<<"$j")
		CONN[$p]+="$cr "
		log "round $r $p: $(printf %.0f "$cr") conns/s (errors $(jq -r '.errors // "?"' <<<"$j"))"
	done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {printf "%.2f (%.2f..%.2f)", a[int((NR+1)/2)], a[1], a[NR]}'; }
med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

log "relayed load for ${LOAD_SECONDS}s (iperf3 -P $LOAD_STREAMS), R's RSS every 5 s"
inns b timeout $((LOAD_SECONDS + 30)) iperf3 -c "${ADDR[relayed-iperf]%:*}" -p "${ADDR[relayed-iperf]##*:}" -t "$LOAD_SECONDS" -P "$LOAD_STREAMS" >"$TMP/load.log" 2>&1 &
LOAD=$!
RSS=()
for s in $(seq 0 5 "$LOAD_SECONDS"); do
	RSS+=("$(awk '/VmRSS/ {print $2}' "/proc/$R_PID/status")")
	[ "$s" -lt "$LOAD_SECONDS" ] && sleep 5
done
wait $LOAD || true
sleep 5
RSS_AFTER=$(awk '/VmRSS/ {print $2}' "/proc/$R_PID/status")
STATS=$(api pub GET /api/diagnostics/invites | jq -c '.summary.paths | {relayServed, relayBytes, relaySlowed, relayRefusedBusy}')

echo
echo "## Relay vs direct tunnel ($(date -u +%F), $(nproc) cores, shared machine; median of $ROUNDS interleaved rounds, range in brackets)"
echo
echo "| path | Gbit/s | conns/s |"
echo "|---|---|---|"
for p in direct relayed; do
	echo "| $p | $(echo "${GB[$p]:-}" | median) | $(echo "${CONN[$p]:-}" | median) |"
done
gd=$(echo "${GB[direct]:-}" | med) gr=$(echo "${GB[relayed]:-}" | med)
cd_=$(echo "${CONN[direct]:-}" | med) cr_=$(echo "${CONN[relayed]:-}" | med)
echo
echo "relayed/direct: $(awk -v a="$gr" -v b="$gd" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')x Gbit/s, $(awk -v a="$cr_" -v b="$cd_" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')x conns/s (goal >= 0.5x)"
echo "relay CPU: $(awk -v t="$RELAY_TICKS" -v h="$TCK" -v b="$RELAY_BYTES" 'BEGIN {printf "%.2f", (b > 0 ? (t / h) / (b / 1e9) : 0)}') s per GB relayed (user+system of R's process during the relayed iperf3 runs)"
echo "relay RSS (KiB) every 5 s under ${LOAD_SECONDS}s of relayed load: ${RSS[*]}; 5 s after: $RSS_AFTER"
echo "relay counters: $STATS"
# UDP drops in each namespace (a full socket receive buffer shows as
# RcvbufErrors): loss the kernel adds under QUIC's congestion control.
for n in pub b c; do
	echo "udp $n: $(inns $n awk '/^Udp:/ {if (h) {print "InDatagrams=" $2, "InErrors=" $4, "RcvbufErrors=" $6, "SndbufErrors=" $7} else h=1}' /proc/net/snmp)"
done
