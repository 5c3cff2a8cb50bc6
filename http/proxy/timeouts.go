package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Timeouts between operations, not over a whole exchange (as nginx's
// proxy_read_timeout and send_timeout): fasthttp sets one deadline per
// exchange, which would cut a download that takes longer than the
// timeout however steadily it flows. movingDeadlines moves a deadline
// past now at each operation, so a peer that makes no progress for the
// timeout is still cut, and one that keeps going never is.
//
// Upstream connections move both deadlines (UpstreamTimeout: an upstream
// silent that long before its response head is a 504, in the middle of a
// body the body is cut; one that takes nothing of a streamed request body
// for that long is a 504 too); client connections move their write
// deadline (WriteTimeout: a client that reads nothing for that long is
// cut, a slow one that keeps reading is not), and their read deadline
// only while a request body is read (body.go). Otherwise a client's read
// side keeps fasthttp's per-request ReadTimeout: a request head must
// arrive whole within it, whatever its pace.
//
// A deadline is moved only once it is an eighth of its timeout behind
// (so a peer is cut after between 7/8 of the timeout and the whole of
// it without progress): setting one takes the runtime's timer lock, and
// doing it at every read and write was 3.5% of the proxy's CPU. A
// deadline fasthttp sets itself (SetReadDeadline and friends, at each
// request) is remembered, so the next operation does not move it again.
//
// Lazy connections (the plain HTTP listener's, the upstream pool's: each
// is set and read or written by one goroutine at a time) also keep a
// deadline set for the future until the next operation on that side,
// and then put it on the connection only if it differs from the one in
// force by more than an eighth of the time left (a deadline already
// within that much before it stays, as a moving one does). fasthttp sets
// five deadlines per proxied request (the client's idle and head read
// timeouts and its write timeout, the upstream's write and read
// timeouts), each a runtime timer change under a lock, nearly always
// for no operation that could reach it: the head-read timeout is set
// after the head's first bytes came and is usually never waited on
// (the head came whole), the idle one again a moment later. A deadline
// in the past or cleared is put on at once (a halt from another
// goroutine must stop a read in progress), so is every deadline on a
// connection that is not lazy (HTTPS: the HTTP/2 server sets
// deadlines from one goroutine while another reads).
type movingDeadlines struct {
	net.Conn
	lazy   bool
	rd, wr deadline
	// readErr is the last read error while the read deadline moves
	// (a request body is read: body.go); only the serving goroutine
	// reads a connection then.
	readErr error
	// wfail: a write to the connection failed (an upload tells by it
	// whether its sending broke on the upstream's side or on reading the
	// client's body: upload.go).
	wfail atomic.Bool
	// bufs are ReadFrom's copy buffers: copyBufs (nil) for a client's
	// connection, bodyBufs for an upstream's.
	bufs *sync.Pool
	// rstop, wstop: halted (haltRead, haltWrite); no later operation on
	// that side moves its deadline out of the past.
	rstop, wstop atomic.Bool
	// linger: Close lingers (closeAfter); lingering: it does now.
	linger, lingering atomic.Bool
	// gathered: the connection gathers its writes (gather.go); nil: it
	// writes each at once.
	gathered atomic.Pointer[gatherer]
	// halt: halter's func, made once per connection.
	halt func()
	// head: a streamed answer's head held for its body's first piece
	// (headhold.go); nil until the first is.
	head atomic.Pointer[headHold]
	// peek looks into an idle upstream connection's socket
	// (idleReadable); nil until the first look.
	peek *idlePeek
	// slot: what a client connection holds of its listener's cap until
	// it closes (connlimit.go); nil for an upstream connection.
	slot *clientSlot
	// pool: the idle connections of the upstream pool the connection is
	// in (idleWatch); nil for any other connection.
	pool *idleWatch
	// watch tells a client's head fasthttp waits on (lfrequest.go).
	watch headWatch
	// renewRead: each write moves the deadline of a read in progress
	// (reading), as a read would move it. For a connection whose reads
	// wait while another goroutine writes (net/http's read loop waits in
	// a Read from before a request is written, through a whole upload):
	// the wait for an answer then counts from the request's last write,
	// as UpstreamTimeout is meant, not from when the read began.
	renewRead bool
	reading   atomic.Bool
}

// halter is a func that halts both sides (haltRead, haltWrite), made
// once for the connection: an upstream exchange hands it to
// context.AfterFunc at each request. It is called by the one goroutine
// that holds the connection.
func (c *movingDeadlines) halter() func() {
	if c.halt == nil {
		c.halt = func() {
			c.haltRead()
			c.haltWrite()
		}
	}
	return c.halt
}

// Close closes the connection. One that lingers (its answer went while
// the client was still sending a body nobody will read) first ends its
// sending side (FIN after the answer), then reads and drops what still
// comes, until the client closes too or for lingerTime, and only then
// closes: a socket closed with bytes unread sends a reset, and a client
// still sending gets it before it reads the answer, which its kernel may
// then drop (nginx's lingering_close, for the same reason). At most
// maxLingering connections linger at once (linger.go).
//
// A second Close while lingering is a no-op (a TLS connection's Close
// closes the one under it too): the drain closes the connection.
//
// A connection that gathers its writes and has some pending is closed
// once they are written (gatherer); its reads fail at once.
func (c *movingDeadlines) Close() error {
	_ = c.flushHeld()
	if g := c.gathered.Load(); g != nil && g.end(true) {
		c.haltRead()
		return nil
	}
	return c.closeNow()
}

// CloseWrite ends the sending side after what was written: a FIN once
// the bytes a gathering connection holds pending are out (gatherer),
// where the connection under can half-close (TCP); reads go on. HTTP/2's
// lingering close after an error GOAWAY (http/h2srv) asks it, so the
// client reads the GOAWAY and then the connection's end at once, not
// when the linger is over.
func (c *movingDeadlines) CloseWrite() error {
	_ = c.flushHeld()
	if g := c.gathered.Load(); g != nil && g.end(false) {
		return nil
	}
	return c.closeWriteNow()
}

// closeWriteNow half-closes the connection under c.
func (c *movingDeadlines) closeWriteNow() error {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return errors.ErrUnsupported
	}
	return cw.CloseWrite()
}

