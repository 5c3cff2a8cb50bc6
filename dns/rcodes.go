package dns

import (
	"strconv"
	"sync/atomic"

	"github.com/miekg/dns"
)

// rcodeCounts counts the answers sent by RCODE, extended RCODEs (BADVERS
// 16, BADCOOKIE 23) included: one atomic add per answer on a counter of
// the socket's own shard, so no two readers write the same cache line.
type rcodeCounts [24]atomic.Int64

func (c *rcodeCounts) add(rcode int) {
	if rcode >= 0 && rcode < len(c) {
		c[rcode].Add(1)
	}
}

// AnswersByRcode is how many answers the server sent with each RCODE
// since start, on every transport, keyed by the RCODE's name as
// miekg/dns spells it (NOERROR, NXDOMAIN, SERVFAIL, BADCOOKIE, ...);
// RCODEs never sent are left out. For metrics exporters: it sums the
// readers' counters and takes no lock on the answer paths.
func (s *Server) AnswersByRcode() map[string]int64 {
	s.mu.Lock()
	shards := append([]*shard{&s.slowCnt}, s.shards...)
	s.mu.Unlock()
	var sum [len(rcodeCounts{})]int64
	for _, sh := range shards {
		for i := range sh.rcodes {
			sum[i] += sh.rcodes[i].Load()
		}
	}
	out := map[string]int64{}
	for i, n := range sum {
		if n == 0 {
			continue
		}
		name, ok := dns.RcodeToString[i]
		if !ok {
			name = "RCODE" + strconv.Itoa(i)
		}
		out[name] = n
	}
	return out
}
