// Package udpgro lets quic-go read UDP datagrams the kernel coalesced
// (UDP generic receive offload, Linux 5.0 and later) and hands them on
// one QUIC packet per message, as quic-go expects them.
//
// Why: quic-go sends with GSO (one sendmsg carries up to 14 packets of
// 1,452 bytes as one buffer the kernel or the NIC cuts up) but reads one
// packet per message (recvmmsg, 8 at a time), and it has no receive
// offload (quic-go/quic-go#3838, open). Without it the receiving kernel
// runs every packet through its UDP path and queues it on the socket on
// its own; on loopback and veth pairs, where a GSO send reaches the
// receiving socket as one buffer, the kernel even cuts that buffer into
// packets for a socket that cannot take it whole (udp_rcv_segment, on
// the sender's CPU). With UDP_GRO set on the socket a GSO send arrives
// as the one buffer it was, and packets of one flow that arrive from a
// NIC back to back are merged by the kernel's GRO into one, up to 64
// KiB: a bulk transfer takes a few system calls and a few socket queue
// entries where it took one per packet. Tailscale, quinn, msquic and
// Envoy's QUIC read this way.
//
// How quic-go is given it: quic-go reads through a connection's own
// ReadBatch when the net.PacketConn handed to its Transport has one
// (its documented hook; otherwise it wraps the socket in x/net's
// ipv4.PacketConn). Reader.ReadBatch reads whole coalesced datagrams
// into 64 KiB buffers of its own (a smaller buffer would truncate a
// merged datagram and lose its packets), cuts each at its segment size
// (the UDP_GRO control message: every segment that size, the last one
// possibly shorter) and copies each segment into one of quic-go's
// messages, with the datagram's address and its control messages (ECN,
// packet info) less the UDP_GRO one, so quic-go sees exactly what it
// would have read packet by packet. Segments beyond the messages quic-go
// passed wait for its next call. The copy (1.4 KB per packet) costs far
// less than the kernel's per-packet work it replaces.
//
// Where UDP_GRO cannot be set (another OS, an old kernel) or
// PEERDNS_DISABLE_GRO is true, ReadBatch is x/net's ReadBatch on the
// socket, what quic-go does on its own, with the yield below.
//
// Memory: GroBatch buffers of 64 KiB per socket, 512 KiB, mapped from
// the kernel rather than taken from Go's heap (which zeroes what it
// reuses): a page is resident only once a datagram reached it, so a
// node whose packets are small keeps a few pages of them (measured: 0.3-1
// MB more RSS at start from Go's heap for the two sockets, none mapped).
// They are unmapped once the Reader is unreachable.
//
// It does not depend on the machine's size: one socket, read by one
// goroutine (quic-go's), whatever the cores.
//
// The reader lets the connections run. quic-go's reading goroutine hands
// each packet to its connection's queue, which drops what passes 256
// packets, and the connection's own goroutine empties it. Where the two
// share a P (a node the governor holds at one, or a machine whose cores
// are all busy) the reader keeps the P while the socket has data: a
// burst that waited in the socket buffer while the process waited for a
// CPU (7 MiB of it, quic-go sizes the buffer so) is read whole and its
// tail dropped, the sender counts the drops as loss and its congestion
// window stays small. So ReadBatch gives up the P (runtime.Gosched)
// once it has handed on YieldAfter packets since it last did. Measured
// through a tunnel on two nodes (64 KiB answers, 32 connections): the
// sender counted 5-20 packets a second lost (one in 20,000) and held
// its window near 300-500 KB without the yield and with it every 128
// packets (half the queue); every 64 or 32, none, and the window grew
// to 1.8-2.1 MB; the rate rose by 5-15% (docs/bench-history.md). Go's
// scheduler takes a goroutine from its global queue first once in 61
// schedules, so now and then a yield comes straight back to the
// reader: at 64 the next one still comes before the queue is full, at
// 128 it does not. A Gosched with nothing else runnable returns at once;
// on a machine with many cores it is one call per 64 packets, and the
// connections' goroutines run on other Ps either way.
package udpgro

import (
	"net"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"

	"golang.org/x/net/ipv4"
)

// GroBatch is the number of datagrams read per system call: quic-go's
// own batch, so a burst of small packets from many peers (which the
// kernel does not merge) takes no more calls than it did. Each buffer
// holds up to 64 KiB, about 45 QUIC packets.
const GroBatch = 8

// YieldAfter is how many packets ReadBatch hands on before it gives up
// the P (see the package doc): a quarter of quic-go's per-connection
// queue of received packets, twice what the connection takes from it
// between two of its sends.
const YieldAfter = 64

// maxDatagram is the largest UDP payload, what a merged datagram can
// reach; bufSize is the room each datagram gets.
const (
	maxDatagram = 1<<16 - 1
	bufSize     = 1 << 16
)

