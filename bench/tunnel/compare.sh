#!/usr/bin/env bash
# compare.sh: bulk throughput, connections per second and small-request
# latency through a peerdns tunnel between two real `peerdns node`
# processes, side by side in one run with: direct, `ssh -L`, socat and
# Holesail (when it installs from npm). Also the RSS of both nodes before,
# during and after LOAD_SECONDS of unpaced load.
#
#   bench/tunnel/compare.sh                       # defaults below
#   ROUNDS=3 DURATION=10 LOAD_SECONDS=60 bench/tunnel/compare.sh
#   ONLY="direct socat" bench/tunnel/compare.sh   # a subset
#
# Every path ends at the same two servers on 127.0.0.1: an iperf3 server
# (throughput) and an echo server (bench/tunnel/connrate echo). Each round
# runs every path in turn (interleaved, so a busy moment of the shared
# machine does not land on one path only); the table shows the median and
# the range of the rounds.
#
#   direct    iperf3 / connrate straight to the servers
#   ssh       a throwaway sshd on 127.0.0.1 (own host key and
#             authorized_keys in the temp dir) and `ssh -N -L`
#   socat     `socat TCP-LISTEN:p,fork,reuseaddr,backlog=1024 TCP:127.0.0.1:server`
#             (socat's default backlog of 5 drops SYNs under the
#             connection test, adding 1 s retransmits)
#   peerdns   node A (creates the network) and node B (joins with an
#             invite from A), separate --data, every listener on
#             127.0.0.1 port 0; tunnel servers on A for both servers,
#             B claims bench.p2p / bench-echo.p2p with their keys and runs
#             the tunnel clients; traffic enters at B's client address
#   holesail  Holesail's own server and client classes (what its CLI runs)
#             in two node processes on a private HyperDHT testnet bound to
#             127.0.0.1 (the CLI has no bootstrap option and would use the
#             public DHT): bench/tunnel/holesail.cjs
#
# Figures per path:
#   Gbit/s     iperf3 -J -t DURATION, end.sum_received (what reached the
#              server; Holesail buffers unpaced input in memory, so its
#              sender-side rate means little). For Holesail also a paced
#              run at HOLESAIL_PACE; "vs Holesail" divides by Holesail's
#              better figure of the two.
#   CPU s/GB   user+system CPU of the tunnel's own processes (both nodes,
#              ssh+sshd, socat, both Holesail processes; children
#              included) per GB received: steadier than Gbit/s on a
#              shared machine.
#   conns/s    connrate conn: CONN_WORKERS workers open a connection,
#              echo 1 byte, close, for CONN_SECONDS; with its p99.
#   req p50/p99  connrate rr: one connection, RR_SIZE-byte request and
#              echo, one at a time, for RR_SECONDS.
#
# Needs root (apt-get, sshd's /run/sshd). Installs iperf3, socat, jq,
# openssh-server/-client when missing, and Holesail with npm into
# HOLESAIL_DIR (kept between runs); under Node, Holesail 2.x's bare-dgram
# (a Bare-runtime addon) is replaced by Node's dgram in that private copy.
# Only loopback addresses are used; every load run is bounded in time;
# every process the script starts is stopped on exit.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}            # seconds per iperf3 run
LOAD_SECONDS=${LOAD_SECONDS:-60}    # the peerdns memory run (unpaced)
LOAD_STREAMS=${LOAD_STREAMS:-4}     # iperf3 -P for that run
CONN_SECONDS=${CONN_SECONDS:-5}
CONN_WORKERS=${CONN_WORKERS:-8}
RR_SECONDS=${RR_SECONDS:-5}
RR_SIZE=${RR_SIZE:-64}
READY_TIMEOUT=${READY_TIMEOUT:-60}  # seconds to wait for any one thing to come up
SETTLE_TIMEOUT=${SETTLE_TIMEOUT:-60} # seconds to wait for the tunnels to go idle before a run
ONLY=${ONLY:-direct ssh socat peerdns holesail}
HOLESAIL_DIR=${HOLESAIL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/peerdns-bench/holesail}
HOLESAIL_PACE=${HOLESAIL_PACE-1G}   # iperf3 -b for Holesail's paced run; empty to skip
KEEP=${KEEP:-0}                     # 1: keep the temp dir (logs) after the run
# IPERF_ARGS: extra iperf3 client arguments for every throughput run, e.g.
# "-R" for the other direction (the server behind node A sends to the
# client at node B, as a download through the edge goes)
# PEERDNS_BIN: a prebuilt peerdns binary to use instead of building ./cmd/peerdns
# (PEERDNS_REV: what to call it in the output, e.g. the commit it was built from)

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
want() { [[ " $ONLY " == *" $1 "* ]]; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# --- tools -----------------------------------------------------------------
need=()
command -v iperf3 >/dev/null 2>&1 || need+=(iperf3)
command -v jq >/dev/null 2>&1 || need+=(jq)
command -v curl >/dev/null 2>&1 || need+=(curl)
if want socat; then command -v socat >/dev/null 2>&1 || need+=(socat); fi
if want ssh; then
	[ -x /usr/sbin/sshd ] || need+=(openssh-server)
	command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
fi
if want holesail && ! command -v npm >/dev/null 2>&1; then need+=(nodejs npm); fi
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

TMP=$(mktemp -d /tmp/peerdns-tunnelbench.XXXXXX)
chmod 755 "$TMP"
mkdir -p "$TMP/res"
PIDS=()
declare -A SKIP=()

tree_of() { # pid and all its descendants, children first
	local p=$1 c
	for c in $(pgrep -P "$p" 2>/dev/null); do tree_of "$c"; done
	echo "$p"
}
cleanup() {
	local rc=$? p all=()
	for p in "${PIDS[@]}"; do all+=($(tree_of "$p")); done
	for p in "${all[@]}"; do kill "$p" 2>/dev/null || true; done
	local deadline=$((SECONDS + 5))
	for p in "${all[@]}"; do
		while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
	done
	if [ "$KEEP" = 1 ] || [ $rc -ne 0 ]; then
		echo "logs kept in $TMP" >&2
	else
		rm -rf "$TMP"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for DESC SECONDS COMMAND...: polls COMMAND until it succeeds or the
# deadline passes (returns 1 then, after saying what it waited for).
wait_for() {
	local desc=$1 secs=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if [ $SECONDS -ge $deadline ]; then
			log "timed out after ${secs}s waiting for $desc"
			return 1
		fi
		sleep 0.1
	done
}
listening() { ss -Hltn "( sport = :$1 )" | grep -q .; } # a TCP listener on port $1
grep_file() { grep -q "$1" "$2" 2>/dev/null; }

# --- build -----------------------------------------------------------------
log "building bench/tunnel/connrate"
go build -o "$TMP/connrate" ./bench/tunnel/connrate
CR=$TMP/connrate
# What was measured, taken now (HEAD may move during a long run).
REV_LINE="$(git log -1 --format='%h %s' 2>/dev/null | cut -c1-72)"
if [ -n "$(git status --porcelain -- . ':!bench/tunnel' 2>/dev/null)" ]; then REV_LINE+=" + uncommitted changes in the work tree"; fi
if want peerdns && [ -n "${PEERDNS_BIN:-}" ]; then
	log "using PEERDNS_BIN=$PEERDNS_BIN"
	cp "$PEERDNS_BIN" "$TMP/peerdns"
	REV_LINE="${PEERDNS_REV:-prebuilt $PEERDNS_BIN}"
elif want peerdns; then
	log "building cmd/peerdns"
	if ! go build -o "$TMP/peerdns" ./cmd/peerdns 2>"$TMP/build.log"; then
		cat "$TMP/build.log" >&2
		SKIP[peerdns]="cmd/peerdns does not build"
	fi
fi

# --- Holesail --------------------------------------------------------------
HS=$ROOT/bench/tunnel/holesail.cjs
if want holesail; then
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		SKIP[holesail]="node/npm not available"
	elif [ ! -f "$HOLESAIL_DIR/node_modules/holesail/package.json" ]; then
		log "installing holesail with npm into $HOLESAIL_DIR"
		mkdir -p "$HOLESAIL_DIR"
		if ! timeout 300 npm i --prefix "$HOLESAIL_DIR" --no-audit --no-fund holesail >"$TMP/npm.log" 2>&1; then
			tail -5 "$TMP/npm.log" >&2
			SKIP[holesail]="npm i holesail failed (see above)"
		fi
	fi
	if [ -z "${SKIP[holesail]:-}" ]; then
		bd=$HOLESAIL_DIR/node_modules/bare-dgram
		if [ -f "$bd/index.js" ] && ! node -e 'require(process.argv[1])' "$bd" >/dev/null 2>&1; then
			[ -f "$bd/index.js.bare" ] || cp "$bd/index.js" "$bd/index.js.bare"
			echo "module.exports = require('node:dgram') // peerdns bench: Node instead of the Bare addon" >"$bd/index.js"
		fi
		if ! HOLESAIL_DIR=$HOLESAIL_DIR node "$HS" check >"$TMP/hscheck.log" 2>&1; then
			tail -5 "$TMP/hscheck.log" >&2
			SKIP[holesail]="holesail does not load under $(node --version) (see above)"
		fi
	fi
	if [ -n "${SKIP[holesail]:-}" ]; then log "Holesail skipped: ${SKIP[holesail]}"; fi
	HS_VERSION=$(jq -r .version "$HOLESAIL_DIR/node_modules/holesail/package.json" 2>/dev/null || echo "?")
fi

# --- the servers every path ends at ----------------------------------------
mapfile -t PORTS < <("$CR" ports -n 12)
P_IPERF=${PORTS[0]} P_ECHO=${PORTS[1]} P_SSH=${PORTS[2]}
L_SSH_I=${PORTS[3]} L_SSH_E=${PORTS[4]} L_SOCAT_I=${PORTS[5]} L_SOCAT_E=${PORTS[6]}
L_PD_I=${PORTS[7]} L_PD_E=${PORTS[8]} L_HS_I=${PORTS[9]} L_HS_E=${PORTS[10]}

iperf3 -s -B 127.0.0.1 -p "$P_IPERF" >"$TMP/iperf3-server.log" 2>&1 &
PIDS+=($!)
"$CR" echo -addr "127.0.0.1:$P_ECHO" >"$TMP/echo.log" 2>&1 &
PIDS+=($!)
wait_for "iperf3 server on :$P_IPERF" "$READY_TIMEOUT" listening "$P_IPERF"
wait_for "echo server on :$P_ECHO" "$READY_TIMEOUT" "$CR" probe -addr "127.0.0.1:$P_ECHO" -timeout 1s

# Per path: the iperf3 and echo addresses traffic enters at, and the pids
# whose CPU and memory are the tunnel's.
declare -A ADDR_I ADDR_E TPIDS
ADDR_I[direct]=127.0.0.1:$P_IPERF
ADDR_E[direct]=127.0.0.1:$P_ECHO
TPIDS[direct]=""

# --- ssh -L ----------------------------------------------------------------
setup_ssh() {
	local d=$TMP/ssh user
	user=$(id -un)
	mkdir -p "$d" /run/sshd
	chmod 700 "$d"
	ssh-keygen -q -t ed25519 -N '' -f "$d/host_key" || return 1
	ssh-keygen -q -t ed25519 -N '' -f "$d/client_key" || return 1
	cp "$d/client_key.pub" "$d/authorized_keys"
	cat >"$d/sshd_config" <<CONF
Port $P_SSH
ListenAddress 127.0.0.1
HostKey $d/host_key
PidFile $d/sshd.pid
AuthorizedKeysFile $d/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
AllowTcpForwarding yes
LogLevel ERROR
CONF
	/usr/sbin/sshd -D -e -f "$d/sshd_config" >"$TMP/sshd.log" 2>&1 &
	PIDS+=($!)
	local sshd_pid=$!
	wait_for "sshd on :$P_SSH" "$READY_TIMEOUT" listening "$P_SSH" || return 1
	ssh -N -i "$d/client_key" -p "$P_SSH" \
		-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes \
		-o ExitOnForwardFailure=yes -o LogLevel=ERROR \
		-L "127.0.0.1:$L_SSH_I:127.0.0.1:$P_IPERF" -L "127.0.0.1:$L_SSH_E:127.0.0.1:$P_ECHO" \
		"$user@127.0.0.1" >"$TMP/ssh.log" 2>&1 &
	PIDS+=($!)
	local ssh_pid=$!
	wait_for "ssh -L on :$L_SSH_E" "$READY_TIMEOUT" "$CR" probe -addr "127.0.0.1:$L_SSH_E" -timeout 1s || return 1
	ADDR_I[ssh]=127.0.0.1:$L_SSH_I
	ADDR_E[ssh]=127.0.0.1:$L_SSH_E
	TPIDS[ssh]="$sshd_pid $ssh_pid"
	SSH_CIPHER=$(ssh -G -p "$P_SSH" 127.0.0.1 2>/dev/null | awk '$1=="ciphers"{split($2,c,","); print c[1]}')
}

# --- socat -----------------------------------------------------------------
setup_socat() {
	socat "TCP-LISTEN:$L_SOCAT_I,bind=127.0.0.1,fork,reuseaddr,backlog=1024" "TCP:127.0.0.1:$P_IPERF" >"$TMP/socat-i.log" 2>&1 &
	PIDS+=($!)
	local a=$!
	socat "TCP-LISTEN:$L_SOCAT_E,bind=127.0.0.1,fork,reuseaddr,backlog=1024" "TCP:127.0.0.1:$P_ECHO" >"$TMP/socat-e.log" 2>&1 &
	PIDS+=($!)
	local b=$!
	wait_for "socat on :$L_SOCAT_E" "$READY_TIMEOUT" "$CR" probe -addr "127.0.0.1:$L_SOCAT_E" -timeout 1s || return 1
	wait_for "socat on :$L_SOCAT_I" "$READY_TIMEOUT" listening "$L_SOCAT_I" || return 1
	ADDR_I[socat]=127.0.0.1:$L_SOCAT_I
	ADDR_E[socat]=127.0.0.1:$L_SOCAT_E
	TPIDS[socat]="$a $b"
}

# --- peerdns: two real nodes -------------------------------------------------
admin_of() { sed -n 's/^admin listening on //p' "$1" | head -1; }
http_code() { curl -s -o "$TMP/body" -w '%{http_code}' "$@" || echo 000; }
ready() { [ "$(http_code "http://$1/api/health?probe=readiness")" = 200 ]; }
has_peer() { [ "$(curl -fsS "http://$1/api/peers" | jq 'length')" -ge 1 ]; }
server_url() { # admin id: prints the url once the server is running
	curl -fsS "http://$1/api/tunnel-servers" |
		jq -er --arg id "$2" '.[] | select(.id == $id and .info.state == "running" and (.info.url // "") != "") | .info.url'
}
client_addr() { # admin id: prints the address once the client is running; fails on error
	local j
	j=$(curl -fsS "http://$1/api/tunnel-clients" | jq -c --arg id "$2" '.[] | select(.id == $id) | .info')
	if [ "$(jq -r '.state' <<<"$j")" = error ]; then
		log "tunnel client $2: state error: $(jq -r '.error // ""' <<<"$j")"
		return 2
	fi
	jq -er 'select(.state == "running" and (.address // "") != "") | .address' <<<"$j"
}
wait_value() { # desc secs cmd...: polls cmd until it prints a value, echoes it
	local desc=$1 secs=$2 out rc
	shift 2
	local deadline=$((SECONDS + secs))
	while :; do
		rc=0
		out=$("$@" 2>/dev/null) || rc=$?
		if [ $rc -eq 0 ] && [ -n "$out" ]; then echo "$out"; return 0; fi
		if [ $rc -eq 2 ]; then return 1; fi
		if [ $SECONDS -ge $deadline ]; then log "timed out after ${secs}s waiting for $desc"; return 1; fi
		sleep 0.2
	done
}
start_node() { # name [extra flags]: starts a node, sets NODE_PID
	local n=$1
	shift
	SUBNET_BASE=${SUBNET_BASE:-127.77.0.0/16} "$TMP/peerdns" node --data "$TMP/$n" \
		--admin-addr 127.0.0.1:0 --dns-addr 127.0.0.1:0 --p2p-addr 127.0.0.1:0 \
		--http-addr 127.0.0.1:0 --https-addr 127.0.0.1:0 --upstream 127.0.0.1:9 "$@" \
		>"$TMP/$n.out" 2>"$TMP/$n.err" &
	NODE_PID=$!
	PIDS+=($NODE_PID)
}
# create_tunnel name target_port domain lport: server on A, claim and
# client on B; sets TUN_ADDR to the client's address (PD_WHY on failure).
create_tunnel() {
	local name=$1 port=$2 domain=$3 lport=$4 code sid url cid
	code=$(http_code --json "{\"name\":\"$name\",\"port\":$port,\"host\":\"127.0.0.1\"}" "http://$PD_A/api/tunnel-create")
	if [ "$code" = 404 ]; then PD_WHY="tunnels not built (POST /api/tunnel-create is 404)"; return 1; fi
	if [ "$code" != 200 ]; then PD_WHY="tunnel-create on A: $code $(cat "$TMP/body")"; return 1; fi
	sid=$(jq -r .id "$TMP/body")
	url=$(wait_value "tunnel server $sid running on A" "$READY_TIMEOUT" server_url "$PD_A" "$sid") ||
		{ PD_WHY="tunnel server $sid never reported running with a url"; return 1; }
	code=$(http_code --json "{\"domain\":\"$domain\",\"hash\":\"$url\"}" "http://$PD_B/api/add-domain")
	if [ "$code" != 200 ]; then PD_WHY="add-domain $domain on B: $code $(cat "$TMP/body")"; return 1; fi
	# The client needs B to own the domain; retry a 400 until it does.
	local deadline=$((SECONDS + READY_TIMEOUT))
	while :; do
		code=$(http_code --json "{\"domain\":\"$domain\",\"key\":\"$url\",\"port\":$lport}" "http://$PD_B/api/tunnel-client-create")
		[ "$code" = 200 ] && break
		if [ "$code" = 404 ]; then PD_WHY="tunnels not built (POST /api/tunnel-client-create is 404)"; return 1; fi
		if [ "$code" != 400 ] || [ $SECONDS -ge $deadline ]; then
			PD_WHY="tunnel-client-create $domain on B: $code $(cat "$TMP/body")"
			return 1
		fi
		sleep 0.2
	done
	cid=$(jq -r .id "$TMP/body")
	TUN_ADDR=$(wait_value "tunnel client $cid running on B" "$READY_TIMEOUT" client_addr "$PD_B" "$cid") ||
		{ PD_WHY="tunnel client $cid ($domain) never ran"; return 1; }
	log "peerdns: $domain -> $url, client $cid on $TUN_ADDR -> 127.0.0.1:$port"
}
setup_peerdns() {
	PD_WHY="node start-up failed (logs: $TMP/a.err, $TMP/b.err)"
	start_node a
	PD_PID_A=$NODE_PID
	wait_for "node A's admin line" "$READY_TIMEOUT" grep_file '^admin listening on ' "$TMP/a.err" || return 1
	PD_A=$(admin_of "$TMP/a.err")
	wait_for "node A ready" "$READY_TIMEOUT" ready "$PD_A" || return 1
	local invite
	invite=$("$TMP/peerdns" invite --admin-addr "$PD_A" 2>"$TMP/invite.err") || { PD_WHY="peerdns invite: $(cat "$TMP/invite.err")"; return 1; }
	start_node b --join "$invite"
	PD_PID_B=$NODE_PID
	wait_for "node B's admin line" "$READY_TIMEOUT" grep_file '^admin listening on ' "$TMP/b.err" || return 1
	PD_B=$(admin_of "$TMP/b.err")
	wait_for "node B ready" "$READY_TIMEOUT" ready "$PD_B" || return 1
	wait_for "A and B connected" "$READY_TIMEOUT" has_peer "$PD_A" || return 1
	wait_for "B and A connected" "$READY_TIMEOUT" has_peer "$PD_B" || return 1
	log "peerdns nodes up: A admin $PD_A (pid $PD_PID_A), B admin $PD_B (pid $PD_PID_B)"
	local code
	code=$(http_code "http://$PD_A/api/tunnel-servers")
	if [ "$code" = 404 ]; then PD_WHY="tunnels not built (GET /api/tunnel-servers is 404)"; return 1; fi
	create_tunnel bench-iperf "$P_IPERF" bench.p2p "$L_PD_I" || return 1
	ADDR_I[peerdns]=$TUN_ADDR
	create_tunnel bench-echo "$P_ECHO" bench-echo.p2p "$L_PD_E" || return 1
	ADDR_E[peerdns]=$TUN_ADDR
	wait_for "echo through the peerdns tunnel (${ADDR_E[peerdns]})" "$READY_TIMEOUT" \
		"$CR" probe -addr "${ADDR_E[peerdns]}" -timeout 1s || { PD_WHY="no echo through ${ADDR_E[peerdns]}"; return 1; }
	TPIDS[peerdns]="$PD_PID_A $PD_PID_B"
}

# --- Holesail ------------------------------------------------------------------
setup_holesail() {
	export HOLESAIL_DIR
	node "$HS" testnet >"$TMP/hs-testnet.out" 2>"$TMP/hs-testnet.err" &
	PIDS+=($!)
	wait_for "Holesail testnet" "$READY_TIMEOUT" grep_file '^bootstrap ' "$TMP/hs-testnet.out" || return 1
	local boot pids="" n target lport url
	boot=$(sed -n 's/^bootstrap 127.0.0.1://p' "$TMP/hs-testnet.out")
	for n in i e; do
		if [ $n = i ]; then target=$P_IPERF lport=$L_HS_I; else target=$P_ECHO lport=$L_HS_E; fi
		node "$HS" server "$target" "$boot" >"$TMP/hs-server-$n.out" 2>"$TMP/hs-server-$n.err" &
		PIDS+=($!)
		pids+=" $!"
		wait_for "Holesail server ($n)" "$READY_TIMEOUT" grep_file '^url ' "$TMP/hs-server-$n.out" || return 1
		url=$(sed -n 's/^url //p' "$TMP/hs-server-$n.out")
		node "$HS" client "$url" "$lport" "$boot" >"$TMP/hs-client-$n.out" 2>"$TMP/hs-client-$n.err" &
		PIDS+=($!)
		pids+=" $!"
		wait_for "Holesail client ($n)" "$READY_TIMEOUT" grep_file '^listening ' "$TMP/hs-client-$n.out" || return 1
	done
	wait_for "echo through Holesail" "$READY_TIMEOUT" "$CR" probe -addr "127.0.0.1:$L_HS_E" -timeout 3s || return 1
	ADDR_I[holesail]=127.0.0.1:$L_HS_I
	ADDR_E[holesail]=127.0.0.1:$L_HS_E
	TPIDS[holesail]=${pids# }
}

PATHS=()
want direct && PATHS+=(direct)
for p in ssh socat peerdns holesail; do
	want $p || continue
	if [ -n "${SKIP[$p]:-}" ]; then continue; fi
	log "setting up $p"
	PD_WHY="setup failed (logs in $TMP)"
	if "setup_$p"; then
		PATHS+=($p)
	else
		if [ $p = peerdns ]; then SKIP[$p]=$PD_WHY; else SKIP[$p]="setup failed (logs in $TMP)"; fi
		log "$p skipped: ${SKIP[$p]}"
		KEEP=1
	fi
done
log "paths: ${PATHS[*]}"

# --- measuring -----------------------------------------------------------------
HZ=$(getconf CLK_TCK)
cpu_ticks() { # utime+stime+cutime+cstime of the process trees of the given pids
	local sum=0 top p f
	for top in "$@"; do
		for p in $(tree_of "$top"); do
			[ -r "/proc/$p/stat" ] || continue
			f=($(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null)) || continue
			[ ${#f[@]} -gt 14 ] || continue
			sum=$((sum + f[11] + f[12] + f[13] + f[14]))
		done
	done
	echo $sum
}
rss_kb() { # summed VmRSS (or the field in $RSS_FIELD) of the given pids
	local sum=0 p v
	for p in "$@"; do
		v=$(awk -v f="${RSS_FIELD:-VmRSS}:" '$1==f{print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
		sum=$((sum + ${v:-0}))
	done
	echo $sum
}
mib() { awk -v k="$1" 'BEGIN{printf "%.1f", k/1024}'; }
# settle: before each run, wait (at most SETTLE_TIMEOUT s) until every
# tunnel process together uses under 10% of one CPU, so one path's
# leftovers (Holesail drains what it buffered long after iperf3 ends) do
# not land on the next path's run.
settle() {
	local all="" p a b deadline=$((SECONDS + SETTLE_TIMEOUT))
	for p in "${PATHS[@]}"; do all+=" ${TPIDS[$p]}"; done
	[ -n "${all// /}" ] || return 0
	while :; do
		a=$(cpu_ticks $all)
		sleep 0.5
		b=$(cpu_ticks $all)
		[ $(((b - a) * 100)) -lt $((HZ * 5)) ] && return 0 # < 10% of a CPU over 0.5 s
		if [ $SECONDS -ge $deadline ]; then
			log "tunnels still busy after ${SETTLE_TIMEOUT}s; measuring anyway"
			return 0
		fi
	done
}
host_of() { echo "${1%:*}"; }
port_of() { echo "${1##*:}"; }

# iperf_run path tag [extra iperf3 args]: one iperf3 run; appends Gbit/s
# to res/path.tag and CPU s per GB to res/path.tag.cpu.
iperf_run() {
	local p=$1 tag=$2 a=${ADDR_I[$1]} t0 t1 out bps bytes
	shift 2
	out=$TMP/res/$p.$tag.$(date +%s%N).json
	settle
	t0=$(cpu_ticks ${TPIDS[$p]})
	if ! timeout $((DURATION + 30)) iperf3 -c "$(host_of "$a")" -p "$(port_of "$a")" -t "$DURATION" \
		--connect-timeout 5000 -J ${IPERF_ARGS:-} "$@" >"$out" 2>&1; then
		log "$p: iperf3 failed: $(jq -r '.error // empty' "$out" 2>/dev/null | head -1)"
		echo err >>"$TMP/res/$p.$tag"
		return 0
	fi
	t1=$(cpu_ticks ${TPIDS[$p]})
	bps=$(jq -r '.end.sum_received.bits_per_second' "$out")
	bytes=$(jq -r '.end.sum_received.bytes' "$out")
	awk -v b="$bps" 'BEGIN{printf "%.3f\n", b/1e9}' >>"$TMP/res/$p.$tag"
	if [ -n "${TPIDS[$p]}" ]; then
		awk -v t=$((t1 - t0)) -v hz="$HZ" -v by="$bytes" 'BEGIN{ if (by > 0) printf "%.3f\n", (t/hz)/(by/1e9); else print "err" }' >>"$TMP/res/$p.$tag.cpu"
	fi
	log "$p $tag: $(tail -1 "$TMP/res/$p.$tag") Gbit/s received (sent $(jq -r '.end.sum_sent.bits_per_second/1e9*1000|floor/1000' "$out"))"
}
conn_run() {
	local p=$1 j
	settle
	j=$(timeout $((CONN_SECONDS + 30)) "$CR" conn -addr "${ADDR_E[$p]}" -d "${CONN_SECONDS}s" -c "$CONN_WORKERS" || echo '{}')
	echo "$j" >>"$TMP/res/$p.conn.json"
	log "$p conn: $j"
}
rr_run() {
	local p=$1 j
	settle
	j=$(timeout $((RR_SECONDS + 30)) "$CR" rr -addr "${ADDR_E[$p]}" -d "${RR_SECONDS}s" -size "$RR_SIZE" || echo '{}')
	echo "$j" >>"$TMP/res/$p.rr.json"
	log "$p rr: $j"
}

declare -A RSS_BEFORE RSS_AFTER RSS_PEAK
for p in "${PATHS[@]}"; do [ -n "${TPIDS[$p]}" ] && RSS_BEFORE[$p]=$(rss_kb ${TPIDS[$p]}); done
UPTIME_BEFORE=$(uptime)
log "load before the runs: $UPTIME_BEFORE"
for r in $(seq 1 "$ROUNDS"); do
	log "round $r/$ROUNDS"
	for p in "${PATHS[@]}"; do iperf_run "$p" tput; done
	if [ -n "$HOLESAIL_PACE" ] && [[ " ${PATHS[*]} " == *" holesail "* ]]; then
		iperf_run holesail paced -b "$HOLESAIL_PACE"
	fi
	for p in "${PATHS[@]}"; do conn_run "$p"; done
	for p in "${PATHS[@]}"; do rr_run "$p"; done
done
for p in "${PATHS[@]}"; do
	[ -n "${TPIDS[$p]}" ] || continue
	RSS_AFTER[$p]=$(rss_kb ${TPIDS[$p]})
	RSS_PEAK[$p]=$(RSS_FIELD=VmHWM rss_kb ${TPIDS[$p]})
done

# peerdns memory under LOAD_SECONDS of unpaced -P LOAD_STREAMS load.
LOAD_LINE=""
if [[ " ${PATHS[*]} " == *" peerdns "* ]] && [ "$LOAD_SECONDS" -gt 0 ]; then
	log "peerdns: ${LOAD_SECONDS}s unpaced load, -P $LOAD_STREAMS"
	a=${ADDR_I[peerdns]}
	rss_a0=$(rss_kb "$PD_PID_A") rss_b0=$(rss_kb "$PD_PID_B")
	t0=$(cpu_ticks $PD_PID_A $PD_PID_B)
	timeout $((LOAD_SECONDS + 30)) iperf3 -c "$(host_of "$a")" -p "$(port_of "$a")" -t "$LOAD_SECONDS" \
		-P "$LOAD_STREAMS" --connect-timeout 5000 -J >"$TMP/res/load.json" 2>&1 &
	lp=$!
	peak_a=$rss_a0 peak_b=$rss_b0
	while kill -0 $lp 2>/dev/null; do # a sample a second until iperf3 ends (bounded by its timeout)
		x=$(rss_kb "$PD_PID_A") y=$(rss_kb "$PD_PID_B")
		[ "$x" -gt "$peak_a" ] && peak_a=$x
		[ "$y" -gt "$peak_b" ] && peak_b=$y
		sleep 1
	done
	wait $lp || log "peerdns load: iperf3 exited $?"
	t1=$(cpu_ticks $PD_PID_A $PD_PID_B)
	rss_a1=$(rss_kb "$PD_PID_A") rss_b1=$(rss_kb "$PD_PID_B")
	load_bps=$(jq -r '.end.sum_received.bits_per_second // 0' "$TMP/res/load.json" 2>/dev/null || echo 0)
	load_bytes=$(jq -r '.end.sum_received.bytes // 0' "$TMP/res/load.json" 2>/dev/null || echo 0)
	LOAD_LINE=$(awk -v a0="$rss_a0" -v b0="$rss_b0" -v pa="$peak_a" -v pb="$peak_b" -v a1="$rss_a1" -v b1="$rss_b1" \
		-v bps="$load_bps" -v by="$load_bytes" -v t=$((t1 - t0)) -v hz="$HZ" -v s="$LOAD_SECONDS" -v P="$LOAD_STREAMS" 'BEGIN{
		m = 1024
		printf "| %d s, iperf3 -P %d, unpaced | %.2f | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | %s |\n", s, P, bps/1e9,
			a0/m, pa/m, a1/m, b0/m, pb/m, b1/m, (by > 0 ? sprintf("%.2f", (t/hz)/(by/1e9)) : "n/a") }')
	log "peerdns load: $LOAD_LINE"
fi
UPTIME_AFTER=$(uptime)

# --- the table -----------------------------------------------------------------------
# stats FILE: "median min max" of the numeric lines (empty when none).
stats() {
	[ -f "$1" ] || return 0
	grep -E '^[0-9.]+$' "$1" | sort -g | awk '{v[NR]=$1} END{ if (NR==0) exit;
		m = (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; print m, v[1], v[NR] }'
}
jstats() { # FILE FIELD: stats of a field of the JSON lines
	[ -f "$1" ] || return 0
	jq -r --arg f "$2" 'select(.ops != null and .ops > 0) | .[$f]' "$1" >"$1.$2"
	stats "$1.$2"
}
med() { awk '{print $1}' <<<"$1"; }
fmt_range() { # "median min max" digits -> "median (min–max)"
	[ -n "$1" ] || { echo "–"; return; }
	awk -v d="$2" '{ if (NF < 3 || $2 == $3) printf "%.*f\n", d, $1; else printf "%.*f (%.*f–%.*f)\n", d, $1, d, $2, d, $3 }' <<<"$1"
}
ratio() { # a b -> a/b with 2 decimals, or –
	if [ -z "$1" ] || [ -z "$2" ]; then echo "–"; return; fi
	awk -v a="$1" -v b="$2" 'BEGIN{ if (b <= 0) print "–"; else if (a/b < 0.1) printf "%.3fx\n", a/b; else printf "%.2fx\n", a/b }'
}
D_T=$(med "$(stats "$TMP/res/direct.tput")")
H_T=""
if [[ " ${PATHS[*]} " == *" holesail "* ]]; then
	H_T=$(printf '%s\n%s\n' "$(med "$(stats "$TMP/res/holesail.tput")")" "$(med "$(stats "$TMP/res/holesail.paced")")" | grep -E '^[0-9.]+$' | sort -g | tail -1)
fi
label() {
	case $1 in
	direct) echo "direct" ;;
	ssh) echo "ssh -L (${SSH_CIPHER:-default cipher})" ;;
	socat) echo "socat" ;;
	peerdns) echo "peerdns tunnel (2 nodes)" ;;
	holesail) echo "Holesail ${HS_VERSION:-} (node $(node --version 2>/dev/null))" ;;
	esac
}

echo
echo "tunnel comparison, $(date -u +'%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, ROUNDS=$ROUNDS DURATION=${DURATION}s CONN=${CONN_WORKERS}x${CONN_SECONDS}s RR=${RR_SIZE}B x ${RR_SECONDS}s"
echo "load before: ${UPTIME_BEFORE#*load average: }; after: ${UPTIME_AFTER#*load average: }"
echo "peerdns: $REV_LINE"
echo
echo "| path | Gbit/s, median (range) | tunnel CPU s/GB | vs direct | vs Holesail | conns/s | conn p99 ms | ${RR_SIZE} B req p50 / p99 µs |"
echo "|---|---|---|---|---|---|---|---|"
for p in "${PATHS[@]}"; do
	t=$(stats "$TMP/res/$p.tput")
	c=$(stats "$TMP/res/$p.tput.cpu")
	cs=$(jstats "$TMP/res/$p.conn.json" rate)
	cp=$(jstats "$TMP/res/$p.conn.json" p99_us)
	r50=$(jstats "$TMP/res/$p.rr.json" p50_us)
	r99=$(jstats "$TMP/res/$p.rr.json" p99_us)
	printf '| %s | %s | %s | %s | %s | %s | %s | %s / %s |\n' "$(label "$p")" "$(fmt_range "$t" 2)" \
		"$([ -n "$c" ] && fmt_range "$c" 2 || echo "–")" "$(ratio "$(med "$t")" "$D_T")" "$(ratio "$(med "$t")" "$H_T")" \
		"$(fmt_range "$cs" 0)" "$([ -n "$cp" ] && awk '{printf "%.2f\n", $1/1000}' <<<"$cp" || echo "–")" \
		"$([ -n "$r50" ] && awk '{printf "%.0f\n", $1}' <<<"$r50" || echo "–")" \
		"$([ -n "$r99" ] && awk '{printf "%.0f\n", $1}' <<<"$r99" || echo "–")"
	if [ $p = holesail ] && [ -f "$TMP/res/holesail.paced" ]; then
		printf '| %s, paced -b %s | %s | %s | %s | %s | | | |\n' "$(label holesail)" "$HOLESAIL_PACE" \
			"$(fmt_range "$(stats "$TMP/res/holesail.paced")" 2)" "$(fmt_range "$(stats "$TMP/res/holesail.paced.cpu")" 2)" \
			"$(ratio "$(med "$(stats "$TMP/res/holesail.paced")")" "$D_T")" "$(ratio "$(med "$(stats "$TMP/res/holesail.paced")")" "$H_T")"
	fi
done
for p in "${!SKIP[@]}"; do echo "| $(label "$p") | skipped: ${SKIP[$p]} | | | | | | |"; done
echo
echo "conns/s: $CONN_WORKERS workers open, echo 1 byte, close; median of the rounds (range). conn p99 and req p50/p99: each round's percentile, median over rounds."
echo
[ ${#RSS_AFTER[@]} -eq 0 ] || {
	echo "memory of the tunnel processes over the rounds (MiB, summed over the path's processes; peak = sum of each one's VmHWM):"
	echo
	echo "| path | processes | RSS before | peak | RSS after |"
	echo "|---|---|---|---|---|"
}
for p in "${PATHS[@]}"; do
	[ -n "${RSS_AFTER[$p]:-}" ] || continue
	case $p in
	ssh) procs="sshd + ssh" ;; socat) procs="2 socat (+ a fork per connection)" ;;
	peerdns) procs="node A + node B" ;; holesail) procs="2 servers + 2 clients (node)" ;; *) procs="" ;;
	esac
	echo "| $(label "$p") | $procs | $(mib "${RSS_BEFORE[$p]}") | $(mib "${RSS_PEAK[$p]}") | $(mib "${RSS_AFTER[$p]}") |"
done
if [ -n "$LOAD_LINE" ]; then
	echo
	echo "peerdns nodes under unpaced load (VmRSS MiB, sampled every second):"
	echo
	echo "| load | Gbit/s | A: before / peak / after | B: before / peak / after | CPU s/GB |"
	echo "|---|---|---|---|---|"
	echo "$LOAD_LINE"
fi
