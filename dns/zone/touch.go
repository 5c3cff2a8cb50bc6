package zone

import "sync/atomic"

// Touches reports which p2p domains the server answered, for work that
// must follow a lookup (making sure the tunnel clients of a domain's
// subscribed services run) without slowing the answer down. A table
// built with Options.Touches sends a p2p domain's name on C at most once
// per epoch: the answer path pays two atomic loads, and one non-blocking
// channel send the first time a domain is answered in an epoch. Tick
// starts a new epoch (the DNS server ticks every second); a name that
// finds C full is dropped, and sent again in a later epoch.
type Touches struct {
	epoch atomic.Uint32
	ch    chan string
}

// NewTouches makes a Touches whose channel holds up to buffer names.
func NewTouches(buffer int) *Touches {
	t := &Touches{ch: make(chan string, buffer)}
	t.epoch.Store(1) // nodes start at 0: their first answer reports
	return t
}

// C delivers the answered domains (the view's names).
func (t *Touches) C() <-chan string { return t.ch }

// Tick starts a new epoch: each domain is reported again at its next
// answer.
func (t *Touches) Tick() { t.epoch.Add(1) }

// touch reports n's domain if it is a p2p domain not yet reported in
// this epoch.
func (t *Table) touch(n *node) {
	ts := t.touches
	if ts == nil || n.kind != KindP2P {
		return
	}
	e := ts.epoch.Load()
	if n.seen.Load() == e {
		return
	}
	n.seen.Store(e)
	select {
	case ts.ch <- n.domain:
	default:
	}
}
