//go:build linux

package main

import (
	"fmt"
	"sync"
	"time"
)

// work is what the fleet's nodes did, summed over the running nodes from
// their counters (admin API): the step between two readings is the work
// a step cost, to set beside its CPU.
type work struct {
	evaluations int64 // settled consensus evaluations (resolved, no quorum, tied)
	sigChecks   int64 // op signatures the peer sessions checked
	sigReused   int64 // taken on another session's check of the same op
	suspicions  int64 // suspicions the nodes signed
	sessionsUp  int64 // peer sessions established
	grafts      int64 // ops asked of a lazy neighbour after its announcement
	prunes      int64 // links made lazy after a duplicate
	opsSent     int64 // ops sent to neighbours
	opsRepaired int64 // of those, sent because a neighbour's vector, want or graft showed it lacked them
	opsGrafted  int64 // of those, asked for by a graft
	opsReceived int64 // ops received from neighbours
	opsDup      int64 // of those, ops the ledger had applied already
	idsUnknown  int64 // announced ids and ops naming a writer by a short id a node could not resolve
}

func (w work) minus(o work) work {
	return work{w.evaluations - o.evaluations, w.sigChecks - o.sigChecks, w.sigReused - o.sigReused, w.suspicions - o.suspicions, w.sessionsUp - o.sessionsUp, w.grafts - o.grafts, w.prunes - o.prunes,
		w.opsSent - o.opsSent, w.opsRepaired - o.opsRepaired, w.opsGrafted - o.opsGrafted, w.opsReceived - o.opsReceived, w.opsDup - o.opsDup, w.idsUnknown - o.idsUnknown}
}

func (w work) String() string {
	return fmt.Sprintf("%d evaluations, %d op signature checks (%d more taken on another session's check), %d suspicions signed, %d sessions established, %d grafts, %d prunes; ops sent %d (%d of them repairs, %d of those grafted), received %d (%d already applied); %d short ids unresolved",
		w.evaluations, w.sigChecks, w.sigReused, w.suspicions, w.sessionsUp, w.grafts, w.prunes, w.opsSent, w.opsRepaired, w.opsGrafted, w.opsReceived, w.opsDup, w.idsUnknown)
}

// settledCounters reads the counters until two readings a session
// report apart (sessions hand their counts to the node on each tick, 1
// s) agree, at most settleReads times: read at once, a short burst's
// last second of work (at 8 nodes, all of it) was not counted yet.
func (f *fleet) settledCounters() work {
	w := f.counters()
	tick := time.NewTicker(reportEvery)
	defer tick.Stop()
	for range settleReads {
		<-tick.C
		next := f.counters()
		if next == w {
			break
		}
		w = next
	}
	return w
}

const (
	reportEvery = 1100 * time.Millisecond // the nodes' tick (peer.Deps.TickInterval) and a margin
	settleReads = 8
)

// counters reads every running node's counters (a node that does not answer
// adds nothing).
func (f *fleet) counters() work {
	var (
		mu  sync.Mutex
		sum work
		wg  sync.WaitGroup
	)
	for i := range f.nodes {
		if f.nodes[i].get() == nil {
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var m struct {
				Resolutions    int64 `json:"resolutions"`
				QuorumFailures int64 `json:"quorumFailures"`
				Ties           int64 `json:"ties"`
			}
			var d struct {
				Summary struct {
					OpsSent      int64 `json:"opsSent"`
					OpsRepaired  int64 `json:"opsRepaired"`
					OpsGrafted   int64 `json:"opsGrafted"`
					OpsReceived  int64 `json:"opsReceived"`
					OpsDuplicate int64 `json:"opsDuplicate"`
					Overlay      struct {
						OpSigChecks    int64 `json:"opSignatureChecks"`
						OpSigReused    int64 `json:"opSignatureReused"`
						SuspicionsSent int64 `json:"suspicionsSent"`
						SessionsUp     int64 `json:"sessionsUp"`
						Grafts         int64 `json:"grafts"`
						Prunes         int64 `json:"prunes"`
						IDsUnknown     int64 `json:"idsUnknown"`
					} `json:"overlay"`
				} `json:"summary"`
			}
			if f.getJSON(i, "/api/consensus/metrics", &m) != nil || f.getJSON(i, "/api/diagnostics/invites", &d) != nil {
				return
			}
			o := d.Summary.Overlay
			mu.Lock()
			sum.evaluations += m.Resolutions + m.QuorumFailures + m.Ties
			sum.sigChecks += o.OpSigChecks
			sum.sigReused += o.OpSigReused
			sum.suspicions += o.SuspicionsSent
			sum.sessionsUp += o.SessionsUp
			sum.grafts += o.Grafts
			sum.prunes += o.Prunes
			sum.opsSent += d.Summary.OpsSent
			sum.opsRepaired += d.Summary.OpsRepaired
			sum.opsGrafted += d.Summary.OpsGrafted
			sum.opsReceived += d.Summary.OpsReceived
			sum.opsDup += d.Summary.OpsDuplicate
			sum.idsUnknown += o.IDsUnknown
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	return sum
}
