package peer

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// knownPeer is a peer we were connected to, saved as peer:<id> in node.db
// so a restart needs no flags.
type knownPeer struct {
	Addrs    []string `json:"addrs"`
	LastSeen int64    `json:"lastSeen"` // unix ms
	// Own are those of Addrs the peer's sessions with us gave (where we
	// reached it, where it came from, its hellos'); the rest came from
	// other peers' lists and samples. Only Own are passed on (peer
	// lists, samples): an address a writer made up for another peer
	// would otherwise go from book to book.
	Own []string `json:"own,omitempty"`
}

// hearsay reports whether addr is one only other peers named for it:
// its dialer gives up on it after giveUpAfter failures (forgetAddr).
func (k *knownPeer) hearsay(addr string) bool { return !slices.Contains(k.Own, addr) }

const knownPrefix = "peer:"

// Caps that keep a hostile peer exchange from growing state without bound.
const (
	maxAddrsPerPeer = 8
	maxKnownPeers   = 1024
	maxDialers      = 256
)

// peerListRepeat: a neighbour gets our peer list when it changed since
// we last sent it one, and otherwise again only every peerListRepeat
// exchange intervals (two minutes by default).
//
// The list is state (whom we are connected to: it tells the neighbour
// which writers' ops it need not relay to us, whom we can introduce or
// relay to, and peers to dial), and in a settled view it does not
// change: sent every interval to every neighbour it was the largest
// part of idle traffic (~1.4 KB/s of 2.7 at 20 writers; a minute apart
// still ~230 B/s of an idle ~1.1 KB/s). It is still repeated now and
// then, not sent on change alone: a receiver whose dialers were all busy
// skips peers it learns, and an introduction that lost its introducer
// waits for the next list to name another. Both are rare (a settled view
// dials nobody) and both are also served by the shuffles and the leaves'
// samples, so two minutes is enough.
const peerListRepeat = 12

// exchange tells every connected peer whom we are connected to, when
// that changed since we last told it or the last time is
// peerListRepeat exchange intervals ago. It runs on the exchange tick and
// at once when a session starts, ends, goes silent or is heard again
// (a silent one is left out of the list): a neighbour relays to us
// neither the ops nor the ids of a writer our last list named
// (session.push) and answers our vectors without them, so a list that
// still named a writer whose session with us ended would keep that
// writer's new ops from us until the next tick (in the fifty-process
// lab, a claim absent on one node for 4-9 s after all others resolved
// it).
func (a *Actor) exchange(c actor.Context) {
	var list []messages.PeerInfo
	var to []*sessionEntry
	var key strings.Builder
	for _, id := range a.upIDs() {
		e := a.sessions[id]
		if e == nil || !e.up {
			continue // lingering or still handshaking
		}
		addrs := []string{}
		if k := a.known[id]; k != nil {
			addrs = append(addrs, k.Own...) // never what others said of it
		}
		list = append(list, messages.PeerInfo{ID: id, Addrs: addrs})
		to = append(to, e)
		key.WriteString(id)
		for _, ad := range addrs {
			key.WriteByte(' ')
			key.WriteString(ad)
		}
		key.WriteByte('\n')
	}
	now, k := a.d.Now(), key.String()
	for _, e := range to {
		if e.peersSent == k && now.Sub(e.peersAt) < peerListRepeat*a.d.ExchangeInterval {
			continue
		}
		if len(list) < 2 && (e.peersSent == "" || e.peersSent == k) {
			// A lone neighbour gains nothing from hearing about
			// itself, but for the one time it must hear that we lost
			// the others our last list to it named: until then it
			// relays us none of their ops.
			continue
		}
		e.peersSent, e.peersAt = k, now
		c.Send(e.pid, &sendPeers{peers: list})
	}
}

// maxLearnAsks bounds the IsWriter questions about learned peers in
// flight; a peer named past it is heard of again at a later exchange.
const maxLearnAsks = 64

