#!/usr/bin/env bash
# HTTP/3 request bodies the edge holds for an upstream that stopped
# reading, on loopback, bounded in time: one node (the real binary,
# configured through its admin API: a tunnel on the node with the domain
# bench.p2p) in front of bench/proxy/h3hold's upstream, which reads the
# first $FIRST bytes of each connection and then nothing; h3hold's client
# opens $CONNS QUIC connections with $STREAMS POSTs each, whose bodies
# never end, for $DUR. Prints the node's RSS before, at its peak (sampled
# every second) and after, what the bodies gave and what the upstream
# read, and whether the admin API still answers.
# What the client sent beyond what the upstream read waits in the
# kernel's socket buffers and in the node: the node's share is bounded by
# the edge's QUIC receive windows (http/proxy/h3.go).
# PEERDNS_BIN runs that binary instead of building the tree's; OLD_BIN a
# second one after it, the same way.
set -euo pipefail
cd "$(dirname "$0")/../.."
CONNS=${CONNS:-10} STREAMS=${STREAMS:-8} DUR=${DUR:-30} FIRST=${FIRST:-1048576}
command -v kdig >/dev/null || { echo "kdig missing: apt-get install knot-dnsutils" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$TMP"' EXIT
if [ -n "${PEERDNS_BIN:-}" ]; then cp "$PEERDNS_BIN" "$TMP/peerdns"; else go build -o "$TMP/peerdns" ./cmd/peerdns; fi
go build -o "$TMP/h3hold" ./bench/proxy/h3hold
rss() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
one() { # label binary
	local d=$TMP/run-$1 up node adm https dns peak=0 r
	mkdir -p "$d"
	"$TMP/h3hold" -upstream -first "$FIRST" > "$d/up.port" 2> "$d/up.err" &
	up=$!
	for _ in $(seq 50); do [ -s "$d/up.port" ] && break; sleep 0.1; done
	"$2" node --data "$d/n" --admin-addr 127.0.0.1:0 --dns-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 \
		--https-addr 127.0.0.1:0 --p2p-addr 127.0.0.1:0 --upstream 127.0.0.1:9 > "$d/n.log" 2>&1 &
	node=$!
	for _ in $(seq 100); do grep -q '^https listening' "$d/n.log" && break; sleep 0.1; done
	adm=$(sed -n 's/^admin listening on //p' "$d/n.log")
	https=$(sed -n 's/^https listening on //p' "$d/n.log")
	dns=$(grep -o 'msg="dns server started"[^ ]* [^ ]* addr=[0-9.:]*' "$d/n.log" | grep -o '[0-9.]*:[0-9]*$' | head -1)
	curl -s -X POST "http://$adm/api/tunnel-create" -H 'Content-Type: application/json' \
		-d "{\"name\":\"hold\",\"port\":$(cat "$d/up.port"),\"domain\":\"bench.p2p\"}" > /dev/null
	for _ in $(seq 100); do # the edge serves the domain once it resolves
		[ -n "$(kdig @"${dns%:*}" -p "${dns##*:}" bench.p2p +short 2>/dev/null)" ] && break; sleep 0.2
	done
	echo "$1: RSS before $(rss "$node") kB"
	"$TMP/h3hold" -addr "$https" -ca "$d/n/ca/root.pem" -conns "$CONNS" -streams "$STREAMS" -dur "${DUR}s" > "$d/client.out" 2>&1 &
	local client=$!
	while kill -0 "$client" 2>/dev/null; do
		r=$(rss "$node"); [ "$r" -gt "$peak" ] && peak=$r
		sleep 1
	done
	echo "$1: RSS peak $peak kB, after $(rss "$node") kB; $(tail -1 "$d/client.out"); $(tail -1 "$d/up.err"); admin API $(curl -s -o /dev/null -w '%{http_code}' "http://$adm/api/health")"
	kill "$node" "$up"
	wait "$node" "$up" 2>/dev/null || true
}
one peerdns "$TMP/peerdns"
[ -z "${OLD_BIN:-}" ] || one old "$OLD_BIN"