func (c *movingDeadlines) closeNow() error {
	c.release()
	if c.pool != nil {
		c.pool.drop(c)
	}
	if c.linger.Load() && c.lingering.Swap(true) {
		return nil
	}
	if !c.linger.Load() || !lingerClose(c.Conn) {
		return c.Conn.Close()
	}
	return nil
}

// deadline is one side's moving deadline. Atomic: a hijacked connection
// is read and written from two goroutines.
type deadline struct {
	every atomic.Int64 // a time.Duration; 0: this side keeps fasthttp's deadline
	until atomic.Int64 // the deadline in force, ns since monoBase (0: none known)
	want  atomic.Int64 // lazy: set, not yet on the connection, ns since monoBase (0: none)
}

// due reports whether the deadline should move, and where to. It reads
// the monotonic clock only (time.Since a fixed instant): time.Now reads
// the wall clock too, and this runs at every read and write of every
// proxied connection, while the wall time is needed only on the rare
// move.
func (d *deadline) due() (time.Time, bool) {
	every := time.Duration(d.every.Load())
	if every <= 0 {
		return time.Time{}, false
	}
	t := time.Since(monoBase) + every
	u := d.until.Load()
	if u != 0 && int64(t)-u <= int64(every/8) {
		return time.Time{}, false
	}
	return monoBase.Add(t), true
}

// monoBase is the instant deadlines are counted from (deadline.until).
var monoBase = time.Now()

// hold keeps t for the next operation (lazy connections) and reports
// true, or reports false when t must go on the connection now: zero, or
// not in the future.
func (d *deadline) hold(t time.Time) bool {
	if t.IsZero() {
		d.want.Store(0)
		return false
	}
	w := int64(t.Sub(monoBase))
	if w <= int64(time.Since(monoBase)) {
		d.want.Store(0)
		return false
	}
	d.want.Store(w)
	return true
}

// held is the deadline hold kept, to put on the connection before an
// operation; false when none is held or the one in force is near enough
// (at most an eighth of the time left before it).
func (d *deadline) held() (time.Time, bool) {
	if d.want.Load() == 0 {
		return time.Time{}, false
	}
	w := d.want.Swap(0)
	if w == 0 {
		return time.Time{}, false
	}
	if u := d.until.Load(); u != 0 && u <= w && 8*(w-u) <= w-int64(time.Since(monoBase)) {
		return time.Time{}, false
	}
	return monoBase.Add(time.Duration(w)), true
}

// set records a deadline just set on the connection.
func (d *deadline) set(t time.Time) {
	if t.IsZero() {
		d.until.Store(0)
		return
	}
	// Monotonic when t has a monotonic reading (time.Now().Add, as
	// fasthttp and due build them), wall-clock otherwise (a halt's
	// deadline in 1970): either way its distance from monoBase.
	d.until.Store(int64(t.Sub(monoBase)))
}