// learn takes peers from a peer exchange, a shuffle or a refusal's
// sample, and remembers and dials those we lack. Only writers of our
// network: a session with anyone else is refused, so a dial to an id our
// ledger does not know as a writer can only fail, and the addresses come
// from the peer that named it. A writer that lied in its lists (many
// made-up ids, each with addresses of its choosing) made every node it
// told dial those addresses, over and over, and filled their address
// books: traffic aimed where it chose, paid for by others. So an id is
// taken when the ledger said it is a writer (asked here, at most
// maxLearnAsks at once, the answers kept as the heartbeats keep theirs:
// heartbeat.go) or when we had a session with it; the rest are counted
// (learnedNotWriters) and not dialed; a writer whose addition has not
// reached our ledger yet is asked about again once it has (learnLater).
// from is the neighbour whose peer list it is ("" for a sample): a
// writer taken once the ledger answered may be introduced by it
// (reach.go).
func (a *Actor) learn(c actor.Context, from string, peers []messages.PeerInfo) {
	a.hb.init()
	for _, p := range peers {
		if p.ID == a.self || !messages.ValidPeerID(p.ID) {
			continue
		}
		k := a.known[p.ID]
		switch {
		case a.hb.writers[p.ID] || (k != nil && k.LastSeen != 0):
			a.learnWriter(p)
		case !a.hb.notWriter[p.ID].IsZero():
			a.learnedNotWriters++
			a.learnLater(from, p)
		default:
			a.askLearned(c, from, p)
		}
	}
}

// askLearned asks the ledger whether p is a writer and learns it if so.
func (a *Actor) askLearned(c actor.Context, from string, p messages.PeerInfo) {
	if a.learnAsking == nil {
		a.learnAsking = map[string][]string{}
	}
	if held, ok := a.learnAsking[p.ID]; ok {
		a.learnAsking[p.ID], _ = mergeAddrs(held, p.Addrs, maxAddrsPerPeer)
		return
	}
	if len(a.learnAsking) >= maxLearnAsks {
		a.learnedNotWriters++
		return
	}
	id := p.ID
	a.learnAsking[id], _ = mergeAddrs(nil, p.Addrs, maxAddrsPerPeer)
	f := c.RequestFuture(a.d.Ledger, &messages.IsWriter{ID: id}, a.d.AskTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		addrs := a.learnAsking[id]
		delete(a.learnAsking, id)
		r, ok := res.(*messages.IsWriterReply)
		if err != nil || !ok {
			return // heard of again at a later exchange
		}
		if !r.OK {
			if len(a.hb.notWriter) < maxNotWriters {
				a.hb.notWriter[id] = a.d.Now()
			}
			a.learnedNotWriters++
			a.learnLater(from, messages.PeerInfo{ID: id, Addrs: addrs})
			return
		}
		a.hb.writers[id] = true
		p := messages.PeerInfo{ID: id, Addrs: addrs}
		a.learnWriter(p)
		if from != "" && a.sessions[from] != nil {
			a.reachLearned(from, []messages.PeerInfo{p})
		}
	})
}

// maxLearnLater bounds the peers kept to ask about again once an op
// adds a writer (learnLater); each is kept for notWriterFor.
const maxLearnLater = 64

// laterPeer is a learned peer the ledger did not know as a writer.
type laterPeer struct {
	addrs []string
	at    time.Time
	from  string // the neighbour whose list named it last ("" for a sample): it may introduce us (reach.go)
}

// learnLater keeps p, which the ledger does not know as a writer, for a
// while: a writer's addition can reach our ledger after a list that
// names it (a joiner syncs its ledger after its inviter's list came),
// and lists are sent again only on change or every peerListRepeat
// exchanges. Once an op adds a writer (relearn) the ledger is asked
// again; nothing is dialed before it says yes.
func (a *Actor) learnLater(from string, p messages.PeerInfo) {
	if a.later == nil {
		a.later = map[string]laterPeer{}
	}
	now := a.d.Now()
	if len(a.later) >= maxLearnLater {
		for id, l := range a.later {
			if now.Sub(l.at) >= notWriterFor {
				delete(a.later, id)
			}
		}
	}
	if l, ok := a.later[p.ID]; ok || len(a.later) < maxLearnLater {
		addrs, _ := mergeAddrs(l.addrs, p.Addrs, maxAddrsPerPeer) // every list's, not the last one's
		if from == "" {
			from = l.from
		}
		a.later[p.ID] = laterPeer{addrs: addrs, at: now, from: from}
	}
}

