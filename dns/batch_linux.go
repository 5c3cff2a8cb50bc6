//go:build linux && (amd64 || arm64)

package dns

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"peerdns/dns/zone"
)

// Batched UDP I/O with recvmmsg(2)/sendmmsg(2): one system call reads up
// to batchSize queries and one writes all their fast answers. Under load
// this is where the time went (one recvfrom and one sendto per query).
//
// Why by hand rather than golang.org/x/net/ipv4 ReadBatch/WriteBatch:
// those decode every source address into a new *net.UDPAddr, one
// allocation per query, and the answer path must not allocate. Here the
// headers, iovecs, address slots and buffers are allocated once per
// socket and reused; the syscalls run inside RawConn.Read/Write so the
// goroutine parks in the runtime's poller when the socket is empty.

const (
	batchSize = 32
	readSize  = 4096 // larger queries are cut (MSG_TRUNC) and get FORMERR
)

// mmsghdr is struct mmsghdr of <sys/socket.h> on 64-bit Linux.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

type batch struct {
	rc    syscall.RawConn
	in    [batchSize]mmsghdr
	iovs  [batchSize]unix.Iovec
	names [batchSize]unix.RawSockaddrInet6 // room for IPv4 and IPv6 sources
	bufs  [batchSize][]byte
	out   [batchSize]mmsghdr
	oiovs [batchSize]unix.Iovec
	obufs [batchSize][]byte
	// Control messages (pktinfo only): what each query arrived with and
	// what its reply goes out with; uint64 arrays for cmsg alignment.
	pktinfo bool
	ctl     [batchSize][ctlSize / 8]uint64
	octl    [batchSize][ctlSize / 8]uint64

	// The RawConn callbacks and their results, made once: a closure
	// built per call would escape and allocate.
	readFn, writeFn func(fd uintptr) bool
	rn, wn          int
	rerr, werr      error
	sent, count     int
}

func newBatch(rc syscall.RawConn, outSize int) *batch {
	b := &batch{rc: rc}
	for i := range b.in {
		b.bufs[i] = make([]byte, readSize)
		b.iovs[i].Base = &b.bufs[i][0]
		b.iovs[i].SetLen(readSize)
		b.in[i].hdr.Iov = &b.iovs[i]
		b.in[i].hdr.SetIovlen(1)
		b.in[i].hdr.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		b.obufs[i] = make([]byte, outSize)
		b.out[i].hdr.Iov = &b.oiovs[i]
		b.out[i].hdr.SetIovlen(1)
	}
	// RawSyscall, not Syscall: with MSG_DONTWAIT these calls never block,
	// and telling the scheduler we entered a system call only lets sysmon
	// hand our P to another thread whenever a batch takes over 20µs to
	// send (perf showed the extra context switches). EINTR is retried
	// here: returning false would wait for a readiness edge that may
	// never come.
	b.readFn = func(fd uintptr) bool {
		for {
			r, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.in[0])), batchSize, unix.MSG_DONTWAIT, 0, 0)
			switch e {
			case 0:
				b.rn = int(r)
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false // park until readable
			default:
				b.rerr = e
			}
			return true
		}
	}
	b.writeFn = func(fd uintptr) bool {
		for {
			r, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.out[b.sent])), uintptr(b.count-b.sent), unix.MSG_DONTWAIT, 0, 0)
			switch e {
			case 0:
				b.wn = int(r)
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false // park until writable
			default:
				b.werr = e
			}
			return true
		}
	}
	return b
}

// read fills the batch; it blocks (parked in the poller) until at least
// one datagram is there.
func (b *batch) read() (int, error) {
	for i := range b.in {
		b.in[i].hdr.Namelen = uint32(unsafe.Sizeof(b.names[i]))
		b.in[i].hdr.Flags = 0
		if b.pktinfo {
			b.in[i].hdr.Control = (*byte)(unsafe.Pointer(&b.ctl[i][0]))
			b.in[i].hdr.SetControllen(ctlSize)
		}
	}
	b.rn, b.rerr = 0, nil
	if err := b.rc.Read(b.readFn); err != nil {
		return 0, err
	}
	return b.rn, b.rerr
}