func (c *movingDeadlines) Read(b []byte) (int, error) {
	if c.watch.open && c.watch.stuck() {
		return 0, errLoneLF
	}
	if err := c.moveRead(); err != nil {
		c.readErr = err
		return 0, err
	}
	if c.renewRead {
		c.reading.Store(true)
	}
	n, err := c.Conn.Read(b)
	if c.renewRead {
		c.reading.Store(false)
	}
	if err != nil && c.rd.every.Load() > 0 {
		c.readErr = err
	}
	if c.watch.open {
		c.watch.saw(b[:n])
	}
	return n, err
}

// moveRead puts on the connection the read deadline held for the next
// read (lazy connections) and moves it when due.
func (c *movingDeadlines) moveRead() error {
	if c.lazy {
		if t, ok := c.rd.held(); ok {
			if err := c.putRead(t); err != nil {
				return err
			}
		}
	}
	if c.rd.every.Load() <= 0 {
		return nil
	}
	if t, ok := c.rd.due(); ok {
		return c.putRead(t)
	}
	return nil
}

// putRead puts t on the connection as its read deadline, unless it was
// halted (a move must not undo a halt).
func (c *movingDeadlines) putRead(t time.Time) error {
	stopped, err := c.put(true, t)
	if err == nil && stopped {
		err = os.ErrDeadlineExceeded
	}
	return err
}

// put puts t on one side's deadline (read or write) and records it. A
// side halted before or meanwhile gets the past deadline instead, or
// back: a move or a later setting (crypto/tls gives its close_notify
// alert 5 s) must not undo a halt, or the next operation would wait for
// t. stopped reports that it did.
func (c *movingDeadlines) put(read bool, t time.Time) (stopped bool, err error) {
	d, stop := &c.wr, &c.wstop
	if read {
		d, stop = &c.rd, &c.rstop
	}
	if stop.Load() {
		t = halted
	}
	d.set(t)
	err = c.setConn(read, t)
	if !stop.Load() {
		return false, err
	}
	if t != halted {
		d.set(halted)
		_ = c.setConn(read, halted)
	}
	return true, err
}

