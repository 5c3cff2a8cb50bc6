#!/usr/bin/env bash
# Uploads through the edge proxy, on loopback, bounded in time: curl -T
# (PUT, Content-Length, Expect: 100-continue as curl sends it for large
# files) of each size in $SIZES to a backend that reads the whole body
# and answers its length, through
#   peerdns   the real node's edge (Host: up.p2p) → tunnel server on the
#             same node → backend, configured through the admin API
#   nginx     nginx proxy_pass with proxy_request_buffering off,
#             client_max_body_size 0 and client_body_buffer_size 128k
#             (nginx streaming too, through a buffer the size of the
#             edge's; by default it spools bodies to disk first and reads
#             them 16 KiB at a time)
# and, with OLD_BIN=/path/peerdns, an older node binary beside them.
# Prints MB/s (curl's upload speed), the status, and the proxy's RSS
# before, at its peak during the upload (sampled every 50 ms) and after.
# Installs nginx-light with apt-get when missing (root).
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZES=${SIZES:-60M 1G}
TMP=$(mktemp -d)
cleanup() {
	kill $(jobs -p) 2>/dev/null || true
	nginx -c "$TMP/nginx.conf" -s stop 2>/dev/null || true
	sleep 0.5
	rm -rf "$TMP"
}
trap cleanup EXIT
command -v nginx >/dev/null || { apt-get update -qq && apt-get install -y -qq nginx-light >/dev/null; }
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
BACK=$(free_port); NPROXY=$(free_port)

# The backend: reads every body to its end, answers its length.
cat > "$TMP/sink.py" <<'PY'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_PUT(self):
        n, left = 0, int(self.headers.get("Content-Length", "0"))
        while left > 0:
            b = self.rfile.read(min(left, 1 << 20))
            if not b:
                break
            n += len(b); left -= len(b)
        body = str(n).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_POST = do_PUT
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
python3 "$TMP/sink.py" "$BACK" &

mkdir -p "$TMP/ng"
cat > "$TMP/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $TMP/ng/nginx.pid;
error_log $TMP/ng/error.log;
events { worker_connections 1024; }
http { access_log off; client_body_temp_path $TMP/ng; proxy_temp_path $TMP/ng;
  fastcgi_temp_path $TMP/ng; uwsgi_temp_path $TMP/ng; scgi_temp_path $TMP/ng;
  upstream back { server 127.0.0.1:$BACK; keepalive 8; }
  server { listen 127.0.0.1:$NPROXY; client_max_body_size 0; client_body_buffer_size 128k;
    location / { proxy_pass http://back; proxy_http_version 1.1; proxy_set_header Connection "";
      proxy_request_buffering off; proxy_read_timeout 120s; } } }
CONF
nginx -c "$TMP/nginx.conf" &

go build -o "$TMP/peerdns" ./cmd/peerdns
start_node() { # start_node BIN NAME → sets EDGE_<NAME>, PID_<NAME>
	local bin=$1 name=$2 d=$TMP/$2
	mkdir -p "$d"
	"$bin" node --data "$d/data" --admin-addr 127.0.0.1:0 --dns-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 \
		--https-addr 127.0.0.1:0 --p2p-addr 127.0.0.1:0 --upstream 127.0.0.1:9 >"$d/log" 2>&1 &
	local pid=$!
	for _ in $(seq 100); do grep -q '^https listening' "$d/log" 2>/dev/null && break; sleep 0.1; done
	local adm http
	adm=$(sed -n 's/^admin listening on //p' "$d/log"); http=$(sed -n 's/^http listening on //p' "$d/log")
	curl -sf -X POST "http://$adm/api/tunnel-create" -H 'Content-Type: application/json' \
		-d "{\"name\":\"up\",\"port\":$BACK,\"domain\":\"up.p2p\"}" >/dev/null
	for _ in $(seq 200); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data-binary x -H 'Host: up.p2p' "http://$http/")" = 200 ] && break
		sleep 0.1
	done
	printf -v "EDGE_$name" '%s' "$http"
	printf -v "PID_$name" '%s' "$pid"
}
start_node "$TMP/peerdns" new
[ -n "${OLD_BIN:-}" ] && start_node "$OLD_BIN" old
for _ in $(seq 50); do [ -s "$TMP/ng/nginx.pid" ] && break; sleep 0.1; done
NGINX_WORKER=$(pgrep -P "$(cat "$TMP/ng/nginx.pid")" | head -1)

rss() { awk '/^VmRSS/ {print int($2/1024)}' "/proc/$1/status"; }
run() { # run LABEL ADDR PID SIZE
	local label=$1 addr=$2 pid=$3 size=$4 file=$TMP/body.$4
	[ -f "$file" ] || truncate -s "$size" "$file"
	local before peak=0 r out
	before=$(rss "$pid")
	( while :; do rss "$pid"; sleep 0.05; done ) > "$TMP/rss.log" 2>/dev/null &
	local sampler=$!
	out=$(curl -s -o "$TMP/answer" -w '%{speed_upload} %{http_code}' --max-time 300 -T "$file" -H 'Host: up.p2p' "http://$addr/upload" || true)
	kill "$sampler"; wait "$sampler" 2>/dev/null || true
	for r in $(cat "$TMP/rss.log"); do [ "$r" -gt "$peak" ] && peak=$r; done
	printf '| %s | %s | %s | %.0f | %s / %s / %s |\n' "$label" "$size" "${out#* }" \
		"$(echo "${out% *} / 1000000" | bc -l)" "$before" "$peak" "$(rss "$pid")"
}
echo "uploads through a proxy, $(date -u '+%F %H:%M') UTC, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "peerdns: $(git log -1 --format='%h %s' | cut -c1-60)"
echo
echo "| proxy | size | status | MB/s | RSS MiB before / peak / after |"
echo "|---|---|---|---|---|"
for size in $SIZES; do
	run "peerdns edge" "$EDGE_new" "$PID_new" "$size"
	[ -n "${OLD_BIN:-}" ] && run "peerdns edge, OLD_BIN" "$EDGE_old" "$PID_old" "$size"
	run "nginx, proxy_request_buffering off" "127.0.0.1:$NPROXY" "$NGINX_WORKER" "$size"
done