// reply queues out[k] as the answer of in[i], m bytes long in obufs[k].
func (b *batch) reply(k, i, m int) {
	b.oiovs[k].Base = &b.obufs[k][0]
	b.oiovs[k].SetLen(m)
	b.out[k].hdr.Name = b.in[i].hdr.Name
	b.out[k].hdr.Namelen = b.in[i].hdr.Namelen
	if b.pktinfo {
		b.out[k].hdr.Control, b.out[k].hdr.Controllen = nil, 0
		if n := replyControl(b.control(i), b.replyCtl(k)); n > 0 {
			b.out[k].hdr.Control = (*byte)(unsafe.Pointer(&b.octl[k][0]))
			b.out[k].hdr.SetControllen(n)
		}
	}
}

// control is what in[i] arrived with (pktinfo only).
func (b *batch) control(i int) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&b.ctl[i][0])), ctlSize)[:b.in[i].hdr.Controllen]
}

func (b *batch) replyCtl(k int) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&b.octl[k][0])), ctlSize)
}

// write sends out[:k]. A datagram the kernel refuses (sendmmsg reports
// an error only for the first message of a call) is skipped.
func (b *batch) write(k int) (failed int, err error) {
	b.count = k
	for b.sent = 0; b.sent < k; {
		b.wn, b.werr = 0, nil
		if err := b.rc.Write(b.writeFn); err != nil {
			return failed, err
		}
		if b.werr != nil || b.wn == 0 {
			failed++
			b.sent++
			continue
		}
		b.sent += b.wn
	}
	return failed, nil
}

// source is in[i]'s sender as an AddrPort (no allocation).
func (b *batch) source(i int) netip.AddrPort {
	raw := &b.names[i]
	switch raw.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(raw))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), port)
	case unix.AF_INET6:
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&raw.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom16(raw.Addr), port)
	}
	return netip.AddrPort{}
}

// serveUDP is one socket's reader with batched I/O.
func (s *Server) serveUDP(c *net.UDPConn, sh *shard) {
	if s.singleReads {
		s.readLoop(c, sh)
		return
	}
	defer s.wg.Done()
	defer s.alive.Add(-1)
	rc, err := c.SyscallConn()
	if err != nil {
		s.log.Error("dns udp: raw socket", "err", err)
		return
	}
	size := int(s.cfg.UDPSize)
	b := newBatch(rc, size)
	b.pktinfo = s.pktinfo
	var q zone.Query
	for {
		n, err := b.read()
		if err != nil {
			if s.stopped.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			s.logError("dns udp read", err)
			continue
		}
		sh.queries.Add(int64(n))
		sh.batches.Add(1)
		sh.nowOK = false // the batch's clock (cookies)
		t := s.fresh(s.table.Load())
		debug := s.debugEnabled()
		qlog := s.qlog.on.Load()
		k := 0
		for i := 0; i < n; i++ {
			pkt := b.bufs[i][:b.in[i].n]
			if b.in[i].hdr.Flags&unix.MSG_TRUNC != 0 {
				// Longer than any query we accept: FORMERR (RFC 1035 §4.1.1).
				if len(pkt) >= 12 && pkt[2]&0x80 == 0 {
					sh.formerr.Add(1)
					sh.answers.add(SourceNone, dns.RcodeFormatError)
					resp, from := headerOnly(pkt, dns.RcodeFormatError), b.source(i)
					if !s.recursionFor(from.Addr()) {
						resp = resp[:s.screen(resp, from.Addr(), sh, false)]
					}
					if len(resp) > 0 {
						var ctl []byte
						if b.pktinfo {
							ctl = b.control(i)
						}
						_ = writeUDP(c, resp, from, ctl)
					}
				}
				continue
			}
			// The client's address: for the ACL, and for the server
			// cookie of a query that has a client cookie (cookies.go).
			client := b.source(i).Addr()
			if m := s.fast(t, pkt, &q, b.obufs[k], size, client, sh); m != 0 {
				if m < 0 {
					continue // rate-limited: no reply
				}
				b.reply(k, i, m)
				if debug {
					s.debugQuery(b.obufs[k][:m], b.source(i), "fast")
				}
				if qlog {
					s.note(b.source(i).Addr(), b.obufs[k][:m], "fast")
				}
				k++
				continue
			}
			var ctl []byte
			if b.pktinfo {
				ctl = b.control(i)
			}
			s.slowUDP(c, pkt, b.source(i), ctl, sh)
		}
		if k > 0 {
			sh.fast.Add(int64(k))
			failed, err := b.write(k)
			if failed > 0 {
				sh.dropped.Add(int64(failed))
			}
			if err != nil && !s.stopped.Load() && !errors.Is(err, net.ErrClosed) {
				s.logError("dns udp write", err)
			}
		}
	}
}
