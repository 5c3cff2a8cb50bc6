#!/usr/bin/env bash
# HTTP/2 through the edge beside nginx's HTTP/2 proxy, on loopback,
# bounded in time: one nginx serves the backend files (100 B, 64 KiB);
# h2load (-c$CONNS, 10 streams per connection, $DUR s) measures
#   nginx-h2    h2load → nginx (listen ssl http2, TLS 1.3) → backend
#   bare-h2     h2load → bench/proxy/bareh2 (http/h2srv and a fasthttp
#               HostClient, nothing else: the floor of the libraries the
#               edge's HTTP/2 is built from) → backend
#   nethttp-h2  the same with net/http's HTTP/2 server (bareh2 -server
#               net/http), the server the edge was built on before h2srv
#   peerdns-h2  h2load → the node's HTTPS edge (ALPN h2, Host bench.p2p)
#               → tunnel server on the same node → backend
#   peerdns-h3  bench/proxy/h3load (quic-go's http3 client, -c$CONNS,
#               10 requests in flight per connection, $DUR s) → the
#               node's HTTP/3 on the HTTPS port's UDP twin → the same
#               tunnel (Debian's h2load is built without HTTP/3)
# in $ROUNDS interleaved rounds (print all; take the median). ONLY keeps
# the arms whose labels start with one of its words (ONLY="nginx-h2/
# bare-h2/ peerdns-h2/").
# PEERDNS_BIN runs that binary instead of building the tree's;
# PEERDNS_BIN_B starts a second node from another binary (another
# revision) with the same tunnel to the same backend and adds its arms
# (peerdns-h2-b, peerdns-h3-b) to each round, so two revisions are
# compared in one interleaved run; PEERDNS_ENV_B is extra environment
# for it (e.g. GOMAXPROCS=1: the same binary on one P). Each node arm
# also prints the node's CPU time per request (utime+stime from /proc
# over the run), and every arm nginx's workers' and the load
# generator's.
# nginx closes an HTTP/2 connection after keepalive_requests (1,000 by
# default) and h2load's timed mode does not reconnect: its clients then
# stop, with errors. The config raises it, as a proxy under benchmark load
# would (the edge has no such limit).
set -euo pipefail
cd "$(dirname "$0")/../.."
DUR=${DUR:-5}; CONNS=${CONNS:-8}; ROUNDS=${ROUNDS:-3}; ONLY=${ONLY:-}
want() { # label → whether ONLY keeps it
	[ -z "$ONLY" ] && return 0
	local w
	for w in $ONLY; do [[ $1 == "$w"* ]] && return 0; done
	return 1
}
TMP=$(mktemp -d); chmod 755 "$TMP"
cleanup() {
	for f in "$TMP"/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
	kill $(jobs -p) 2>/dev/null || true
	sleep 1; rm -rf "$TMP"
}
trap cleanup EXIT
for p in h2load:nghttp2-client nginx:nginx-light; do
	command -v "${p%%:*}" >/dev/null || { apt-get update -qq && apt-get install -y -qq "${p#*:}" >/dev/null; }