// oobSize holds the control messages of one datagram: ECN (IP_TOS or
// IPV6_TCLASS), packet info for either family, and UDP_GRO.
const oobSize = 256

// Reader reads a UDP socket for quic-go (see the package doc). One
// goroutine calls ReadBatch at a time, as quic-go does.
type Reader struct {
	batch *ipv4.PacketConn
	gro   bool

	msgs []ipv4.Message // ours: whole datagrams
	n    int            // datagrams in msgs from the last read
	i    int            // the datagram being cut
	off  int            // where its next segment starts
	data []byte         // msgs[i]'s payload, whole segments
	seg  int            // msgs[i]'s segment size
	oob  []byte         // msgs[i]'s control messages less UDP_GRO

	handed int // packets handed on since the last yield

	// Merged counts datagrams that carried more than one packet.
	Merged atomic.Int64
}

// New returns a Reader for c, with UDP_GRO on where the kernel allows
// and PEERDNS_DISABLE_GRO does not forbid it.
func New(c *net.UDPConn) *Reader {
	r := &Reader{batch: ipv4.NewPacketConn(c)}
	if off, err := strconv.ParseBool(os.Getenv("PEERDNS_DISABLE_GRO")); err == nil && off {
		return r
	}
	if !setGRO(c, true) {
		return r
	}
	bufs := buffers(r, GroBatch*bufSize)
	if bufs == nil {
		setGRO(c, false) // merged datagrams would be cut short by packet-sized reads
		return r
	}
	r.gro = true
	r.msgs = make([]ipv4.Message, GroBatch)
	for i := range r.msgs {
		r.msgs[i].Buffers = [][]byte{bufs[i*bufSize : i*bufSize+maxDatagram : i*bufSize+maxDatagram]}
		r.msgs[i].OOB = make([]byte, oobSize)
	}
	r.oob = make([]byte, 0, oobSize)
	return r
}

// GRO reports whether the socket delivers coalesced datagrams.
func (r *Reader) GRO() bool { return r.gro }

// ReadBatch fills ms with packets, at least one (none when ms is
// empty), waiting for the socket when none is left over from the last
// read.
func (r *Reader) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	if r.handed >= YieldAfter {
		r.handed = 0
		runtime.Gosched()
	}
	if !r.gro {
		n, err := r.batch.ReadBatch(ms, flags)
		r.handed += n
		return n, err
	}
	if len(ms) == 0 {
		return 0, nil // no room: nothing read, nothing lost
	}
	k := 0
	for k == 0 {
		if r.i >= r.n {
			n, err := r.batch.ReadBatch(r.msgs, flags)
			if err != nil || n == 0 {
				return 0, err
			}
			r.n, r.i = n, 0
			r.start()
		}
		for k < len(ms) && r.i < r.n {
			if r.off < len(r.data) {
				end := min(r.off+r.seg, len(r.data))
				out := &ms[k]
				out.N = copy(out.Buffers[0], r.data[r.off:end])
				if len(r.oob) <= cap(out.OOB) {
					out.NN = copy(out.OOB[:cap(out.OOB)], r.oob)
				} else {
					out.NN = appendWhole(out.OOB[:0:cap(out.OOB)], r.oob)
				}
				out.Addr = r.msgs[r.i].Addr
				out.Flags = 0
				k++
				r.off = end
			}
			if r.off >= len(r.data) {
				r.i++
				r.start()
			}
		}
	}
	r.handed += k
	return k, nil
}

// start prepares datagram r.i to be cut: its segment size, its payload
// in whole segments and its control messages without UDP_GRO. An empty
// datagram gives no packet (QUIC has nothing in it to read).
func (r *Reader) start() {
	r.off = 0
	if r.i >= r.n {
		return
	}
	m := &r.msgs[r.i]
	var seg int
	seg, r.oob = splitOOB(m.OOB[:m.NN], r.oob[:0])
	r.data = m.Buffers[0][:m.N]
	if m.Flags&msgTrunc != 0 && seg > 0 {
		// Cut short (larger than the buffer: never a merged datagram,
		// whose payload fits 64 KiB): its partial last segment is
		// dropped, as the network would.
		r.data = r.data[:len(r.data)-len(r.data)%seg]
	}
	if seg <= 0 || seg >= len(r.data) {
		seg = len(r.data)
	} else {
		r.Merged.Add(1)
	}
	r.seg = seg
}

// Conn is a UDP socket whose reads by quic-go go through a Reader: pass
// it where quic-go takes a net.PacketConn (a quic.Transport's Conn, an
// http3.Server's Serve).
type Conn struct {
	*net.UDPConn
	r *Reader
}

// Wrap returns c read through a Reader.
func Wrap(c *net.UDPConn) *Conn { return &Conn{UDPConn: c, r: New(c)} }

// ReadBatch is quic-go's hook for reading the socket.
func (c *Conn) ReadBatch(ms []ipv4.Message, flags int) (int, error) { return c.r.ReadBatch(ms, flags) }
