package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"peerdns/messages"
)

// ALPN is the TLS application protocol of the peer network.
const ALPN = "peerdns/1"

// Errors callers branch on.
var (
	// ErrClosed reports use of a closed endpoint or connection.
	ErrClosed = errors.New("transport closed")
	// ErrFrameTooLarge reports a frame whose declared length exceeds MaxFrameSize.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrFrameStalled reports a control frame begun and not finished
	// within its deadline (DefaultFrameTimeout); the connection closes.
	ErrFrameStalled = errors.New("frame stalled")
	// ErrWrongPeer reports a peer whose key is not the one we dialed for.
	ErrWrongPeer = errors.New("peer presented a different key than expected")
)

// Endpoint is a node's network presence: it accepts authenticated
// connections and dials peers. Safe for concurrent use.
type Endpoint interface {
	// ID is the local peer id (hex Ed25519 public key).
	ID() string
	// Addr is the local UDP address the endpoint listens and dials from.
	Addr() net.Addr
	// Dial connects to addr. When peerID is not "", the peer must prove
	// that key or the dial fails with ErrWrongPeer; "" accepts any key
	// (the caller then authorises Conn.PeerID()).
	Dial(ctx context.Context, addr, peerID string) (Conn, error)
	// Accept returns the next inbound connection whose control stream is
	// open. It fails with ErrClosed once the endpoint is closed.
	Accept(ctx context.Context) (Conn, error)
	// RefusedInbound counts inbound connections refused because too many
	// were waiting to be admitted (see Config.MaxPendingInbound).
	RefusedInbound() int64
	// Close closes the endpoint and every connection.
	Close() error
}

// Conn is one authenticated connection with its control stream.
type Conn interface {
	// PeerID is the hex public key the peer proved in the TLS handshake.
	PeerID() string
	// Outbound is true when this side dialed.
	Outbound() bool
	// Admit says the layer above authorised the peer (a writer, or a
	// joiner whose invite was redeemed): an inbound connection stops
	// counting against Config.MaxPendingInbound, and an inbound stream
	// path reads on past the InitialConnectionReceiveWindow bytes it
	// takes from a peer before (QUIC's flow control bounds the same).
	// Idempotent; a no-op for dialed connections.
	Admit()
	LocalAddr() net.Addr
	RemoteAddr() net.Addr
	// Send writes one envelope as a frame on the control stream. Safe for
	// concurrent use; it fails (and closes the connection) when the frame
	// cannot be written within the write timeout.
	Send(m *messages.Envelope) error
	// Recv reads the next envelope. Only one goroutine may call it. A frame
	// over MaxFrameSize or one that does not decode closes the connection,
	// is logged and returns the error.
	Recv() (*messages.Envelope, error)
	// SkipHeld makes Recv skim the ops held says the receiver holds
	// already (messages.UnmarshalEnvelopeHeld): they come back with their
	// writer, seq and clock only, marked Op.Held. Call it before the
	// first Recv; nil (the default) reads every op whole.
	SkipHeld(held func(writer string, seq uint64) bool)
	// OpenStream opens a new bidirectional stream (tunnels).
	OpenStream(ctx context.Context) (Stream, error)
	// AcceptStream waits for a stream the peer opened (tunnels).
	AcceptStream(ctx context.Context) (Stream, error)
	// SendDatagram sends one unreliable QUIC datagram (UDP tunnels).
	SendDatagram(b []byte) error
	// ReceiveDatagram waits for the next datagram.
	ReceiveDatagram(ctx context.Context) ([]byte, error)
	// ExportKeyingMaterial derives length bytes that only the two ends of
	// this connection know (RFC 5705/8446 exporter of its TLS session),
	// bound to label and context. Tunnel handshakes sign with it, so a
	// proof made for one connection is worthless on another.
	ExportKeyingMaterial(label string, context []byte, length int) ([]byte, error)
	// Close closes the connection, telling the peer reason.
	Close(reason string) error
	// Done is closed once the connection is closed (by either side).
	Done() <-chan struct{}
	// Err says why the connection closed (nil while open).
	Err() error
}

// Stream is a reliable bidirectional byte stream inside a connection.
// Its three ways to end mean the same on every transport:
//
//   - CloseWrite: no more bytes from us (a FIN); reads go on until the
//     peer's own end of data. The peer reads io.EOF.
//   - Close: both directions end normally: our FIN is sent and we stop
//     reading (a peer still writing gets an error). What a stream's
//     owner calls once it is done with it.
//   - Abort: tear it down now, both ways; the peer's reads and writes
//     fail (not a clean EOF), so it tears its side down too.
//
// Each may follow another; later calls are no-ops.
type Stream interface {
	io.ReadWriteCloser
	CloseWrite() error
	Abort()
	SetDeadline(t time.Time) error
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
}

// ErrDatagramTooLarge reports a datagram over the connection's current
// datagram payload limit (QUIC: the path MTU minus packet overhead,
// about 1,200 bytes on a path never probed; mem: MemMaxDatagram). The
// datagram was not sent.
var ErrDatagramTooLarge = errors.New("datagram too large")
