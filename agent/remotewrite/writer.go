package remotewrite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/snappy"

	"peerdns/agent/api"
	"peerdns/agent/store"
	"peerdns/transport"
)

// Source is one node's store and the instance label its series carry.
type Source struct {
	Instance string
	// Key, when set, is the node's peer key, carried as label peer_key: a
	// parent's child names its own host (Instance) in its hello, and two
	// children, or a child and its parent, may name the same one (one
	// host, cloned machines), which would make their series one. The
	// key is the node itself.
	Key string
	DB  *store.DB
}

// Config configures a writer.
type Config struct {
	// URL is the receiver, e.g. http://127.0.0.1:9090/api/v1/write
	// (AGENT_REMOTE_WRITE_URL).
	URL string
	// Sources lists the stores to export, called at every collection
	// (a parent adds its children).
	Sources func() []Source
	// Interval between collections of new points (1s).
	Interval time.Duration
	// BatchSamples is the most samples in one request (5,000).
	BatchSamples int
	// QueueBatches bounds the batches waiting to be sent (200: one
	// million samples at most). When full, new batches are dropped and
	// counted: a receiver down for minutes costs bounded memory.
	QueueBatches int
	// Timeout bounds one request (10s).
	Timeout time.Duration
	Client  *http.Client
	Log     *slog.Logger
}

// cursor is a chart's newest second sent and the collection that last
// found the chart.
type cursor struct {
	last int64
	pass uint64
}

// Writer sends new tier-0 points to a Prometheus remote-write receiver.
type Writer struct {
	cfg   Config
	queue chan []Series
	// cursor is the newest second sent per source and chart (collector
	// goroutine only); pass numbers the collections, so that the cursors
	// of charts gone from the sources are dropped.
	cursor map[string]cursor
	pass   uint64
	// unsent is the batch Send was retrying when its context ended
	// (Run's flush sends it).
	unsent []Series

	// Counters: samples sent (acknowledged 2xx), dropped at the full
	// queue, failed (refused by the receiver with 4xx), requests retried.
	Sent, Dropped, Failed, Retries, Requests atomic.Int64
}

// New makes a writer; Run starts it.
func New(cfg Config) (*Writer, error) {
	if cfg.URL == "" || cfg.Sources == nil {
		return nil, errors.New("remotewrite: URL and Sources are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.BatchSamples <= 0 {
		cfg.BatchSamples = 5000
	}
	if cfg.QueueBatches <= 0 {
		cfg.QueueBatches = 200
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.Timeout}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Writer{cfg: cfg, queue: make(chan []Series, cfg.QueueBatches), cursor: map[string]cursor{}}, nil
}

// Queued is the number of batches waiting.
func (w *Writer) Queued() int { return len(w.queue) }

// Status is the writer's counters for the API.
func (w *Writer) Status() map[string]any {
	return map[string]any{
		"url": w.cfg.URL, "samples_sent": w.Sent.Load(), "samples_dropped": w.Dropped.Load(),
		"samples_failed": w.Failed.Load(), "requests": w.Requests.Load(), "retries": w.Retries.Load(),
		"queued_batches": len(w.queue), "queue_batches_max": cap(w.queue),
	}
}

// Run collects and sends until ctx is done. Then it collects once more
// and sends what is queued, each batch tried once, within the Timeout:
// the points written since the last collection reach the receiver when
// the agent stops, and a receiver that is down or slow delays the stop
// by one Timeout at most (what is not sent is counted as dropped).
func (w *Writer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.Send(ctx) }()
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		w.Collect()
		select {
		case <-ctx.Done():
			wg.Wait()
			w.flush()
			return
		case <-t.C:
		}
	}
}

// flush collects once more and sends the batch Send was trying and the
// queued ones, in order, once each, within one Timeout.
func (w *Writer) flush() {
	w.Collect()
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.Timeout)
	defer cancel()
	var raw, enc []byte
	batch := w.unsent
	w.unsent = nil
	for {
		if batch == nil {
			select {
			case batch = <-w.queue:
			default:
				return
			}
		}
		n := samples(batch)
		raw = AppendWriteRequest(raw[:0], batch)
		enc = snappy.Encode(enc[:cap(enc)], raw)
		batch = nil
		err := w.post(ctx, enc)
		var perm permanentError
		switch {
		case err == nil:
			w.Sent.Add(int64(n))
		case errors.As(err, &perm):
			w.Failed.Add(int64(n))
			w.cfg.Log.Warn("remote write refused a batch", "samples", n, "err", err)
		default:
			w.Dropped.Add(int64(n))
			for len(w.queue) > 0 {
				w.Dropped.Add(int64(samples(<-w.queue)))
			}
			w.cfg.Log.Warn("remote write stopped with batches unsent", "err", err)
			return
		}
	}
}

func samples(batch []Series) int {
	n := 0
	for _, s := range batch {
		n += len(s.Samples)
	}
	return n
}

