package ml

import (
	"math"
	"slices"
)

// The feature vector of a point, as Netdata 1.37 builds it: the values
// are differenced once (diffN), the differences smoothed by a moving
// average of smoothN, and the vector holds the newest smoothed difference
// and the lagN before it. Differencing makes the model about changes, not
// levels, so a metric that drifts slowly is not anomalous; the lags let it
// see a short shape (a step, a spike and its return) instead of one value.
const (
	diffN   = 1
	smoothN = 3
	lagN    = 5
	// featLen is the length of a feature vector.
	featLen = lagN + 1
	// histLen is how many raw values one feature vector needs.
	histLen = diffN + smoothN - 1 + lagN + 1
)

// features appends the feature vector ending at each point of x that has
// histLen finite values up to it (NaN gaps break the history) to dst, as
// rows of featLen. It reports how many rows it appended.
func features(dst []float32, x []float32) ([]float32, int) {
	n := 0
	run := 0 // finite values in a row ending at i
	for i := range x {
		if x[i] != x[i] || math.IsInf(float64(x[i]), 0) {
			run = 0
			continue
		}
		run++
		if run < histLen {
			continue
		}
		var f [featLen]float32
		featureOf(&f, x[i-histLen+1:i+1])
		dst = append(dst, f[:]...)
		n++
	}
	return dst, n
}

// featureOf builds the feature vector of the newest of h (histLen raw
// values, oldest first).
func featureOf(f *[featLen]float32, h []float32) {
	var d [histLen - diffN]float64
	for k := range d {
		d[k] = float64(h[k+diffN]) - float64(h[k])
	}
	for j := 0; j < featLen; j++ {
		// f[0] is the newest smoothed difference, f[lagN] the oldest.
		end := len(d) - j // exclusive
		s := 0.0
		for k := end - smoothN; k < end; k++ {
			s += d[k]
		}
		f[j] = float32(s / smoothN)
	}
}

// model is one dimension's trained detector: two k-means centroids of its
// feature vectors and the distance above which a point is anomalous.
type model struct {
	c         [2][featLen]float32
	threshold float32
}

func dist(a *[featLen]float32, b []float32) float64 {
	s := 0.0
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		s += d * d
	}
	return math.Sqrt(s)
}

// distance is how far f is from the nearer centroid.
func (m *model) distance(f []float32) float64 {
	return min(dist(&m.c[0], f), dist(&m.c[1], f))
}

// anomalous reports whether f lies beyond the model's threshold.
func (m *model) anomalous(f []float32) bool { return m.distance(f) > float64(m.threshold) }

// trainParams are the knobs of one training run.
type trainParams struct {
	sampleEvery int     // k-means uses every sampleEvery-th vector (Netdata: a random 20%)
	maxIter     int     // Lloyd iterations at most
	percentile  float64 // 0 < p < 1: threshold from this quantile of training distances; 0: Netdata's rule
	// margin stretches the quantile away from the median distance:
	// threshold = median + margin*(quantile - median); 1 (or 0) is the
	// quantile itself.
	margin float64
}

// netdataScoreThreshold is Netdata 1.37's "dimension anomaly score
// threshold": a point is anomalous when its distance, scaled so that the
// training set's smallest distance is 0 and largest is 1, reaches 0.99.
const netdataScoreThreshold = 0.99

// train fits a model to the feature rows (featLen each; n of them) and
// returns it with the training distances sorted (callers may reuse the
// scratch). It needs at least two rows.
func train(rows []float32, n int, p trainParams, scratch []float64) (model, []float64) {
	var m model
	step := max(p.sampleEvery, 1)
	// Initial centroids: the sample mean and the sample farthest from it
	// (deterministic, and the two ends a k=2 split needs; Netdata uses
	// dlib's k-means++ style pick).
	var mean [featLen]float64
	cnt := 0
	for i := 0; i < n; i += step {
		r := rows[i*featLen : (i+1)*featLen]
		for j := range mean {
			mean[j] += float64(r[j])
		}
		cnt++
	}
	for j := range mean {
		mean[j] /= float64(cnt)
		m.c[0][j] = float32(mean[j])
	}
	far, farD := 0, -1.0
	for i := 0; i < n; i += step {
		if d := dist(&m.c[0], rows[i*featLen:(i+1)*featLen]); d > farD {
			far, farD = i, d
		}
	}
	copy(m.c[1][:], rows[far*featLen:(far+1)*featLen])
	// Lloyd's iterations on the sample.
	for it := 0; it < p.maxIter; it++ {
		var sum [2][featLen]float64
		var num [2]int
		for i := 0; i < n; i += step {
			r := rows[i*featLen : (i+1)*featLen]
			k := 0
			if dist(&m.c[1], r) < dist(&m.c[0], r) {
				k = 1
			}
			num[k]++
			for j := range r {
				sum[k][j] += float64(r[j])
			}
		}
		moved := false
		for k := range 2 {
			if num[k] == 0 {
				continue
			}
			for j := range featLen {
				v := float32(sum[k][j] / float64(num[k]))
				if v != m.c[k][j] {
					moved = true
				}
				m.c[k][j] = v
			}
		}
		if !moved {
			break
		}
	}
	// Threshold from the distances of every training vector.
	ds := scratch[:0]
	for i := 0; i < n; i++ {
		ds = append(ds, m.distance(rows[i*featLen:(i+1)*featLen]))
	}
	slices.Sort(ds)
	if p.percentile > 0 {
		q := quantile(ds, p.percentile)
		med := quantile(ds, 0.5)
		margin := p.margin
		if margin <= 0 {
			margin = 1
		}
		m.threshold = float32(med + margin*(q-med))
	} else {
		lo, hi := ds[0], ds[len(ds)-1]
		m.threshold = float32(lo + netdataScoreThreshold*(hi-lo))
	}
	return m, ds
}

// quantile is the p-quantile of sorted ds (the smallest value with at
// least a share p of ds at or below it).
func quantile(ds []float64, p float64) float64 {
	k := int(math.Ceil(p*float64(len(ds)))) - 1
	return ds[min(max(k, 0), len(ds)-1)]
}
