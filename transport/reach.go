package transport

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"time"

	"peerdns/messages"
)

// RawPackets is implemented by endpoints whose UDP socket can also carry
// packets that are not QUIC (the NAT-type probe). QUICEndpoint does: the
// packets go out of, and come in on, the very socket its connections use,
// so they see the same NAT mapping.
type RawPackets interface {
	// WriteRaw sends one non-QUIC packet (its first byte must have
	// QUIC's fixed bit clear) from the endpoint's socket.
	WriteRaw(b []byte, to netip.AddrPort) error
	// ReadRaw waits for the next non-QUIC packet that reached the socket.
	ReadRaw(ctx context.Context, b []byte) (int, netip.AddrPort, error)
}

var _ RawPackets = (*QUICEndpoint)(nil)

// WriteRaw sends b from the endpoint's UDP socket.
func (e *QUICEndpoint) WriteRaw(b []byte, to netip.AddrPort) error {
	_, err := e.tr.WriteTo(b, net.UDPAddrFromAddrPort(to))
	return err
}

// ReadRaw returns the next non-QUIC packet that reached the socket.
// quic-go keeps such packets only once ReadRaw has been called (a
// reader must be waiting from the start), and then a few dozen at most.
func (e *QUICEndpoint) ReadRaw(ctx context.Context, b []byte) (int, netip.AddrPort, error) {
	n, from, err := e.tr.ReadNonQUICPacket(ctx, b)
	if err != nil {
		return 0, netip.AddrPort{}, err
	}
	ua, _ := from.(*net.UDPAddr)
	if ua == nil {
		return n, netip.AddrPort{}, nil
	}
	ap := ua.AddrPort()
	return n, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}

// ProbePacket builds the probe packet carrying nonce.
func ProbePacket(nonce uint64) []byte {
	b := make([]byte, len(messages.ProbeMagic)+8)
	copy(b, messages.ProbeMagic)
	binary.BigEndian.PutUint64(b[len(messages.ProbeMagic):], nonce)
	return b
}

// ParseProbePacket returns the nonce of a probe packet.
func ParseProbePacket(b []byte) (uint64, bool) {
	if len(b) != len(messages.ProbeMagic)+8 || string(b[:len(messages.ProbeMagic)]) != messages.ProbeMagic {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[len(messages.ProbeMagic):]), true
}

// ProbeSocket is the second, short-lived UDP socket a node answers a
// NAT-type probe from: a packet from it reaches the prober from an
// address the prober never sent to, and the packet the prober sends to
// it shows the mapping the prober's router makes for a new destination.
type ProbeSocket struct {
	conn *net.UDPConn
}

// OpenProbeSocket opens an ephemeral UDP socket on the same address
// family and interface address as local (the endpoint's bound address).
func OpenProbeSocket(local net.Addr) (*ProbeSocket, error) {
	la := &net.UDPAddr{}
	if ua, ok := local.(*net.UDPAddr); ok && ua.IP != nil {
		la.IP = ua.IP
	}
	c, err := net.ListenUDP("udp", la)
	if err != nil {
		return nil, err
	}
	return &ProbeSocket{conn: c}, nil
}

// Port is the socket's local port.
func (p *ProbeSocket) Port() int { return p.conn.LocalAddr().(*net.UDPAddr).Port }

// Send sends the probe packet for nonce to to.
func (p *ProbeSocket) Send(nonce uint64, to netip.AddrPort) error {
	_, err := p.conn.WriteToUDPAddrPort(ProbePacket(nonce), to)
	return err
}

// Wait returns the source of the first probe packet carrying nonce that
// arrives before deadline, from fromIP only (other senders are ignored).
func (p *ProbeSocket) Wait(nonce uint64, fromIP netip.Addr, deadline time.Time) (netip.AddrPort, bool) {
	_ = p.conn.SetReadDeadline(deadline)
	b := make([]byte, 64)
	for {
		n, from, err := p.conn.ReadFromUDPAddrPort(b)
		if err != nil {
			return netip.AddrPort{}, false
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		if got, ok := ParseProbePacket(b[:n]); ok && got == nonce && from.Addr() == fromIP {
			return from, true
		}
	}
}

// Close closes the socket.
func (p *ProbeSocket) Close() error { return p.conn.Close() }

// WriteRaw and ReadRaw of a MultiEndpoint are its QUIC socket's: the
// observed-address probes and punches are about the UDP mapping.
func (e *MultiEndpoint) WriteRaw(b []byte, to netip.AddrPort) error { return e.q.WriteRaw(b, to) }

// ReadRaw waits for the next non-QUIC packet on the QUIC socket.
func (e *MultiEndpoint) ReadRaw(ctx context.Context, b []byte) (int, netip.AddrPort, error) {
	return e.q.ReadRaw(ctx, b)
}

var _ RawPackets = (*MultiEndpoint)(nil)