done
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
BACK=$(free_port); NH2=$(free_port); BH2=$(free_port); NETH2=$(free_port)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-subj /CN=bench.p2p -addext subjectAltName=DNS:bench.p2p -keyout "$TMP/tls.key" -out "$TMP/tls.crt" 2>/dev/null
chmod 644 "$TMP/tls.key"
mkdir -p "$TMP/www" "$TMP/n"
head -c 100 /dev/urandom | base64 | head -c 100 > "$TMP/www/small"
head -c 65536 /dev/urandom > "$TMP/www/big"
cat > "$TMP/nginx.conf" <<CONF
worker_processes 2;
pid $TMP/n/nginx.pid;
error_log $TMP/n/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  client_body_temp_path $TMP/n; proxy_temp_path $TMP/n; fastcgi_temp_path $TMP/n; uwsgi_temp_path $TMP/n; scgi_temp_path $TMP/n;
  server { listen 127.0.0.1:$BACK; root $TMP/www; }
  upstream back { server 127.0.0.1:$BACK; keepalive 64; }
  server {
    listen 127.0.0.1:$NH2 ssl http2;
    ssl_certificate $TMP/tls.crt; ssl_certificate_key $TMP/tls.key; ssl_protocols TLSv1.3;
    location / { proxy_pass http://back; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
CONF
nginx -c "$TMP/nginx.conf" -g 'daemon off;' &
NGINX=$!
if [ -n "${PEERDNS_BIN:-}" ]; then cp "$PEERDNS_BIN" "$TMP/peerdns"; else go build -o "$TMP/peerdns" ./cmd/peerdns; fi
go build -o "$TMP/h3load" ./bench/proxy/h3load
go build -o "$TMP/bareh2" ./bench/proxy/bareh2
"$TMP/bareh2" -listen "127.0.0.1:$BH2" -backend "127.0.0.1:$BACK" -cert "$TMP/tls.crt" -key "$TMP/tls.key" > "$TMP/bareh2.log" 2>&1 &
echo $! > "$TMP/bareh2.pid"
PID_bare=$!
"$TMP/bareh2" -server net/http -listen "127.0.0.1:$NETH2" -backend "127.0.0.1:$BACK" -cert "$TMP/tls.crt" -key "$TMP/tls.key" > "$TMP/nethttp.log" 2>&1 &
echo $! > "$TMP/nethttp.pid"
PID_nethttp=$!
for p in "$BH2" "$NETH2"; do
	for _ in $(seq 100); do curl -sk --http2 -o /dev/null "https://127.0.0.1:$p/small" && break; sleep 0.1; done
done
node() { # name binary [env...]: start a node with a tunnel to the backend; sets HTTPS_<name>, PID_<name>
	env "${@:3}" "$2" node --data "$TMP/$1" --admin-addr 127.0.0.1:0 --dns-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 \
		--https-addr 127.0.0.1:0 --p2p-addr 127.0.0.1:0 --upstream 127.0.0.1:9 > "$TMP/$1.log" 2>&1 &
	echo $! > "$TMP/$1.pid"
	printf -v "PID_$1" '%s' $!
	for _ in $(seq 100); do grep -q '^https listening' "$TMP/$1.log" 2>/dev/null && break; sleep 0.1; done
	local adm https
	adm=$(sed -n 's/^admin listening on //p' "$TMP/$1.log"); https=$(sed -n 's/^https listening on //p' "$TMP/$1.log")
	curl -s -X POST "http://$adm/api/tunnel-create" -H 'Content-Type: application/json' -d "{\"name\":\"bench\",\"port\":$BACK,\"domain\":\"bench.p2p\"}" >/dev/null
	for _ in $(seq 200); do
		[ "$(curl -sk --http2 -o /dev/null -w '%{http_code}' --resolve "bench.p2p:${https##*:}:127.0.0.1" "https://bench.p2p:${https##*:}/small")" = 200 ] && break; sleep 0.1
	done
	printf -v "HTTPS_$1" '%s' "$https"
}
node a "$TMP/peerdns"
HTTPS=$HTTPS_a
if [ -n "${PEERDNS_BIN_B:-}" ]; then
	read -ra ENVS_B <<<"${PEERDNS_ENV_B:-}"
	cp "$PEERDNS_BIN_B" "$TMP/peerdns-b"; node b "$TMP/peerdns-b" "${ENVS_B[@]}"
fi
cpu() { local s=0 p; for p in "$@"; do s=$((s + $(awk '{print $14+$15}' "/proc/$p/stat"))); done; echo $s; } # clock ticks
# perreq pid ticks0 requests: the node's CPU µs per request since ticks0.
perreq() { awk -v t="$(( $(cpu "$1") - $2 ))" -v n="$3" -v hz="$(getconf CLK_TCK)" 'BEGIN{if(n>0)printf "%.0f µs CPU/req", t*1e6/hz/n}'; }
# The other processes' CPU per request over the same window, as extra
# columns (they do not change the figures above): nginx's workers (the
# HTTP/2 proxy and the backend in the nginx arms, the backend alone in
# the node arms) and the load generator (h2load or h3load, a child of
# this shell: bash's times).
WORKERS=$(pgrep -P "$NGINX" | tr '\n' ' ' || true)
# kids FILE: the children's CPU seconds in the output of times (run in
# the shell that waits for the load generator, not in a subshell of it).
kids() { awk 'NR==2{split($1,a,/[ms]/); split($2,b,/[ms]/); printf "%.4f", a[1]*60+a[2]+b[1]*60+b[2]}' "$1"; }
others() { # workers-ticks0 requests; times before and after in $TMP/k0, $TMP/k1
	awk -v w="$(( $(cpu $WORKERS) - $1 ))" -v k0="$(kids "$TMP/k0")" -v k1="$(kids "$TMP/k1")" -v n="$2" -v hz="$(getconf CLK_TCK)" \
		'BEGIN{if(n>0)printf "nginx workers %.0f µs/req, load generator %.0f µs/req", w*1e6/hz/n, (k1-k0)*1e6/n}'
}
run() { # label pid|- url [h2load options]
	local out t0=0 n w0
	want "$1" || return 0
	[ "$2" != - ] && t0=$(cpu "$2")
	w0=$(cpu $WORKERS); times > "$TMP/k0"
	out=$(h2load -c"$CONNS" -m10 -D"$DUR" --warm-up-time=1 "${@:3}" 2>&1)
	times > "$TMP/k1"
	# A run with failed requests measured errors, not the path: stop.
	grep -q ' 0 failed, 0 errored' <<<"$out" || { echo "$1: $(grep -E '^requests:' <<<"$out"): figures void" >&2; exit 1; }
	# CPU is counted over the warm-up too: requests at the measured rate
	# over the warm-up and the timed window
	n=$(awk -v d="$DUR" '/^finished in/{print int($4 * (d + 1))}' <<<"$out")
	printf '| %s | %s req/s | %s | %s | %s |\n' "$1" "$(awk '/^finished in/{print $4}' <<<"$out")" "$(grep -E '^requests:' <<<"$out")" \
		"$([ "$2" != - ] && perreq "$2" "$t0" "$n")" "$(others "$w0" "$n")"
}
run3() { # label pid url [h3load options]
	local out t0 w0 n
	want "$1" || return 0
	t0=$(cpu "$2")
	w0=$(cpu $WORKERS); times > "$TMP/k0"
	out=$("$TMP/h3load" -c "$CONNS" -m 10 -d "${DUR}s" -warmup 1s -url "${@:3}" 2>&1) || { echo "$1: $out: figures void" >&2; exit 1; }
	times > "$TMP/k1"
	n=$(awk -v d="$DUR" '{print int($6 * (d + 1))}' <<<"$out")
	printf '| %s | %s req/s | %s | %s | %s |\n' "$1" "$(awk '{print $6}' <<<"$out")" "$out" \
		"$(perreq "$2" "$t0" "$n")" "$(others "$w0" "$n")"
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); peerdns $(git rev-parse --short HEAD)${PEERDNS_BIN:+ (a: $PEERDNS_BIN)}${PEERDNS_BIN_B:+ (b: $PEERDNS_BIN_B ${PEERDNS_ENV_B:-})}"
for r in $(seq 1 "$ROUNDS"); do
	for f in small big; do
		run "nginx-h2/$f" - "https://127.0.0.1:$NH2/$f"
		run "bare-h2/$f" "$PID_bare" "https://bench.p2p:$BH2/$f" --connect-to="127.0.0.1:$BH2"
		run "nethttp-h2/$f" "$PID_nethttp" "https://bench.p2p:$NETH2/$f" --connect-to="127.0.0.1:$NETH2"
		# h2load sends the URL's host as :authority and SNI: bench.p2p
		# through a connect-to address.
		run "peerdns-h2/$f" "$PID_a" "https://bench.p2p:${HTTPS##*:}/$f" --connect-to="127.0.0.1:${HTTPS##*:}"
		if [ -n "${PEERDNS_BIN_B:-}" ]; then
			run "peerdns-h2-b/$f" "$PID_b" "https://bench.p2p:${HTTPS_b##*:}/$f" --connect-to="127.0.0.1:${HTTPS_b##*:}"
		fi
		run3 "peerdns-h3/$f" "$PID_a" "https://bench.p2p:${HTTPS##*:}/$f" -connect-to "127.0.0.1:${HTTPS##*:}"
		if [ -n "${PEERDNS_BIN_B:-}" ]; then
			run3 "peerdns-h3-b/$f" "$PID_b" "https://bench.p2p:${HTTPS_b##*:}/$f" -connect-to "127.0.0.1:${HTTPS_b##*:}"
		fi
	done
done | sort
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
