package peer

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"peerdns/messages"
	"peerdns/transport"
)

// maxIssues bounds the connection-issue history kept for diagnostics.
const maxIssues = 64

// diagnostics are the supervisor's counters since start. attempts is
// bumped by dialer goroutines; the rest only from Receive.
type diagnostics struct {
	started                                         time.Time
	attempts                                        atomic.Int64
	dialed, inbound, failed, refused                int64
	invitesCreated, invitesRedeemed, invitesRefused int64
	tunnelsRefused                                  int64                      // peer announcements that failed validation
	stalled                                         int64                      // sessions closed for a frame begun and not finished, or long silence
	issues                                          []messages.ConnectionIssue // oldest first
}

func (d *diagnostics) attempt() { d.attempts.Add(1) }

func (d *diagnostics) issue(now time.Time, i messages.ConnectionIssue) {
	i.Time = now.UnixMilli()
	if len(d.issues) >= maxIssues {
		copy(d.issues, d.issues[1:])
		d.issues = d.issues[:maxIssues-1]
	}
	d.issues = append(d.issues, i)
}

// diagnostics builds the GET /api/diagnostics/invites view from what the
// supervisor actually saw.
func (a *Actor) diagnostics() *messages.PeerDiagnosticsReply {
	up := a.upIDs()
	tot := a.counts() // sessions that ended count too
	var peers []messages.PeerDiag
	ids := map[string]bool{}
	for id := range a.known {
		ids[id] = true
	}
	for id := range a.sessions {
		ids[id] = true
	}
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	for _, id := range sorted {
		p := messages.PeerDiag{ID: id, State: "disconnected", Addrs: []string{}}
		if k := a.known[id]; k != nil {
			p.Addrs = append(p.Addrs, k.Addrs...)
			p.LastSeen = k.LastSeen
		}
		if e := a.sessions[id]; e != nil {
			p.State = "handshaking"
			if e.up {
				p.State = "connected"
				p.ConnectedAt = e.upAt.UnixMilli()
			}
			p.Direction = "inbound"
			if e.conn.Outbound() {
				p.Direction = "outbound"
			}
			p.RemoteAddr = e.conn.RemoteAddr().String()
			if !e.stats.lastSeen.IsZero() {
				p.LastSeen = e.stats.lastSeen.UnixMilli()
			}
			p.RTTMillis = float64(e.stats.rtt.Microseconds()) / 1000
			p.OpsSent, p.OpsReceived, p.OpsDup = e.stats.opsSent, e.stats.opsReceived, e.stats.opsDup
			p.AnnouncedTunnels = a.d.Mesh.announcedBy(id)
			p.Feeds = e.up && !e.stats.pruned
			p.Path, p.Via = e.path, e.via
			pathDiag(&p, e.conn)
			if ls, ok := e.conn.(transport.LinkStatser); ok {
				q := ls.LinkStats()
				p.QUIC = &q
			}
		}
		peers = append(peers, p)
	}
	issues := make([]messages.ConnectionIssue, len(a.diag.issues))
	for i := range a.diag.issues { // newest first
		issues[i] = a.diag.issues[len(a.diag.issues)-1-i]
	}
	return &messages.PeerDiagnosticsReply{
		Ready: a.netKnown,
		Summary: messages.PeerDiagSummary{
			PeerID:                     a.self,
			Network:                    a.network,
			IsMaster:                   a.network != "" && a.root == a.self,
			Joining:                    a.joinInv != nil,
			ListenAddr:                 a.d.Endpoint.Addr().String(),
			ConnectedPeers:             len(up),
			KnownPeers:                 len(a.known),
			ConnectionAttempts:         a.diag.attempts.Load(),
			SuccessfulDials:            a.diag.dialed,
			FailedAttempts:             a.diag.failed,
			InboundAccepted:            a.diag.inbound,
			Refused:                    a.diag.refused,
			RefusedPending:             a.d.Endpoint.RefusedInbound(),
			InvitesCreated:             a.diag.invitesCreated,
			InvitesRedeemed:            a.diag.invitesRedeemed,
			InvitesRefused:             a.diag.invitesRefused,
			OpsSent:                    tot.opsSent,
			OpsReceived:                tot.opsReceived,
			OpsDuplicate:               tot.opsDup,
			OpsRepaired:                tot.opsRepaired,
			OpsGrafted:                 tot.opsGrafted,
			GapRepairs:                 tot.wants,
			RefusedTunnelAnnouncements: a.diag.tunnelsRefused,
			StalledSessions:            a.diag.stalled,
			LearnedNotWriters:          a.learnedNotWriters,
			Reach:                      a.reachView(),
			Paths:                      a.pathCounters(),
			Overlay:                    a.overlayDiag(),
		},
		Peers:            peers,
		Recommendations:  a.recommendations(up, issues),
		ConnectionIssues: issues,
	}
}

// recommendations turns the state into advice a user can act on.
func (a *Actor) recommendations(up []string, issues []messages.ConnectionIssue) []string {
	var out []string
	addr := a.d.Endpoint.Addr().String()
	if a.joinErr != "" {
		out = append(out, "The join invite cannot be used ("+a.joinErr+"): ask a member for a new one with `peerdns invite`.")
	}
	if a.joinInv != nil {
		out = append(out, fmt.Sprintf("Waiting to join through %s at %s; check that this address is reachable over UDP.", short(a.joinInv.Inviter), strings.Join(a.joinInv.Addrs, ", ")))
	}
	for _, i := range issues {
		if strings.HasPrefix(i.Reason, messages.RefuseInviteUsed) || strings.HasPrefix(i.Reason, messages.RefuseInviteExpired) {
			out = append(out, "An invite was refused ("+i.Reason+"); invites work once and expire: create a new one.")
			break
		}
	}
	if strings.HasPrefix(addr, "127.") || strings.HasPrefix(addr, "[::1]") {
		out = append(out, "The peer endpoint listens on loopback ("+addr+") only: peers on other hosts cannot connect. Use --p2p-addr 0.0.0.0:7740.")
	}
	if len(up) == 0 && a.network != "" {
		if len(a.known) == 0 && len(a.bootstrap) == 0 {
			out = append(out, "No peers known yet: create an invite (`peerdns invite` or POST /api/invites) and start another node with --join INVITE.")
		} else {
			out = append(out, "No peer is connected although peers are known: check that their UDP ports are reachable and that they are running.")
		}
	}
	out = append(out, a.reachAdvice()...)
	if n := a.d.Endpoint.RefusedInbound(); n > 0 {
		out = append(out, fmt.Sprintf("%d inbound connections were refused because too many unauthenticated ones were open at once: someone may be flooding the peer port.", n))
	}
	failing := 0
	for _, i := range issues {
		if i.Kind == "dial" {
			failing++
		}
	}
	if failing > 0 && len(up) > 0 {
		out = append(out, fmt.Sprintf("%d recent dial failures: some known addresses are stale or unreachable.", failing))
	}
	if len(out) == 0 {
		out = append(out, "Peer network is healthy.")
	}
	return out
}
