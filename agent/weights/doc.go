// Package weights ranks the agent's dimensions by how much they changed in
// a highlight window (/api/vN/weights; the HTTP answer is agent/api's
// weights.go). It reads the store (and, for alerts, the alert engine) and
// never changes them.
//
// A query has a highlight (After, Before]: after and before, or
// Netdata's other names highlight_after and highlight_before (points may
// be max_points), read as Netdata reads them: values up to three years
// are relative whatever their sign (before=30 is before=-30, 30 s back
// from now; after counts back from before), after=0 is the default
// after (-300), larger values are unix seconds; and, for the methods that
// compare, a baseline (BaselineAfter, BaselineBefore], by default the four
// highlights right before it. Both are read from one tier (tier 0 unless
// together they are longer than tier 0 keeps) and grouped into points of
// ceil(highlight slots / points) slots each (points defaults to 500, so a
// 1-minute highlight keeps its 60 seconds and the baseline its 240);
// volume reads the slots ungrouped. The answer's points (view.highlight,
// view.baseline) count the points a window held for ks2 and volume.
// Higher weight means more changed, for every method:
//
//   - ks2: the two-sample Kolmogorov–Smirnov statistic D between the
//     baseline and highlight points (gonum's stat.KolmogorovSmirnov), in
//     [0, 1]; info has the asymptotic p-value. Netdata 1.37 runs the test
//     on the differences of consecutive points, which a level shift
//     barely moves (one large difference among many); comparing the
//     values themselves ranks a shifted metric first.
//   - volume: Netdata's volume method, scale-aware: |highlight average -
//     baseline average| / max(|baseline average|, baseline stddev), times
//     the share of highlight points on the far side of the baseline
//     average (a flat zero baseline gives just that share, as Netdata's
//     "percentage of time"). The stddev in the scale keeps a noisy metric
//     around zero from dwarfing real changes.
//   - anomaly-rate: the share of the highlight's points the detector
//     (agent/ml) flagged, in [0, 1]; info has it in percent.
//   - value: the highlight aggregated with time_group (cv by default: the
//     coefficient of variation in percent; average, min, max, sum,
//     median, stddev); weight = |value|.
//   - alerts: per chart, not per dimension: the worst status its alerts
//     held (CRITICAL 1, WARNING 0.5; 0.25 for alerts that changed but
//     ended clear) plus 0.01 per transition in the window (up to 10).
//     Without a window (no after, no before) this is the default method
//     and scores the alerts raised now.
//
// Decisions where the spec is silent:
//   - Hidden dimensions (system.cpu idle) are left out unless a
//     dimensions filter is given, as Netdata does for ks2.
//   - The detector's own charts (anomaly_detection.*) are left out unless
//     a charts or contexts filter is given: they sum up every other
//     dimension, so they move with any change and would crowd the top.
//   - No results is a 200 with an empty list (Netdata answers 404 "no
//     results produced."): an empty answer is a valid one, e.g. no alert
//     raised.
//   - The time budget (timeout, ms) is checked between charts; when it
//     runs out the answer keeps the charts examined and says partial
//     (Netdata answers 504 and drops them).
//   - Netdata's own v1 members carry Netdata's numbers: for ks2 and volume
//     its rank spread over [0, 1) with the most changed lowest
//     (NetdataScores), so a dashboard written for 1.37 orders them as it
//     expects; results[].weight is always "higher is more changed".
//   - limit caps the results after sorting (absent: all); limit < 1,
//     points < 1, an unknown method or time_group, after >= before, and a
//     chart or context filter containing "/" or ".." are 400s.
//
// Files: request.go (parameters), compute.go (the scan and the budget),
// methods.go (the scores and Netdata's spread).
package weights
