#!/usr/bin/env bash
# Edge proxy side by side, on loopback, bounded in time: one nginx serves
# the backend files (100 B and 64 KiB) and wrk (keep-alive, -t2 -c$CONNS,
# $DUR s) measures each path to them:
#   direct       wrk → nginx backend
#   nginx proxy  wrk → nginx proxy_pass (keepalive upstream) → backend
#                (its own nginx instance, 2 workers, as the proxy is its
#                own process in every other path)
#   caddy        wrk → caddy reverse_proxy → backend
#   bare         wrk → bench/proxy/bare (fasthttp HostClient.Do and nothing
#                else: the floor for a Go proxy built on fasthttp)
#   eventloop    wrk → bench/proxy/eventloop (gnet epoll loops, a client and
#                its upstream on one loop, head forwarded and nothing else:
#                the floor for a Go proxy built like nginx; its own module)
#   peerdns same wrk → peerdns edge (Host: bench.p2p) → tunnel server on
#                the same node → backend (the real binary, configured
#                through its admin API)
#   peerdns tunnel  wrk → node B's edge → QUIC tunnel → node A → backend
#   peerdns tunnel client  wrk → a tunnel client on node B (plain TCP, no
#                edge) → the same QUIC connection → node A → backend: what
#                the tunnel alone carries of the same answers, so the edge's
#                share of the tunnel route shows in the same run
# and over HTTPS (wrk keeps its TLS connections and does not check
# certificates): the node's same-node route with its CA's leaf, the
# nginx proxy (TLS 1.3, AES-128-GCM first as Go picks) and Caddy, both
# with a self-signed ECDSA P-256 leaf. Besides req/s and p99 it
# prints each proxy's own CPU per request (utime+stime of its processes
# around the run / requests): the figure that moves least with the load
# of a shared machine; and the machine's idle share during the run
# (idle+iowait over all of /proc/stat's cpu line): a path that leaves
# the cores idle is held back by waits (latency), not by CPU.
# Every process stays in the script's session, nginx too (daemon off),
# as in the DNS comparison: with autogroup scheduling
# (kernel.sched_autogroup_enabled, on by default) a session is a
# scheduling group, and a daemonized nginx would get a CPU share of its
# own while the other proxies share theirs with wrk. (At fc943be, quiet
# machine: the nginx proxy read 29.5-30.9k req/s this way, as it did
# daemonized; a peerdns node given its own session read half its DNS
# rate, see bench/README.md.)
# Installs wrk, nginx-light and caddy with apt-get when missing (root).
#
# Two binaries side by side: PEERDNS_BIN runs that binary instead of
# building the tree's; PEERDNS_BIN_B starts a second pair of nodes from
# another binary (PEERDNS_ENV_B: extra environment for them, e.g.
# GOMAXPROCS=2), measured in the same rounds as arms peerdns-b-*; the
# two take turns at going first, round by round, so compare them over an
# even number of rounds (ROUNDS=4). ONLY
# keeps the arms whose label starts with one of its words (e.g.
# ONLY="nginx-proxy/ bare-fasthttp peerdns-same-node/ peerdns-b-same-node/"),
# SIZES the sizes (default "small big"; "bulk" is a 64 MiB file over one
# connection, -t1 -c1, whose CPU column is per GB moved, not per
# request: what the path carries in bulk); RAW names a file that gets the
# rows in the order they ran (round by round); LOGS names a folder that
# gets every process's log at the end (the nodes' tell when their
# GOMAXPROCS changed); GO_ON=1 goes on past a
# run with errors (its row is left out, the error is printed) instead of
# stopping.
set -euo pipefail
cd "$(dirname "$0")/../.."
DUR=${DUR:-5}
CONNS=${CONNS:-32}
ROUNDS=${ROUNDS:-2}
SIZES=${SIZES:-small big}
ONLY=${ONLY:-}
TMP=$(mktemp -d)
chmod 755 "$TMP" # nginx's workers (nobody) read the backend's files from it
cleanup() {
	for f in "$TMP"/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
	kill $(jobs -p) 2>/dev/null
	nginx -c "$TMP/nginx.conf" -s stop 2>/dev/null || true
	nginx -c "$TMP/nginxp.conf" -s stop 2>/dev/null || true
	sleep 1
	if [ -n "${LOGS:-}" ]; then mkdir -p "$LOGS" && cp "$TMP"/*.log "$LOGS"/ 2>/dev/null || true; fi
	rm -rf "$TMP"
}
trap cleanup EXIT
for p in wrk:wrk nginx:nginx-light caddy:caddy jq:jq; do
	command -v "${p%%:*}" >/dev/null || { apt-get update -qq && apt-get install -y -qq "${p#*:}" >/dev/null; }
done
want() { # label → whether ONLY keeps it
	[ -z "$ONLY" ] && return 0
	local w
	for w in $ONLY; do [[ $1 == "$w"* ]] && return 0; done
	return 1
}
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
BACK=$(free_port); NPROXY=$(free_port); CADDY=$(free_port); BARE=$(free_port); EVL=$(free_port)
NPROXYS=$(free_port); CADDYS=$(free_port)
# nginx's and Caddy's HTTPS listeners: a self-signed ECDSA P-256 leaf for
# bench.p2p, as the node's CA issues (wrk does not check certificates).
# Caddy's site has no host (wrk sends the URL's address as SNI, which a
# bench.p2p site's TLS policy would refuse).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-subj /CN=bench.p2p -addext subjectAltName=DNS:bench.p2p \
	-keyout "$TMP/tls.key" -out "$TMP/tls.crt" 2>/dev/null
chmod 644 "$TMP/tls.key" # nginx's workers run as nobody
mkdir -p "$TMP/www" "$TMP/nginx" "$TMP/nginxp"
head -c 100 /dev/urandom | base64 | head -c 100 > "$TMP/www/small"
head -c 65536 /dev/urandom > "$TMP/www/big"
case " $SIZES " in *" bulk "*) head -c 67108864 /dev/urandom > "$TMP/www/bulk" ;; esac
cat > "$TMP/nginx.conf" <<CONF
worker_processes 2;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $TMP/nginx; proxy_temp_path $TMP/nginx; fastcgi_temp_path $TMP/nginx; uwsgi_temp_path $TMP/nginx; scgi_temp_path $TMP/nginx;
  server { listen 127.0.0.1:$BACK; root $TMP/www; }
}
CONF
cat > "$TMP/nginxp.conf" <<CONF
worker_processes 2;
pid $TMP/nginxp/nginx.pid;
error_log $TMP/nginxp/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $TMP/nginxp; proxy_temp_path $TMP/nginxp; fastcgi_temp_path $TMP/nginxp; uwsgi_temp_path $TMP/nginxp; scgi_temp_path $TMP/nginxp;
  upstream back { server 127.0.0.1:$BACK; keepalive 64; }
  server { listen 127.0.0.1:$NPROXY; location / { proxy_pass http://back; proxy_http_version 1.1; proxy_set_header Connection ""; } }
  # TLS 1.3 with AES-128-GCM first, the suite Go's servers (the node,
  # Caddy) pick on AES-NI hardware; OpenSSL's own order starts with
  # AES-256 and wrk would get it.
  server {
    listen 127.0.0.1:$NPROXYS ssl;
    ssl_certificate $TMP/tls.crt; ssl_certificate_key $TMP/tls.key;
    ssl_protocols TLSv1.3; ssl_prefer_server_ciphers on;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256;
    location / { proxy_pass http://back; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
CONF
nginx -c "$TMP/nginx.conf" -g 'daemon off;' &
nginx -c "$TMP/nginxp.conf" -g 'daemon off;' &
cat > "$TMP/Caddyfile" <<CONF
{
  admin off
  auto_https off
}
http://127.0.0.1:$CADDY {
  reverse_proxy 127.0.0.1:$BACK
}
https://:$CADDYS {
  bind 127.0.0.1
  tls $TMP/tls.crt $TMP/tls.key
  reverse_proxy 127.0.0.1:$BACK
}
CONF
caddy run --config "$TMP/Caddyfile" --adapter caddyfile > "$TMP/caddy.log" 2>&1 &
echo $! > "$TMP/caddy.pid"
if [ -n "${PEERDNS_BIN:-}" ]; then cp "$PEERDNS_BIN" "$TMP/peerdns"; else nice -n 19 go build -o "$TMP/peerdns" ./cmd/peerdns; fi
[ -z "${PEERDNS_BIN_B:-}" ] || cp "$PEERDNS_BIN_B" "$TMP/peerdns-b"
nice -n 19 go build -o "$TMP/bare" ./bench/proxy/bare
"$TMP/bare" -listen "127.0.0.1:$BARE" -backend "127.0.0.1:$BACK" > "$TMP/bare.log" 2>&1 &
echo $! > "$TMP/bare.pid"
(cd bench/proxy/eventloop && nice -n 19 go build -o "$TMP/eventloop" .)
"$TMP/eventloop" -listen "127.0.0.1:$EVL" -backend "127.0.0.1:$BACK" > "$TMP/eventloop.log" 2>&1 &
echo $! > "$TMP/eventloop.pid"
node_up() { # dir extra... → prints admin and http addresses
	local bin=$TMP/peerdns envs=()
	case $1 in *2) bin=$TMP/peerdns-b; read -ra envs <<<"${PEERDNS_ENV_B:-}" ;; esac
	env "${envs[@]}" "$bin" node --data "$TMP/$1" --admin-addr 127.0.0.1:0 --dns-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 \
		--https-addr 127.0.0.1:0 --p2p-addr 127.0.0.1:0 --upstream 127.0.0.1:9 "${@:2}" > "$TMP/$1.log" 2>&1 &
	echo $! > "$TMP/$1.pid"
	for _ in $(seq 100); do grep -q '^https listening' "$TMP/$1.log" 2>/dev/null && break; sleep 0.1; done
	echo "$(sed -n 's/^admin listening on //p' "$TMP/$1.log") $(sed -n 's/^http listening on //p' "$TMP/$1.log") $(sed -n 's/^https listening on //p' "$TMP/$1.log")"
}
read -r ADM_A HTTP_A HTTPS_A < <(node_up a)
INV=$(curl -s -X POST "http://$ADM_A/api/invites" | sed -n 's/.*"invite":"\([^"]*\)".*/\1/p')
read -r ADM_B HTTP_B _ < <(node_up b --join "$INV")
curl -s -X POST "http://$ADM_A/api/tunnel-create" -H 'Content-Type: application/json' -d "{\"name\":\"bench\",\"port\":$BACK,\"domain\":\"bench.p2p\"}" >/dev/null
tunnel_client() { # adm_a adm_b → prints the address of a tunnel client on B to a second server on A (the backend)
	local sid url cid addr code
	sid=$(curl -s -X POST "http://$1/api/tunnel-create" -H 'Content-Type: application/json' -d "{\"name\":\"raw\",\"port\":$BACK,\"host\":\"127.0.0.1\"}" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
	for _ in $(seq 100); do
		url=$(curl -s "http://$1/api/tunnel-servers" | jq -r --arg id "$sid" '.[] | select(.id == $id) | .info.url // ""')
		[ -n "$url" ] && break; sleep 0.2
	done
	curl -s -X POST "http://$2/api/add-domain" -H 'Content-Type: application/json' -d "{\"domain\":\"raw.p2p\",\"hash\":\"$url\"}" >/dev/null
	for _ in $(seq 100); do # the client needs B to own the domain: 400 until it does
		code=$(curl -s -o "$TMP/client.json" -w '%{http_code}' -X POST "http://$2/api/tunnel-client-create" -H 'Content-Type: application/json' \
			-d "{\"domain\":\"raw.p2p\",\"key\":\"$url\",\"port\":$(free_port)}")
		[ "$code" = 200 ] && break; sleep 0.2
	done
	cid=$(jq -r .id "$TMP/client.json")
	for _ in $(seq 100); do
		addr=$(curl -s "http://$2/api/tunnel-clients" | jq -r --arg id "$cid" '.[] | select(.id == $id and .info.state == "running") | .info.address // ""')
		[ -n "$addr" ] && break; sleep 0.2
	done
	echo "$addr"
}
RAW_B=
if want peerdns-tunnel-client/; then
	RAW_B=$(tunnel_client "$ADM_A" "$ADM_B")
	[ -n "$RAW_B" ] || { echo "no tunnel client on node B" >&2; exit 1; }
fi
HTTP_A2= HTTPS_A2= HTTP_B2= RAW_B2=
if [ -n "${PEERDNS_BIN_B:-}" ]; then
	read -r ADM_A2 HTTP_A2 HTTPS_A2 < <(node_up a2)
	INV2=$(curl -s -X POST "http://$ADM_A2/api/invites" | sed -n 's/.*"invite":"\([^"]*\)".*/\1/p')
	read -r ADM_B2 HTTP_B2 _ < <(node_up b2 --join "$INV2")
	curl -s -X POST "http://$ADM_A2/api/tunnel-create" -H 'Content-Type: application/json' -d "{\"name\":\"bench\",\"port\":$BACK,\"domain\":\"bench.p2p\"}" >/dev/null
	if want peerdns-b-tunnel-client/; then
		RAW_B2=$(tunnel_client "$ADM_A2" "$ADM_B2")
		[ -n "$RAW_B2" ] || { echo "no tunnel client on node B2" >&2; exit 1; }
	fi
fi
for h in $HTTP_A $HTTP_B $HTTP_A2 $HTTP_B2; do # every edge serves the domain before any arm runs
	for _ in $(seq 200); do
		curl -s -o /dev/null -w '%{http_code}' -H 'Host: bench.p2p' "http://$h/small" | grep -q 200 && break; sleep 0.1
	done
done
for url in "http://127.0.0.1:$BACK/big" "http://$HTTP_B/big" ${HTTP_B2:+"http://$HTTP_B2/big"} ${RAW_B:+"http://$RAW_B/big"} ${RAW_B2:+"http://$RAW_B2/big"}; do # 200 and the whole file, or no figures
	got=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' -H 'Host: bench.p2p' "$url")
	[ "$got" = "200 65536" ] || { echo "$url answered $got, want 200 65536" >&2; exit 1; }
done
sleep 1
PID_A=$(cat "$TMP/a.pid"); PID_B=$(cat "$TMP/b.pid")
[ -z "${PEERDNS_BIN_B:-}" ] || { PID_A2=$(cat "$TMP/a2.pid"); PID_B2=$(cat "$TMP/b2.pid"); }
NGINXP=$(for w in $(pgrep -f "nginx: worker"); do grep -q nginxp "/proc/$(awk '{print $4}' "/proc/$w/stat")/cmdline" && echo "$w" || true; done | tr '\n' ' ')
CADDY_PID=$(cat "$TMP/caddy.pid"); BARE_PID=$(cat "$TMP/bare.pid"); EVL_PID=$(cat "$TMP/eventloop.pid")
cpu_ticks() { for p in "$@"; do awk '{print $14+$15}' "/proc/$p/stat"; done | paste -sd+ | bc; }
bytes_read() { awk '/requests in/{v=$(NF-1); u=v; sub(/[0-9.]+/, "", u); sub(/[A-Za-z]+/, "", v); m=(u=="KB")?1024:(u=="MB")?1048576:(u=="GB")?1073741824:1; printf "%.0f", v*m}'; }
idle_total() { awk '/^cpu /{t=0; for (i=2; i<=NF; i++) t+=$i; print $5+$6, t; exit}' /proc/stat; }
run() { # label url host pids...
	local out c0=0 c1=0 n cpu=- i0 i1 idle
	want "$1" || return 0
	[ $# -ge 4 ] && c0=$(cpu_ticks "${@:4}")
	i0=$(idle_total)
	local conns=$CONNS threads=2
	case $1 in */bulk) conns=1 threads=1 ;; esac
	out=$(wrk -t$threads -c$conns -d"${DUR}s" --latency -H "Host: $3" "$2" 2>&1)
	# A run that got errors measured error pages, not the path: stop.
	if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
		echo "$1: $(grep -E 'Non-2xx|Socket errors' <<<"$out" | tr -s ' ') (of $(awk '/requests in/{print $1}' <<<"$out")): figures void" >&2
		[ -n "${GO_ON:-}" ] && return 0
		exit 1
	fi
	n=$(echo "$out" | awk '/requests in/{print $1}')
	i1=$(idle_total)
	idle=$(echo "$i0 $i1" | awk '{printf "%.0f", ($4 > $2) ? 100*($3-$1)/($4-$2) : 0}')
	if [ $# -ge 4 ]; then
		c1=$(cpu_ticks "${@:4}")
		cpu=$(echo "scale=1; ($c1-$c0)*1000000/$(getconf CLK_TCK)/$n" | bc)
		# bulk: CPU-s per GB (10^9 bytes) that wrk read
		if [[ $1 == */bulk ]]; then cpu=$(echo "scale=2; ($c1-$c0)*1000000000/$(getconf CLK_TCK)/$(bytes_read <<<"$out")" | bc); fi
	fi
	local rate
	rate=$(echo "$out" | awk '/Requests\/sec/{print $2}')
	if [[ $1 == */bulk ]]; then rate=$(echo "$out" | awk '/Transfer\/sec/{print $2}'); fi
	printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$rate" "$(echo "$out" | awk '$1=="99%"{print $2}')" "$cpu" "$idle"
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); peerdns $(git rev-parse --short HEAD)${PEERDNS_BIN:+ (a: $PEERDNS_BIN)}${PEERDNS_BIN_B:+ (b: $PEERDNS_BIN_B ${PEERDNS_ENV_B:-})}"
# One binary's arms: label prefix, its node pair's HTTP, HTTPS and
# tunnel client addresses and PIDs.
node_arms() { # prefix f http_a https_a http_b raw_b pid_a pid_b
	run "$1-same-node/$2" "http://$3/$2" "bench.p2p" "$7"
	run "$1-same-node-https/$2" "https://$4/$2" "bench.p2p" "$7"
	run "$1-tunnel/$2" "http://$5/$2" "bench.p2p" "$7" "$8"
	run "$1-tunnel-client/$2" "http://$6/$2" "127.0.0.1" "$7" "$8"
}
for r in $(seq 1 "$ROUNDS"); do
	for f in $SIZES; do
		run "direct/$f" "http://127.0.0.1:$BACK/$f" "127.0.0.1"
		run "nginx-proxy/$f" "http://127.0.0.1:$NPROXY/$f" "127.0.0.1" $NGINXP
		run "bare-fasthttp/$f" "http://127.0.0.1:$BARE/$f" "127.0.0.1" "$BARE_PID"
		run "eventloop-floor/$f" "http://127.0.0.1:$EVL/$f" "127.0.0.1" "$EVL_PID"
		run "caddy/$f" "http://127.0.0.1:$CADDY/$f" "127.0.0.1" "$CADDY_PID"
		run "nginx-proxy-https/$f" "https://127.0.0.1:$NPROXYS/$f" "bench.p2p" $NGINXP
		run "caddy-https/$f" "https://127.0.0.1:$CADDYS/$f" "bench.p2p" "$CADDY_PID"
		# With two binaries the second of the two to run reads more
		# (about 5% at 64 KiB, 5-10% at 100 B, in runs of one binary as
		# both), so they take turns: the first binary first in odd
		# rounds, the second in even ones. Compare them over an even
		# number of rounds.
		if [ -z "${PEERDNS_BIN_B:-}" ] || [ $((r % 2)) = 1 ]; then
			node_arms peerdns "$f" "$HTTP_A" "$HTTPS_A" "$HTTP_B" "$RAW_B" "$PID_A" "$PID_B"
		fi
		if [ -n "${PEERDNS_BIN_B:-}" ]; then
			node_arms peerdns-b "$f" "$HTTP_A2" "$HTTPS_A2" "$HTTP_B2" "$RAW_B2" "$PID_A2" "$PID_B2"
			[ $((r % 2)) = 1 ] || node_arms peerdns "$f" "$HTTP_A" "$HTTPS_A" "$HTTP_B" "$RAW_B" "$PID_A" "$PID_B"
		fi
	done
done | tee "${RAW:-/dev/null}" | sort | awk -F'\t' '$1 ~ /\/bulk$/ {print "| " $1 " | " $2 "/s | p99 " $3 " | " $4 " CPU-s/GB | idle " $5 "% |"; next} {print "| " $1 " | " $2 " req/s | p99 " $3 " | " $4 " µs CPU/req | idle " $5 "% |"}'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "RSS: node A $(awk '/VmRSS/{print $2}' "/proc/$PID_A/status") kB, node B $(awk '/VmRSS/{print $2}' "/proc/$PID_B/status") kB"