func (c *movingDeadlines) setConn(read bool, t time.Time) error {
	if read {
		return c.Conn.SetReadDeadline(t)
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *movingDeadlines) Write(b []byte) (int, error) {
	if g := c.gathered.Load(); g != nil {
		return g.write(c, b)
	}
	if h := c.head.Load(); h != nil && h.active.Load() {
		if n, err, done := h.write(c, b); done {
			return n, err
		}
	}
	return c.writeNow(b)
}

// writeNow writes b to the connection, moving the write deadline. A
// write that failed (the client took nothing for the timeout, or went)
// ends the writing side (haltWrite): the stream holds part of a message
// and nothing more can follow it, and what closing still writes (the
// TLS close_notify alert, with crypto/tls's 5 s deadline that the next
// write would move a timeout ahead) must not wait on a client that
// reads nothing.
func (c *movingDeadlines) writeNow(b []byte) (int, error) {
	if err := c.moveWrite(); err != nil {
		c.wfail.Store(true)
		return 0, err
	}
	n, err := c.Conn.Write(b)
	if err != nil {
		c.wfail.Store(true)
		c.haltWrite()
		return n, err
	}
	if c.renewRead && c.reading.Load() {
		// A move when due, as a read's own (an eighth of the timeout
		// behind); a halted read side stays halted (put).
		if t, ok := c.rd.due(); ok {
			_ = c.putRead(t)
		}
	}
	return n, err
}

// moveWrite puts on the connection the write deadline held for the next
// write (lazy connections) and moves it when due.
func (c *movingDeadlines) moveWrite() error {
	if c.lazy {
		if t, ok := c.wr.held(); ok {
			if err := c.putWrite(t); err != nil {
				return err
			}
		}
	}
	if t, ok := c.wr.due(); ok {
		return c.putWrite(t)
	}
	return nil
}

// putWrite is putRead for writes.
func (c *movingDeadlines) putWrite(t time.Time) error {
	stopped, err := c.put(false, t)
	if err == nil && stopped {
		err = os.ErrDeadlineExceeded
	}
	return err
}

// halted is the deadline a halted side has: long past.
var halted = time.Unix(1, 0)

// haltRead makes the read in progress, if any, and every later one fail
// at once, from any goroutine: a deadline in the past that the read side
// will not move again (a read that moves it checks rstop after, and puts
// the past one back). nil: a no-op.
func (c *movingDeadlines) haltRead() {
	if c == nil {
		return
	}
	c.rstop.Store(true)
	_ = c.SetReadDeadline(halted)
}

// haltWrite is haltRead for writes.
func (c *movingDeadlines) haltWrite() {
	c.wstop.Store(true)
	_ = c.SetWriteDeadline(halted)
}

// A side whose deadline moves (every > 0) is not cleared: SetXDeadline
// with the zero time (fasthttp's, at each exchange, from a client or
// server without timeouts of its own) leaves the moving deadline in
// force.

// A halted side stays halted: a deadline set on it later is replaced by
// the past one (put).

func (c *movingDeadlines) SetReadDeadline(t time.Time) error {
	if !c.rstop.Load() {
		if t.IsZero() && c.rd.every.Load() > 0 {
			return nil
		}
		if c.lazy && c.rd.hold(t) {
			return nil
		}
	}
	_, err := c.put(true, t)
	return err
}

func (c *movingDeadlines) SetWriteDeadline(t time.Time) error {
	if !c.wstop.Load() {
		if t.IsZero() && c.wr.every.Load() > 0 {
			return nil
		}
		if c.lazy && c.wr.hold(t) {
			return nil
		}
	}
	_, err := c.put(false, t)
	return err
}

func (c *movingDeadlines) SetDeadline(t time.Time) error {
	if t.IsZero() && (c.rd.every.Load() > 0 || c.wr.every.Load() > 0) || c.rstop.Load() || c.wstop.Load() {
		return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
	}
	if c.lazy {
		if c.rd.hold(t) {
			c.wr.hold(t)
			return nil
		}
		c.wr.want.Store(0)
	}
	c.rd.set(t)
	c.wr.set(t)
	return c.Conn.SetDeadline(t)
}

// ReadFrom keeps the connection an io.ReaderFrom, as the *net.TCPConn it
// wraps is: fasthttp's bufio writer hands a streamed body to ReadFrom,
// which writes each piece as it is read. Without it the writer would
// hold up to a buffer's worth of what the upstream sent until more came
// (the tail of a body whose upstream pauses would wait for the pause to
// end). Each piece goes through Write, so the deadline moves with it.
func (c *movingDeadlines) ReadFrom(r io.Reader) (int64, error) {
	var spliced int64
	if pb, ok := r.(*poolBody); ok {
		n, done, err := c.splice(pb)
		if done {
			return n, err
		}
		spliced = n
	}
	pool := c.bufs
	if pool == nil {
		pool = &copyBufs
	}
	bp := pool.Get().(*[]byte)
	defer pool.Put(bp)
	n, err := io.CopyBuffer(writeOnly{c}, r, *bp)
	return spliced + n, err
}

// writeOnly hides ReadFrom from io.CopyBuffer (which would call it back).
type writeOnly struct{ io.Writer }

// copyBufs carry response bodies to clients: a buffer is held for as long
// as a slow client takes to read it (only while a body passes: idle
// keep-alive connections hold none), so they stay moderate. 64 KiB, as
// nginx's proxy_buffers 8 x 8k: a 64 KiB response goes in one read and
// one write instead of two each, which on the same-node route read
// 9.2-10.0k req/s at 66-72 µs of CPU a request against 8.7-9.3k at 77-90
// with 32 KiB (bench/README.md, "Sysmon"). bodyBufs carry
// request bodies upstream, which are fewer: an upload through the edge
// moved 0.77-0.98 GB/s with 128 KiB against 0.3-0.8 with 32 KiB
// (bench/README.md, "Uploads streamed").
var (
	copyBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}
	bodyBufs = sync.Pool{New: func() any { b := make([]byte, 128<<10); return &b }}
)

// betweenWrites is a listener whose connections move their write
// deadline (above).
// lazy: its connections keep deadlines set for the future until they are
// needed (see movingDeadlines).
// slots caps the connections open at once (connlimit.go): a connection
// Accept takes waits for a slot before it is handed on, and Accept takes
// no other meanwhile; stop ends that wait when the listener closes. A
// connection over its address's share is closed at once, and Accept
// takes the next. (A slot taken before the socket's accept would be
// held by every listener's Accept waiting for a client, and the edge's
// two listeners would take slots from each other.)
type betweenWrites struct {
	net.Listener
	timeout time.Duration
	lazy    bool
	slots   *connSlots
	stop    *listenerStop
}

func (l betweenWrites) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		slot := l.slots.admit(c.RemoteAddr())
		if slot == nil {
			c.Close() // over its address's share
			continue
		}
		if !l.slots.take(l.stop.c) {
			slot.leave()
			c.Close()
			// The closed socket's own error: fasthttp ends serving on it.
			return nil, net.ErrClosed
		}
		slot.held.Store(true)
		mc := &movingDeadlines{Conn: c, lazy: l.lazy, slot: slot}
		mc.wr.every.Store(int64(l.timeout))
		return mc, nil
	}
}

func (l betweenWrites) Close() error {
	l.stop.stop()
	return l.Listener.Close()
}
