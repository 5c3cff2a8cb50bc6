#!/usr/bin/env bash
# doh.sh: DNS over HTTPS through the real peerdns node's edge proxy
# (https://<admin domain>/dns-query, RFC 8484 POST) beside dnsdist, a
# well-known DoH front end, loaded with h2load on loopback.
#
#   bench/dns/doh.sh                 # DUR=8 ROUNDS=2 CONNS=32
#
# dnsdist serves DoH in front of the same node's DNS with its packet cache
# on (so nearly every answer is dnsdist's own), over HTTP/1.1 and HTTP/2;
# the edge proxy speaks HTTP/1.1. Each line: queries answered (2xx) over
# the run, queries/s, h2load's mean time per request, and the DoH
# server's own CPU per query. Installs dnsdist and h2load (nghttp2-client)
# with apt-get when missing (root). Binds 127.0.0.1 ports 15397-15399.
set -euo pipefail
DUR=${DUR:-8}
ROUNDS=${ROUNDS:-2}
CONNS=${CONNS:-32}
cd "$(dirname "$0")/../.."
need=()
for t in dnsdist:dnsdist h2load:nghttp2-client openssl:openssl; do
	command -v "${t%%:*}" >/dev/null 2>&1 || need+=("${t##*:}")
done
if [ ${#need[@]} -gt 0 ]; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
W=$(mktemp -d /tmp/peerdns-doh.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$W"
}
trap cleanup EXIT

go build -o "$W/peerdns" ./cmd/peerdns
"$W/peerdns" node --data "$W/node" --admin-addr 127.0.0.1:0 --dns-addr 127.0.0.1:15399 --http-addr 127.0.0.1:0 \
	--https-addr 127.0.0.1:0 --p2p-addr 127.0.0.1:0 --upstream 127.0.0.1:9 >"$W/node.log" 2>&1 &
NODE=$!
PIDS+=("$NODE")
for _ in $(seq 100); do grep -q '^https listening' "$W/node.log" && break; sleep 0.1; done
ADMIN=$(sed -n 's/^admin listening on //p' "$W/node.log")
EDGE=$(sed -n 's/^https listening on //p' "$W/node.log")
curl -fsS -o /dev/null --json '{"name":"host0.bench.test","type":"A","ttl":3600,"data":"10.0.0.1"}' "http://$ADMIN/api/add-local-dns"
# The query: host0.bench.test A, id 0 (RFC 8484 asks for 0), RD set.
python3 - >"$W/q.bin" <<'PY'
import struct, sys
q = struct.pack(">HHHHHH", 0, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l.encode() for l in "host0.bench.test".split(".")) + b"\0" + struct.pack(">HH", 1, 1)
sys.stdout.buffer.write(q)
PY
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/key.pem" -out "$W/cert.pem" \
	-days 2 -subj /CN=doh.bench.test 2>/dev/null
cat >"$W/dnsdist.conf" <<CONF
setLocal("127.0.0.1:15398")
newServer({address="127.0.0.1:15399", checkName="host0.bench.test."})
pc = newPacketCache(10000)
getPool(""):setCache(pc)
addDOHLocal("127.0.0.1:15397", "$W/cert.pem", "$W/key.pem", "/dns-query")
setSecurityPollSuffix("")
CONF
dnsdist --supervised --disable-syslog -C "$W/dnsdist.conf" >"$W/dnsdist.log" 2>&1 &
DNSDIST=$!
PIDS+=("$DNSDIST")
ok() { curl -sk -o /dev/null -w '%{http_code}' -H "Host: $2" -H 'content-type: application/dns-message' --data-binary "@$W/q.bin" "$1"; }
for _ in $(seq 100); do [ "$(ok https://127.0.0.1:15397/dns-query doh.bench.test)" = 200 ] && break; sleep 0.1; done
[ "$(ok "https://$EDGE/dns-query" admin.p2p)" = 200 ] || { echo "peerdns DoH does not answer" >&2; exit 1; }
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
run() { # label url pid h2load-options...
	local c0 c1 out n
	c0=$(cpu "$3")
	out=$(h2load "${@:4}" -D "$DUR" -c "$CONNS" -m 1 -t 2 -d "$W/q.bin" -H 'content-type: application/dns-message' "$2" 2>&1)
	c1=$(cpu "$3")
	n=$(awk '/^requests:/ {print $8}' <<<"$out")
	printf '%-18s %8s answered  %8.0f q/s  mean %-8s  %6.1f us CPU/query\n' "$1" "$n" "$(echo "$n / $DUR" | bc -l)" \
		"$(awk '/time for request:/ {print $6}' <<<"$out")" "$(echo "($c1 - $c0) * 1000000 / $(getconf CLK_TCK) / $n" | bc -l)"
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); peerdns $(git rev-parse --short HEAD); $(dnsdist --version 2>&1 | head -1)"
for r in $(seq 1 "$ROUNDS"); do
	run peerdns-edge-h1 "https://$EDGE/dns-query" "$NODE" --h1 -H :authority:admin.p2p
	run dnsdist-h1 https://127.0.0.1:15397/dns-query "$DNSDIST" --h1
	run dnsdist-h2 https://127.0.0.1:15397/dns-query "$DNSDIST"
done
