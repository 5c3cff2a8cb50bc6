// Package h2srv is an HTTP/2 server (RFC 9113) for one already
// handshaken connection at a time, serving a standard http.Handler with
// net/http's semantics, so that the edge proxy's handler runs on it as it
// runs on net/http's HTTP/2 server.
//
// Why a server of our own: net/http's starts several goroutines per
// request (the handler; one to write each response's HEADERS; one to
// flush its write buffer) and hands every frame between the handler and
// the connection's serve loop over channels. Here frames are read and
// dispatched by the goroutine in ServeConn; each stream's handler runs on
// a goroutine of its own (a handler goroutine that finishes takes the
// next stream waiting for a slot); response frames are encoded by the
// writing handler itself, under the connection's mutex, into the
// connection's pending output; and one writer goroutine per connection
// writes everything gathered since its last wake-up in one Write (one
// run of TLS records, one system call, for many streams' frames). A
// small response leaves in one go: HEADERS and one DATA with END_STREAM,
// appended together when the handler returns.
//
// The writer yields once (runtime.Gosched) before it takes the output
// while other handlers of its connection are running, so that their
// answers join the same Write: under h2load's 10 streams per connection
// this took the system calls from about 0.65 to 0.15-0.2 per response.
//
// Handler goroutines are parked for reuse: one whose connection has no
// stream waiting parks in a worker pool of the Server instead of
// exiting, and the next stream of any connection using that pool runs
// on it, with the stack it grew (starting a goroutine and growing its
// stack again was about a tenth of the CPU of a small request). Why
// this does not hurt a 16-core machine: the pools are sharded, one per
// P (GOMAXPROCS at New), each connection using one shard, so the mutex
// taken to start a handler is shared by a few connections rather than
// all of them; each shard parks at most maxParked (64) goroutines, LIFO
// so the warmest stacks are reused first, which bounds the parked
// memory at GOMAXPROCS × 64 stacks (16 cores: 1024 goroutines of a few
// KiB each, and the GC shrinks idle stacks); a burst beyond that starts
// goroutines that exit when done, as without pools; and a parked
// goroutine costs no CPU, it waits on its channel. Shutdown and Close
// end the parked goroutines.
//
// Output buffers come from two shared pools (64 KiB for a wake-up's
// answers, 320 KiB for a burst such as a large body), so the streams'
// pending output never grows by doubling, and an idle connection holds
// none. A DATA frame carries at most 16 KiB whatever frame size the
// client allows, so that a stream, which appends a frame whole once the
// pending output is under maxPending, stays within a 320 KiB buffer.
// (The control frames the reader queues may take the output past it,
// within maxControl frames.) A connection whose client reads nothing
// holds about 600 KiB of output at most: the Write in progress (one
// 320 KiB buffer) and the pending output (under maxPending, plus one
// frame), and the control frames it provokes, until the connection
// ends.
//
// Deadlines (http.ResponseController's SetReadDeadline and
// SetWriteDeadline) arm no timer when set: only a Read or a Write that
// has to wait arms one, so a handler that moves its deadline at every
// write (the edge does) costs no timer per request.
//
// Reading is x/net's http2.Framer with an hpack.Decoder (ReadMetaHeaders):
// it bounds a header list across CONTINUATION frames (a list over
// MaxHeaderListSize by more than the Framer tolerates closes the
// connection; one within it is answered 431 without calling the handler)
// and checks frame sizes, padding, and pseudo-header order. It does not
// count a header block's frames, so a guard between the connection and
// the Framer follows frame boundaries and ends the connection
// (ENHANCE_YOUR_CALM) when a block takes more CONTINUATION frames than
// a full header list in the smallest frames would, twice over, plus
// nghttp2's default 8: empty ones could otherwise keep the reader busy
// until the idle timeout. Writing is
// hand-framed, with x/net's hpack.Encoder.
//
// Limits (a hardened server):
//   - At most MaxConcurrentStreams handlers run at once on a connection,
//     counting handlers of streams the client reset that have not
//     returned yet. A stream beyond that waits in a queue, unstarted; a
//     stream reset while queued (by the client, or by the server for an
//     error of its own) is dropped, so the queue holds only streams open
//     on the wire and is at most the limit long (rapid reset,
//     CVE-2023-44487: a client that resets its streams gets no more
//     handlers running than the limit). Streams open on the wire beyond the advertised limit are refused
//     (REFUSED_STREAM).
//   - Output: a stream writes only while the connection's pending output
//     is under maxPending (256 KiB) and its flow-control windows allow;
//     otherwise it waits, until the write deadline the handler set
//     (http.ResponseController.SetWriteDeadline), after which the
//     stream is reset (CANCEL) and the others go on. Control frames the
//     reader answers (PING and SETTINGS ACKs, RST_STREAM, WINDOW_UPDATE,
//     and the 431 to a header list over MaxHeaderListSize) are queued
//     without waiting, but more than maxControl of them queued
//     at once (a client that asks and does not read) ends the
//     connection with ENHANCE_YOUR_CALM. More than maxEmptyData DATA
//     frames in a row without payload or END_STREAM do too, and so do
//     more than maxStreamErrors frames that are a stream error over a
//     connection's life, whether the Framer refuses them (WINDOW_UPDATEs
//     of zero among them) or the server does (malformed requests, DATA
//     on a closed stream, a window overrun), though the client reads
//     every reset (CVE-2019-9514, CVE-2019-9518).
//   - The connection's writer has no deadline of its own: a client that
//     stops reading holds it until the streams' write deadlines reset
//     them, the control bound trips, or the server closes the
//     connection: Close (Shutdown's, once its context ends), or
//     IdleTimeout once no stream is left (what is still unwritten then
//     gets a second). A handler that sets no write deadline holds its
//     stream, and with it the connection, until Close; a server that
//     must bound a client that reads nothing sets one (the edge moves it
//     at each write) or gives ServeConn a connection that has one.
//   - A connection ended for the client's error (a GOAWAY with an error
//     code) is closed lingering, as x/net's server closes it a second
//     after its GOAWAY: the writer ends the sending side after the
//     GOAWAY where the connection can (TCP), and reads and drops what
//     the client still sends, until the client closes or lingerTime
//     (1 s) passes; at most 1,024 connections linger at once (past
//     that one closes at once). Closed with the client's
//     frames unread, the connection would be reset by the kernel, which
//     throws away what still waits in the send buffer, the GOAWAY among
//     it, and the client would read a reset instead of why.
//   - A handler that reads a request body its client holds back waits
//     for as long as the client holds it, and a connection with a
//     stream open is not idle: a server that must bound it sets a read
//     deadline (the edge: ReadTimeout between two reads).
//   - Frames the client sent on a stream before it saw the server's
//     RST_STREAM (DATA, trailers) are ignored for the last 32 streams
//     the server reset, not taken for protocol errors that would end
//     the connection (RFC 9113 §5.1, "closed"); so are frames on
//     streams past the last one a GOAWAY of the server's announced,
//     which were never served (§6.8).
//   - Request bodies: a stream's unread body is at most its receive
//     window (StreamWindow), and all streams' together at most the
//     connection's (ConnWindow); WINDOW_UPDATEs are sent as the handler
//     reads, once half a window is consumed, for the stream and the
//     connection alike. A stream's buffer that grew past 16 KiB is let
//     go once read, so that streams filled one after the other do not
//     each keep the most they once held.
//   - A SETTINGS frame moves the open streams' send windows once, by
//     the last INITIAL_WINDOW_SIZE it holds, not once for each (a 16 KiB
//     frame holds 2,730 settings; 128 streams each).
//
// Over TLS 1.2, a connection whose cipher suite RFC 9113 §9.2.2
// prohibits (no ephemeral key exchange, or no AEAD cipher) is ended at
// once with INADEQUATE_SECURITY, as is one below TLS 1.2.
//
// Request trailers are held to the head's rules (RFC 9113 §8.2.2): a
// connection-specific field or a TE other than "trailers" in them is a
// stream error PROTOCOL_ERROR, and the handler's body read fails, as it
// does for trailers over MaxHeaderListSize (no 431 can answer them);
// of the rest, only the fields the request declared in Trailer are
// kept.
//
// A CONNECT request (RFC 9113 §8.5: :authority only) reaches the
// handler as net/http gives it (URL.Host and RequestURI the target), so
// that the handler answers it (the edge: 501); the stream carries no
// tunnel beyond what the handler does with the body.
//
// Not offered: server push, extended CONNECT (RFC 8441: a :protocol
// field is refused with a PROTOCOL_ERROR reset), and priorities
// (PRIORITY frames are checked, then ignored).
package h2srv
