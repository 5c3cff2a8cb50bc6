package ml

import (
	"math"
	"math/rand/v2"
)

// Synthetic series for the detector's tests and benchmarks: shapes a host
// shows (noise around a level, a slow wave, an autocorrelated walk around
// a mean), an hour to train on with a few natural spikes in it, then an
// hour with injected level shifts and spikes at known seconds.

// synthKind is the shape of a synthetic dimension.
type synthKind int

const (
	synthNoise synthKind = iota // level 50, noise sd 2
	synthWave                   // sine of period 300 s, amplitude 10, noise sd 1
	synthAR                     // AR(1), phi 0.9, innovations sd 1, around 20
	synthKinds
)

// synthSeries is one dimension: values, the seconds where an injected
// anomaly starts (onsets) and every second an injected change happens
// (edges: onsets and the returns of level shifts).
type synthSeries struct {
	x      []float32
	train  int // the first train values are the training hour
	onsets []int
	kinds  []string // "shift" or "spike", per onset
	edges  []int
}

// sd is the noise scale of a kind (what shifts and spikes are sized by).
func (k synthKind) sd() float64 {
	switch k {
	case synthWave:
		return 1
	case synthAR:
		return 1 / math.Sqrt(1-0.81) // stationary sd of the AR(1)
	}
	return 2
}

// makeSeries draws one dimension: trainSecs normal seconds (with a spike
// every 1200 s, as real data has), then testSecs with an injected anomaly
// every 120 s alternating a level shift of 5 sd lasting 60 s and a spike
// of 8 sd for one second.
func makeSeries(k synthKind, seed uint64, trainSecs, testSecs int) synthSeries {
	return makeSeriesOpt(k, seed, trainSecs, testSecs, true)
}

// makeSeriesOpt is makeSeries, with or without the training-hour spikes.
func makeSeriesOpt(k synthKind, seed uint64, trainSecs, testSecs int, trainSpikes bool) synthSeries {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	n := trainSecs + testSecs
	s := synthSeries{x: make([]float32, n), train: trainSecs}
	add := make([]float64, n)
	for t := 600; trainSpikes && t < trainSecs; t += 1200 {
		add[t] += 8 * k.sd() // natural spikes in the training hour
	}
	for i, t := 0, trainSecs+60; t+70 < n; i, t = i+1, t+120 {
		s.onsets = append(s.onsets, t)
		s.edges = append(s.edges, t)
		if i%2 == 0 {
			s.kinds = append(s.kinds, "shift")
			for u := t; u < t+60; u++ {
				add[u] += 5 * k.sd()
			}
			s.edges = append(s.edges, t+60)
		} else {
			s.kinds = append(s.kinds, "spike")
			add[t] += 8 * k.sd()
		}
	}
	ar := 0.0
	for t := 0; t < n; t++ {
		var v float64
		switch k {
		case synthNoise:
			v = 50 + 2*r.NormFloat64()
		case synthWave:
			v = 100 + 10*math.Sin(2*math.Pi*float64(t)/300) + r.NormFloat64()
		case synthAR:
			ar = 0.9*ar + r.NormFloat64()
			v = 20 + ar
		}
		s.x[t] = float32(v + add[t])
	}
	return s
}

// reach is how long after an injected change its effect may still show in
// the feature vectors (the history a vector spans, plus a second).
const reach = histLen + 1

// evalResult counts what a detector flagged on the test part of series.
type evalResult struct {
	events, detected       int // injected onsets, and those flagged within reach
	shifts, shiftsDetected int
	spikes, spikesDetected int
	normal, falsePos       int // test seconds beyond reach of every change, and those flagged
}

func (e *evalResult) add(o evalResult) {
	e.events += o.events
	e.detected += o.detected
	e.shifts += o.shifts
	e.shiftsDetected += o.shiftsDetected
	e.spikes += o.spikes
	e.spikesDetected += o.spikesDetected
	e.normal += o.normal
	e.falsePos += o.falsePos
}

func (e evalResult) detectionRate() float64 { return float64(e.detected) / float64(max(e.events, 1)) }
func (e evalResult) falsePositiveRate() float64 {
	return float64(e.falsePos) / float64(max(e.normal, 1))
}

// score compares flags (one per second of s.x) with the injected changes.
func score(s synthSeries, flags []bool) evalResult {
	var e evalResult
	near := make([]bool, len(s.x))
	for _, t := range s.edges {
		for u := t; u < min(t+reach, len(near)); u++ {
			near[u] = true
		}
	}
	for i, t := range s.onsets {
		hit := false
		for u := t; u < min(t+reach, len(flags)); u++ {
			hit = hit || flags[u]
		}
		e.events++
		if hit {
			e.detected++
		}
		if s.kinds[i] == "shift" {
			e.shifts++
			if hit {
				e.shiftsDetected++
			}
		} else {
			e.spikes++
			if hit {
				e.spikesDetected++
			}
		}
	}
	for t := s.train + histLen; t < len(s.x); t++ {
		if near[t] {
			continue
		}
		e.normal++
		if flags[t] {
			e.falsePos++
		}
	}
	return e
}

// evaluate trains on each series' training hour with p and scores the
// flags of its test hour.
func evaluate(series []synthSeries, p trainParams) evalResult {
	var total evalResult
	for _, s := range series {
		rows, n := features(nil, s.x[:s.train])
		m, _ := train(rows, n, p, nil)
		flags := make([]bool, len(s.x))
		var f [featLen]float32
		for t := s.train + histLen; t < len(s.x); t++ {
			featureOf(&f, s.x[t-histLen+1:t+1])
			flags[t] = m.anomalous(f[:])
		}
		total.add(score(s, flags))
	}
	return total
}

func synthSet(perKind int) []synthSeries { return synthSetOpt(perKind, true) }

func synthSetOpt(perKind int, trainSpikes bool) []synthSeries {
	var out []synthSeries
	for k := synthKind(0); k < synthKinds; k++ {
		for i := 0; i < perKind; i++ {
			out = append(out, makeSeriesOpt(k, uint64(k)*1000+uint64(i)+1, 3600, 3600, trainSpikes))
		}
	}
	return out
}
