// Package stack grows a goroutine's stack early, while it is shallow.
//
// A goroutine starts on a small stack; when a call would overflow it the
// runtime allocates one twice the size and copies the old one over,
// walking every frame on it to fix its pointers. A goroutine that goes
// deep (a request through fasthttp's head writer and an upstream
// exchange, an actor's message through CBOR decoding and a signature
// check) is copied several times, each copy walking a deeper stack, and
// short-lived goroutines pay it again each time: 6-8% of the edge's CPU
// under h2load, 4-5% of fifty nodes' in a burst of claims (profiles,
// runtime.newstack). Grow asks for the stack such a goroutine ends up
// needing at its start, so there is one copy, of a few frames.
//
// It does not depend on the machine: the stack a call chain needs is the
// same on 2 cores or 16, and the sizes up to 16 KiB come from the
// runtime's per-P caches, so goroutines on many cores do not contend for
// them.
package stack

// Grow grows the calling goroutine's stack to 16 KiB, the largest size
// the runtime hands out from its per-P caches, unless it is that large
// already. Call it first thing in a goroutine that will go deep.
//
//go:noinline
func Grow() byte {
	if touch { // never: the frame is asked for, not written
		var b [frame]byte
		return last(b[:])
	}
	return 0
}

// touch is false: Grow's frame is reserved, and the stack grown to hold
// it, without its 10 KiB being zeroed (the compiler zeroes the array
// where it is declared, inside the branch never taken).
var touch = false

// frame is the frame Grow asks for: with what is below it, the stack
// comes out at 16 KiB.
const frame = 10 << 10

//go:noinline
func last(b []byte) byte { return b[len(b)-1] }

// Dispatcher runs an actor's mailbox the way protoactor's default
// dispatcher does, on a goroutine of its own started when messages
// arrive for an idle mailbox, and grows that goroutine's stack first.
// Its value is the throughput: the messages a mailbox handles before it
// lets other goroutines run (protoactor's default is 300). Pass it with
// actor.WithDispatcher.
type Dispatcher int

// Actors is the dispatcher for actors whose messages go deep.
const Actors Dispatcher = 300

// Schedule runs fn on a new goroutine with a grown stack.
func (d Dispatcher) Schedule(fn func()) {
	go func() {
		Grow()
		fn()
	}()
}

// Throughput is the messages a mailbox handles in one go.
func (d Dispatcher) Throughput() int { return int(d) }
