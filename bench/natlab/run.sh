#!/bin/sh
# NAT lab benchmark: every scenario of bench/natlab (EIM+EIM, public+EIM,
# EIM+symmetric, symmetric+symmetric, EIM+no UDP) TRIES times (default 20), each in a fresh lab of network
# namespaces with real `peerdns node` processes. Needs root, iproute2 and
# nftables. Prints one table row per scenario.
set -eu
cd "$(dirname "$0")/../.."
# NATLAB_SCENARIOS=eim-eim,public-eim picks scenarios.
NATLAB_TRIES="${1:-20}" exec go test -count=1 -timeout 60m -run 'TestNATLabBench$' -v ./bench/natlab/ | grep -E '^\s+bench_test.go|^(ok|FAIL|---)'
