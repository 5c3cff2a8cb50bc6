package ml

// Event is one dimension turning anomalous: its point was flagged and the
// one before it was not. Events are what a log of anomalies lists (the
// `anomaly` log source); Netdata 1.37 keeps a host-level counterpart in
// its detector_events chart.
type Event struct {
	Seq       uint64  // increasing from 1, never reused in a run
	Time      int64   // unix second of the flagged point
	Chart     string  // chart id
	Context   string  // chart context
	Dimension string  // dimension id
	Name      string  // dimension name
	Value     float64 // the flagged point's value
	// Score is the point's distance to the nearer centroid over the
	// model's threshold: above 1 by definition, larger is more unusual.
	Score float64
}

// maxEvents bounds the events kept in memory (the oldest are dropped).
const maxEvents = 4096

// record appends an event to the ring. Called from Tick only; mu guards
// the ring for Events.
func (d *Detector) record(e Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	e.Seq = d.seq
	if len(d.events) < maxEvents {
		d.events = append(d.events, e)
		return
	}
	d.events[d.evHead] = e
	d.evHead = (d.evHead + 1) % maxEvents
}

// Events returns up to limit events with Seq > after, oldest first (limit
// <= 0: all kept). Safe to call from any goroutine; the slice is a copy.
func (d *Detector) Events(after uint64, limit int) []Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(d.events)
	var out []Event
	for i := 0; i < n; i++ {
		e := d.events[(d.evHead+i)%n]
		if e.Seq <= after {
			continue
		}
		out = append(out, e)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out
}
