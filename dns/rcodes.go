package dns

import (
	"strconv"

	"github.com/miekg/dns"
)

// AnswersByRcode is how many answers the server sent with each RCODE
// since start, on every transport, keyed by the RCODE's name as
// miekg/dns spells it (NOERROR, NXDOMAIN, SERVFAIL, BADCOOKIE, ...);
// RCODEs never sent are left out. It sums the per-source counters of
// metrics.go (AnswerCounts), so the answer paths count once.
func (s *Server) AnswersByRcode() map[string]int64 {
	out := map[string]int64{}
	for _, c := range s.AnswerCounts() {
		out[rcodeName(c.Rcode)] += c.Count
	}
	return out
}

// rcodeName is the name of an rcode slot of the answer counters.
func rcodeName(i int) string {
	if i == RcodeOther {
		return "other"
	}
	if name, ok := dns.RcodeToString[i]; ok {
		return name
	}
	return "RCODE" + strconv.Itoa(i)
}
