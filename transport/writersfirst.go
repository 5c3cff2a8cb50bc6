package transport

import "peerdns/internal/procs"

// A stream write wakes quic-go's connection loop (a channel send to the
// loop parked in its select), and Go's scheduler puts a goroutine woken
// that way next in line on the waker's P, ahead of the goroutines
// already waiting there. On one P (the node's GOMAXPROCS governor keeps
// one while it uses less than a core: internal/procs) every request
// through a tunnel would then be a packet of its own: the edge's
// handlers and the tunnel's pipes woken together by one netpoll write
// their streams one after another, and the loop would run after each
// write and send that stream's frame alone (1.1 UDP sends a request on
// each node at 100 B, measured without writersFirst).
//
// writersFirst, called after a write, wakes a parked goroutine of its
// own. That one takes the place next in line, and the connection's loop
// moves to the back of the P's queue: the writers already waiting write
// their streams first, and the loop packs their frames into one packet
// (0.24-0.39 sends a request measured under the same load: fewer
// packets to encrypt, send, receive and acknowledge). The woken
// goroutine only parks again. A lone write waits for nothing but that
// one switch (well under a microsecond). It matters for the writes
// quic-go takes into its buffer and returns from at once (up to about
// a packet, 1,452 bytes: a small request or answer); a larger one
// returns only once the loop has packed it, and then there is nothing
// left to put in order.
//
// Only on one P: with more, a woken goroutine also wakes an idle P's
// thread, which takes the loop at once anyway, and each wake-up is the
// cost the governor keeps the node at one P to avoid. So on a 16-core
// machine under load (the governor at every core) this does nothing.
func writersFirst() {
	if !procs.OneP() {
		return
	}
	select {
	case nudge <- struct{}{}:
	default: // woken already and not yet run: no second wake-up
	}
}

// nudge is received by writersFirst's goroutine, started once.
var nudge = func() chan struct{} {
	c := make(chan struct{})
	go func() {
		for range c {
		}
	}()
	return c
}()
