package ledger

import (
	"strconv"

	"peerdns/messages"
)

// appendListing appends entries as the JSON array of GET
// /api/resolved-domains: the fields, order, nulls and omissions
// encoding/json makes of messages.DomainEntry (TestListingJSONAsTheCodec
// holds the two to each other), written by hand because the listing is
// encoded inside the ledger actor after every change: with 10,000
// domains encoding/json's reflection was two thirds of that rebuild
// (BenchmarkListingRebuild10k). It appends to ends where each entry's
// JSON ends in b (listing.go copies unchanged entries by them).
func appendListing(b []byte, entries []messages.DomainEntry, ends []int) ([]byte, []int) {
	b = append(b, '[')
	for i := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendEntry(b, &entries[i])
		ends = append(ends, len(b))
	}
	return append(b, ']'), ends
}

func appendEntry(b []byte, e *messages.DomainEntry) []byte {
	b = append(b, `{"domain":`...)
	b = messages.AppendJSONString(b, e.Domain)
	b = append(b, `,"hash":`...)
	b = messages.AppendJSONString(b, e.Hash)
	b = append(b, `,"isLocal":`...)
	b = strconv.AppendBool(b, e.IsLocal)
	b = append(b, `,"isOwner":`...)
	b = strconv.AppendBool(b, e.IsOwner)
	if cs := e.ConsensusState; cs != nil {
		b = append(b, `,"consensusState":`...)
		b = appendConsensus(b, cs)
	}
	b = append(b, `,"consensusStatus":`...)
	b = messages.AppendJSONString(b, e.ConsensusStatus)
	b = append(b, `,"services":`...)
	if e.Services == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, s := range e.Services {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"serviceName":`...)
			b = messages.AppendJSONString(b, s.ServiceName)
			b = append(b, `,"key":`...)
			b = messages.AppendJSONString(b, s.Key)
			b = append(b, `,"port":`...)
			b = strconv.AppendInt(b, int64(s.Port), 10)
			b = append(b, `,"protocol":`...)
			b = messages.AppendJSONString(b, s.Protocol)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(e.Clients) > 0 {
		b = append(b, `,"clients":[`...)
		for i, c := range e.Clients {
			if i > 0 {
				b = append(b, ',')
			}
			b = messages.AppendJSONString(b, c)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendConsensus(b []byte, cs *messages.ConsensusState) []byte {
	b = append(b, `{"status":`...)
	b = messages.AppendJSONString(b, cs.Status)
	b = append(b, `,"hash":`...)
	b = appendStringPtr(b, cs.Hash)
	b = append(b, `,"resolvedClaimant":`...)
	b = appendStringPtr(b, cs.ResolvedClaimant)
	b = append(b, `,"voteCounts":`...)
	if cs.VoteCounts == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		for i, k := range sortedKeys(cs.VoteCounts) {
			if i > 0 {
				b = append(b, ',')
			}
			b = messages.AppendJSONString(b, k)
			b = append(b, ':')
			b = strconv.AppendInt(b, int64(cs.VoteCounts[k]), 10)
		}
		b = append(b, '}')
	}
	b = append(b, `,"activePeers":`...)
	b = strconv.AppendInt(b, int64(cs.ActivePeers), 10)
	b = append(b, `,"quorumMet":`...)
	b = strconv.AppendBool(b, cs.QuorumMet)
	b = append(b, `,"minVotes":`...)
	b = strconv.AppendInt(b, int64(cs.MinVotes), 10)
	b = append(b, `,"totalVotes":`...)
	b = strconv.AppendInt(b, int64(cs.TotalVotes), 10)
	b = append(b, `,"lastResolution":`...)
	if cs.LastResolution == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *cs.LastResolution, 10)
	}
	if cs.Error != "" {
		b = append(b, `,"error":`...)
		b = messages.AppendJSONString(b, cs.Error)
	}
	return append(b, '}')
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return messages.AppendJSONString(b, *s)
}
