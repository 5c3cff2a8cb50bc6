#!/usr/bin/env bash
# Requests per second to a plugin handler through the edge proxy (the
# JSON-RPC hop over the handler's pipes) and peer.call round trips per
# second between two nodes, with the real binary and the example plugin,
# on loopback, bounded by DUR. Needs wrk (apt-get install wrk).
set -euo pipefail
cd "$(dirname "$0")/../.."
DUR=${DUR:-5}
CONNS=${CONNS:-16}
TMP=$(mktemp -d)
cleanup() {
	for f in "$TMP"/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
	sleep 1
	rm -rf "$TMP"
}
trap cleanup EXIT
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
go build -o "$TMP/peerdns" ./cmd/peerdns
go build -o "$TMP/notes" ./examples/plugins/notes
install_notes() {
	mkdir -p "$TMP/$1/plugins/notes/www"
	cp examples/plugins/notes/plugin.json "$TMP/$1/plugins/notes/"
	cp examples/plugins/notes/www/index.html "$TMP/$1/plugins/notes/www/"
	cp "$TMP/notes" "$TMP/$1/plugins/notes/notes"
}
node_up() {
	install_notes "$1"
	"$TMP/peerdns" node --data "$TMP/$1" --admin-addr 127.0.0.1:0 --dns-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 \
		--https-addr 127.0.0.1:0 --p2p-addr 127.0.0.1:0 --upstream 127.0.0.1:9 "${@:2}" > "$TMP/$1.log" 2>&1 &
	echo $! > "$TMP/$1.pid"
	for _ in $(seq 100); do grep -q '^https listening' "$TMP/$1.log" 2>/dev/null && break; sleep 0.1; done
	echo "$(sed -n 's/^admin listening on //p' "$TMP/$1.log") $(sed -n 's/^http listening on //p' "$TMP/$1.log")"
}
read -r ADM_A HTTP_A < <(node_up a)
INV=$(curl -s -X POST "http://$ADM_A/api/invites" | sed -n 's/.*"invite":"\([^"]*\)".*/\1/p')
read -r ADM_B HTTP_B < <(node_up b --join "$INV")
ID_B=""
for _ in $(seq 100); do
	ID_B=$(curl -s "http://$ADM_A/api/peers" | sed -n 's/^\["\([0-9a-f]*\)".*/\1/p')
	[ -n "$ID_B" ] && break; sleep 0.1
done
for _ in $(seq 200); do
	curl -s -o /dev/null -w '%{http_code}' -H 'Host: notes.p2p' "http://$HTTP_A/api/hello" | grep -q 200 && break; sleep 0.1
done
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); peerdns $(git rev-parse --short HEAD)"
echo "== handler through the edge proxy (GET /api/hello on notes.p2p), wrk -t2 -c$CONNS -d${DUR}s"
wrk -t2 -c"$CONNS" -d"${DUR}s" --latency -H 'Host: notes.p2p' "http://$HTTP_A/api/hello" | grep -E 'Requests/sec|  99%'
echo "== www through the edge proxy (GET / on notes.p2p)"
wrk -t2 -c"$CONNS" -d"${DUR}s" --latency -H 'Host: notes.p2p' "http://$HTTP_A/" | grep -E 'Requests/sec|  99%'
echo "== peer.call A -> B"
for _ in $(seq 50); do
	curl -s -X POST "http://$ADM_A/api/plugins/notes.p2p/actions/ping-peer" -H 'Content-Type: application/json' -d "{\"peer\":\"$ID_B\"}" | grep -q pong && break; sleep 0.2
done
cat > "$TMP/ping.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"peer":"$ID_B"}'
wrk.headers["Content-Type"] = "application/json"
LUA
for c in 1 8; do
	echo "-- $c client(s): admin request → plugin action → peer.call over a QUIC stream → B's handler and back"
	wrk -t1 -c"$c" -d"${DUR}s" --latency -s "$TMP/ping.lua" "http://$ADM_A/api/plugins/notes.p2p/actions/ping-peer" | grep -E 'Requests/sec|  99%|Non-2xx'
done