// relearn asks again about the peers learnLater kept (an op added a
// writer: the "not a writer" answers are forgotten), each on behalf of
// the neighbour that named it, so that one may still introduce us: a
// peer whose addition reached our ledger after a neighbour's list named
// it was otherwise never introduced, and two nodes behind NATs that
// could have punched went on through a relay.
func (a *Actor) relearn(c actor.Context) {
	if len(a.later) == 0 {
		return
	}
	now := a.d.Now()
	later := a.later
	a.later = nil
	for id, l := range later {
		if now.Sub(l.at) < notWriterFor {
			a.learn(c, l.from, []messages.PeerInfo{{ID: id, Addrs: l.addrs}})
		}
	}
}

// learnWriter remembers a writer's addresses and dials it when we have
// no session with it.
func (a *Actor) learnWriter(p messages.PeerInfo) {
	if a.known[p.ID] == nil && len(a.dialers) >= maxDialers {
		return // no dialer to spare: hear of it again at a later exchange
	}
	a.remember(p.ID, p.Addrs, false)
	if k := a.known[p.ID]; k != nil && a.sessions[p.ID] == nil {
		for _, addr := range k.Addrs {
			a.startDialer(addr, p.ID, dialOpts{mutual: true, giveUp: k.hearsay(addr), retire: true})
		}
	}
}

// remember merges addresses of a peer into the known list and saves it.
// With seen, addrs are the peer's own (a session with it came up: where
// we reached it, where it came from, what its hello lists): they go
// first, and the addresses held before fill what room is left. Others
// (peer exchange) only fill free room. Any writer's peer list can name
// a peer with as many addresses as an entry holds, none of them real;
// merged behind them, the peer's own new address never got in, so after
// it moved we dialed only those.
func (a *Actor) remember(id string, addrs []string, seen bool) {
	k := a.known[id]
	fresh := k == nil
	if fresh {
		if len(a.known) >= maxKnownPeers && (!seen || !a.forgetOneUnseen()) {
			return
		}
		k = &knownPeer{}
	}
	var changed bool
	if seen && len(addrs) > 0 {
		own, _ := mergeAddrs(nil, addrs, maxAddrsPerPeer)
		own, _ = mergeAddrs(own, k.Own, maxAddrsPerPeer)
		all, _ := mergeAddrs(slices.Clone(own), k.Addrs, maxAddrsPerPeer)
		changed = !slices.Equal(all, k.Addrs) || !slices.Equal(own, k.Own)
		k.Addrs, k.Own = all, own
	} else {
		k.Addrs, changed = mergeAddrs(k.Addrs, addrs, maxAddrsPerPeer)
	}
	if fresh {
		if len(k.Addrs) == 0 && !seen {
			return // nowhere to reach it: not worth remembering
		}
		a.known[id] = k
	}
	if seen {
		k.LastSeen = a.d.Now().UnixMilli()
		changed = true
	}
	if !changed {
		return
	}
	b, _ := json.Marshal(k)
	if err := a.d.Node.Set(knownPrefix+id, string(b)); err != nil {
		a.log.Warn("cannot save known peer", "peer", short(id), "err", err)
	}
}

