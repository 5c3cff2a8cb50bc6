// Package ml is the agent's anomaly detector: a model per dimension,
// trained on the dimension's recent history and retrained on a schedule
// spread over time, that flags each new point as anomalous or normal, in
// the manner of Netdata 1.37's machine learning.
//
// Model (model.go). Each point becomes a feature vector: the values are
// differenced once, the differences smoothed by a moving average of 3,
// and the vector holds the newest smoothed difference and the 5 before it
// (Netdata's diff 1, smooth 3, lag 5). A model is k-means with k = 2 over
// the feature vectors of the last hour (every 5th vector, Netdata's 20%
// sample), and a threshold on the distance to the nearer centroid. A point
// is anomalous when its distance passes the threshold.
//
// Threshold: median + 1.5 × (P99 − median) of the training distances,
// not Netdata's rule (0.99 of the range between the smallest and the
// largest training distance). Real history holds a few spikes; each makes
// the largest training distance huge, and Netdata's rule then lets almost
// every later change through. Quantiles ignore those few points, and the
// 1.5 stretch keeps the false positives at Netdata's level on clean data
// (a bare P99 flags about 1% of normal seconds by construction). Measured
// on the synthetic set of synth_test.go (3 shapes × 10 series; an hour of
// training, then an hour with a 5 sd level shift or an 8 sd spike every
// two minutes), BenchmarkDetectionQuality:
//
//	training hour          rule              detected   false positives
//	with 3 spikes (8 sd)   default           89.8%      0.005%
//	                       P99               99.1%      0.36%
//	                       Netdata 1.37      12.9%      0%
//	clean                  default           97.1%      0.051%
//	                       P99               99.9%      0.93%
//	                       Netdata 1.37      95.9%      0.039%
//
// TestDetectionRates checks these loosely. Config.Percentile, Margin and a
// negative Percentile (Netdata's rule) select the others.
//
// Schedule (detector.go). Tick runs once a second, after collection: for
// every chart with a new point it pushes the values into each dimension's
// 9-value history, scores the trained dimensions, and marks the anomalous
// ones in the store (store.MarkAnomalous: a bit beside the tier-0 point,
// counted in the tier-1 minute), so an anomaly rate can be asked of any
// window. A chart is first trained once its history has 900 vectors (15
// minutes), then every 30 minutes at an offset of the period taken from
// its id, so retraining spreads over the half hour; at most one chart is
// trained per tick. A gap (NaN) restarts a dimension's history; the
// detector's own charts and netdata.* charts (Netdata's default charts to
// skip) are never analysed.
//
// Charts: Netdata 1.37's anomaly_detection.dimensions_on_<guid> (name
// ..._on_<hostname>; dimensions total, trained, normal, anomalous) and
// anomaly_detection.anomaly_rate_on_<guid> (anomaly_rate, the percentage
// of anomalous dimensions), appended every tick.
//
// Events (events.go): a dimension turning anomalous (flagged now, not the
// second before) is an Event with its value and score (distance over
// threshold); the newest 4,096 are kept for the anomaly log source
// (Detector.Events pages them by sequence number). Stats gives the counts
// of the last tick and the dimensions flagged in it.
//
// Cost (bench_test.go, 2 shared cores): detection 0.1-0.4 µs per
// dimension per second, training 0.4-1.1 ms per dimension every 30
// minutes (0.2-0.6 µs/s amortized), and 132 bytes of state per dimension
// (the store's anomaly bits add 1 bit a second, 450 bytes an hour).
//
// The package never does HTTP; it reads and writes only the store.
package ml
