package upstream

import (
	"sync/atomic"
	"time"
)

// LatencyBuckets are the upper bounds, in seconds, of the upstream
// round-trip histogram: from a resolver on the same LAN (about a
// millisecond) to a timeout (Config.Timeout defaults to one second).
var LatencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// latency is a histogram of upstream exchanges kept in atomics, so the
// forwarding path never takes a lock for it and a reader (the node's
// /metrics) builds the cumulative form only when asked.
type latency struct {
	buckets [13]atomic.Int64 // one per LatencyBuckets bound, the last for +Inf; not cumulative
	sumNano atomic.Int64
	count   atomic.Int64
}

func (l *latency) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(LatencyBuckets) && s > LatencyBuckets[i] {
		i++
	}
	l.buckets[i].Add(1)
	l.sumNano.Add(int64(d))
	l.count.Add(1)
}

// Latency is a reading of the upstream round-trip histogram: every
// exchange with one upstream server (an answer, a timeout or an error),
// in seconds.
type Latency struct {
	Count uint64
	Sum   float64 // seconds
	// Cumulative maps each LatencyBuckets bound to the exchanges that
	// took at most that long.
	Cumulative map[float64]uint64
}

// Latency reads the upstream round-trip histogram.
func (r *Resolver) Latency() Latency {
	out := Latency{Cumulative: make(map[float64]uint64, len(LatencyBuckets))}
	var acc uint64
	for i, b := range LatencyBuckets {
		acc += uint64(r.lat.buckets[i].Load())
		out.Cumulative[b] = acc
	}
	// Count is read last: an exchange observed between the reads shows
	// in Count and not yet in a bucket, never the other way round, so
	// the +Inf bucket (Count) is never below the last bound.
	out.Sum = float64(r.lat.sumNano.Load()) / float64(time.Second)
	out.Count = max(uint64(r.lat.count.Load()), acc)
	return out
}