// forgetOneUnseen makes room in a full book for a peer a session came up
// with: it forgets a peer we never reached (and stops dialing it), and
// says whether there was one. Any writer's peer lists can fill the book
// with such peers faster than their dialers give up on them; a peer we
// were connected to was kept out for as long as that went on.
func (a *Actor) forgetOneUnseen() bool {
	for id, k := range a.known {
		if k.LastSeen != 0 {
			continue
		}
		a.retireDialersOf(id)
		delete(a.known, id)
		if err := a.d.Node.Delete(knownPrefix + id); err != nil {
			a.log.Warn("cannot forget known peer", "peer", short(id), "err", err)
		}
		return true
	}
	return false
}

// forgetMoved drops addr from id's entry once a dial of its learned
// dialer found another key there: the address serves another node now
// (the peer moved, and its host or NAT mapping went to someone else).
// Even one of the peer's own would otherwise be dialed for good, a
// failed handshake with that node every backoff, and count as dialing
// any peer whose address it is (refillDialers), so its new owner would
// not be dialed there. The peer's sessions give its addresses again.
// Dialers we were told to keep (bootstrap, a relayed peer's own
// addresses, an inviter) are left running.
func (a *Actor) forgetMoved(id, addr string) {
	e, k := a.dialers[addr], a.known[id]
	if e == nil || !e.retire || e.id != id || k == nil || !slices.Contains(k.Addrs, addr) {
		return
	}
	a.dropDialer(addr)
	drop := func(s string) bool { return s == addr }
	k.Addrs, k.Own = slices.DeleteFunc(k.Addrs, drop), slices.DeleteFunc(k.Own, drop)
	b, _ := json.Marshal(k)
	if err := a.d.Node.Set(knownPrefix+id, string(b)); err != nil {
		a.log.Warn("cannot update known peer", "peer", short(id), "err", err)
	}
	a.log.Info("forgot a peer address that another node answers at", "peer", short(id), "addr", addr)
}

// onDialGaveUp forgets the address a dialer gave up on, and drops the
// dialer unless another took its place at that address meanwhile (one
// for another peer, started after the address changed hands).
func (a *Actor) onDialGaveUp(m *dialGaveUp) {
	if a.dialers[m.addr] == m.e {
		a.dropDialer(m.addr)
	}
	a.forgetAddr(m.peer, m.addr)
}

// forgetAddr drops an address that never worked from every peer that
// lists it only on others' word (dialers are per address) but the one
// whose own dialer is at it now, and a peer we never saw once it has no
// address left.
func (a *Actor) forgetAddr(id, addr string) {
	for pid, k := range a.known {
		if !k.hearsay(addr) || !slices.Contains(k.Addrs, addr) {
			continue
		}
		if e := a.dialers[addr]; e != nil && e.id == pid {
			continue // its own dialer there has not given up
		}
		k.Addrs = slices.DeleteFunc(k.Addrs, func(s string) bool { return s == addr })
		var err error
		if len(k.Addrs) == 0 && k.LastSeen == 0 {
			delete(a.known, pid)
			err = a.d.Node.Delete(knownPrefix + pid)
		} else {
			b, _ := json.Marshal(k)
			err = a.d.Node.Set(knownPrefix+pid, string(b))
		}
		if err != nil {
			a.log.Warn("cannot update known peer", "peer", short(pid), "err", err)
		}
	}
	a.log.Info("gave up on a peer address that never answered", "peer", short(id), "addr", addr)
}

func (a *Actor) loadKnown() {
	a.known = map[string]*knownPeer{}
	kvs, err := a.d.Node.List(knownPrefix)
	if err != nil {
		a.log.Warn("cannot read known peers", "err", err)
		return
	}
	for _, kv := range kvs {
		id := strings.TrimPrefix(kv.Key, knownPrefix)
		var k knownPeer
		if !messages.ValidPeerID(id) || json.Unmarshal([]byte(kv.Value), &k) != nil {
			a.log.Warn("ignoring bad known peer record", "key", kv.Key)
			continue
		}
		if k.LastSeen != 0 && k.Own == nil {
			// Saved before Own was kept: its addresses count as the
			// peer's own, as they did then.
			k.Own = slices.Clone(k.Addrs)
		}
		if id != a.self {
			a.known[id] = &k
		}
	}
}