// Collect queues the points written since the last call. Only one
// goroutine may call it (Run's, or a benchmark's). The first call
// per chart starts at its newest point: a receiver refuses samples much
// older than what it holds, so history is not backfilled, and no point
// over maxAge old is sent, the first or a later one. The cursor of
// a chart gone from the sources is dropped: one that comes back starts
// again at its newest point.
func (w *Writer) Collect() {
	var batch []Series
	n := 0
	flush := func() {
		if len(batch) == 0 {
			return
		}
		select {
		case w.queue <- batch:
		default:
			w.Dropped.Add(int64(n))
		}
		batch, n = nil, 0
	}
	w.pass++
	oldest := time.Now().Add(-maxAge).Unix()
	for _, src := range w.cfg.Sources() {
		for _, def := range src.DB.Charts() {
			last, _, ok := src.DB.Latest(def.ID)
			key := src.Instance + "\x00" + src.Key + "\x00" + def.ID
			c, seen := w.cursor[key]
			if seen {
				c.pass = w.pass
				w.cursor[key] = c
			}
			if !ok || (seen && last <= c.last) {
				continue
			}
			cur := c.last
			if !seen {
				cur = last - 1
			}
			if cur < oldest-1 {
				cur = oldest - 1
				if last <= cur {
					w.cursor[key] = cursor{last: last, pass: w.pass}
					continue
				}
			}
			win, err := src.DB.QueryFor(store.ReadExporters, def.ID, 0, cur+1, last)
			if err == nil && !def.HasDims(win.Dims) {
				// Redefined since Charts was read: its points are those of
				// the new definition, which the next collection reads.
				continue
			}
			w.cursor[key] = cursor{last: last, pass: w.pass}
			if err != nil || len(win.Slots) == 0 {
				continue
			}
			name := api.PromMetricName(def)
			for d, dim := range def.Dims {
				s := Series{Labels: []Label{
					{"__name__", name}, {"chart", def.ID}, {"dimension", dimName(dim)},
					{"family", def.Family}, {"instance", src.Instance},
				}}
				if src.Key != "" {
					s.Labels = append(s.Labels, Label{"peer_key", src.Key})
				}
				SortLabels(s.Labels)
				for k, slot := range win.Slots[d] {
					if slot.Count > 0 {
						s.Samples = append(s.Samples, Sample{Value: slot.Sum, Timestamp: (win.Start + int64(k)) * 1000})
					}
				}
				if len(s.Samples) == 0 {
					continue
				}
				batch = append(batch, s)
				n += len(s.Samples)
				if n >= w.cfg.BatchSamples {
					flush()
				}
			}
		}
	}
	flush()
	for k, c := range w.cursor {
		if c.pass != w.pass {
			delete(w.cursor, k)
		}
	}
}

// maxAge is the age past which points are not sent: Prometheus refuses
// a sample over an hour older than the newest it holds, and with it every
// sample of the request, so the hours-old points of one node (a child
// whose clock is behind, or that says so) would cost every node its
// batch.
const maxAge = 50 * time.Minute

func dimName(d store.DimDef) string {
	if d.Name != "" {
		return d.Name
	}
	return d.ID
}

// Send posts queued batches in order until ctx is done (Run starts it;
// benchmarks drive Collect and Send themselves), retrying a batch with
// backoff while the receiver is unreachable or answers 5xx/429 (waiting
// at least what its Retry-After asks, up to maxRetryAfter), dropping
// it on other 4xx answers (the receiver will never take it).
func (w *Writer) Send(ctx context.Context) {
	var raw, enc []byte
	for {
		var batch []Series
		select {
		case <-ctx.Done():
			return
		case batch = <-w.queue:
		}
		n := samples(batch)
		raw = AppendWriteRequest(raw[:0], batch)
		enc = snappy.Encode(enc[:cap(enc)], raw)
		bo := transport.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}
		for {
			err := w.post(ctx, enc)
			if err == nil {
				w.Sent.Add(int64(n))
				break
			}
			var perm permanentError
			if errors.As(err, &perm) {
				w.Failed.Add(int64(n))
				w.cfg.Log.Warn("remote write refused a batch", "samples", n, "err", err)
				break
			}
			w.Retries.Add(1)
			wait := bo.Next()
			var ra retryAfterError
			if errors.As(err, &ra) {
				wait = max(wait, ra.after)
			}
			select {
			case <-ctx.Done():
				w.unsent = batch
				return
			case <-time.After(wait):
			}
		}
	}
}

type permanentError struct{ error }

// maxRetryAfter bounds the wait a receiver's Retry-After asks for.
const maxRetryAfter = 5 * time.Minute

// retryAfterError is a 429 or 5xx answer whose Retry-After asked to wait
// after (at most maxRetryAfter) before the batch is sent again.
type retryAfterError struct {
	error
	after time.Duration
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(h, 10, 64); err == nil {
		d = time.Duration(min(max(n, 0), int64(maxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

func (w *Writer) post(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return permanentError{err}
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	req.Header.Set("User-Agent", "peerdns-agent/"+api.Version)
	w.Requests.Add(1)
	resp, err := w.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode/100 == 5:
		err := fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
		if d := retryAfter(resp.Header.Get("Retry-After"), time.Now()); d > 0 {
			return retryAfterError{err, d}
		}
		return err
	}
	return permanentError{fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))}
}
