package transport

import (
	"runtime"

	"golang.org/x/net/ipv4"
)

// Reading yields to the connections.
//
// quic-go reads the socket in one goroutine (a batch of up to 8 datagrams
// per recvmmsg) and queues each packet on its connection, whose own
// goroutine decrypts and handles it; a connection holds at most 256
// packets not handled yet and drops the rest. The reading goroutine does
// not wait for the connection: it reads on while the socket has
// datagrams. On a node with one P (internal/procs: a node doing less than
// a core's work) the connection's goroutine then runs only once the
// reader has emptied the socket, so a burst the peer sent while this
// process waited for a CPU (a congestion window: 300 KB and more on a
// busy loopback) is read whole before any of it is handled, and what
// passes 256 packets is dropped. The sender counts it lost, cuts its
// window and sends again. Measured through a tunnel carrying 64 KiB
// answers on a shared 2-vCPU machine: one packet in 3,000-6,000 lost, all
// to this queue (the socket dropped none), and the congestion window held
// at 290-360 KB, which at that machine's 1-3 ms round trip is the
// tunnel's whole rate.
//
// So the reader yields its P every yieldEvery batches: the connection's
// goroutine, made runnable by them, handles them before more are read,
// and a burst waits in the socket's buffer (8 MB, quic-go sets it), which
// holds it, instead of in the connection's queue, which drops it. Same
// run with it: no packet lost, the window at 1.1 MB, the CPU per answer
// unchanged. Yielding after every batch also lost nothing, but the
// connection then handled 8 packets at a time and acknowledged each
// handful: a quarter more CPU per answer.
//
// lossyConn gives quic-go this reader: quic-go reads through the
// ReadBatch of the connection it is given when it has one.
func (c *lossyConn) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	n, err := c.batch.ReadBatch(ms, flags)
	// Only quic-go's reading goroutine calls ReadBatch: batches needs
	// no lock.
	c.batches++
	if c.batches >= yieldEvery {
		c.batches = 0
		runtime.Gosched()
	}
	return n, err
}

// yieldEvery: up to 64 packets are read between yields, a quarter of
// what a connection queues (256) before it drops.
const yieldEvery = 8
