// Package query turns copied store windows into Netdata-shaped data query
// results: it resolves after/before the way Netdata does (absolute unix
// seconds, or negative values relative to now and to before), downsamples
// to the requested number of points with Netdata 1.37's groupings (average,
// min, max, sum, median, incremental-sum, stddev, cv, ses, des, extremes,
// trimmed-mean, percentile, countif with its condition), filters dimensions, applies Netdata's options
// (nonzero, null2zero, abs, percentage, flip, seconds, ms, ...) and renders
// json, csv, tsv, ssv, ssvcomma, array, jsonp, datatable, datasource,
// csvjsonarray, html, markdown and the jsonwrap envelope. A window that
// starts before the stored data keeps its after, with null rows, as
// Netdata pads it. options=anomaly-bit (v1 and v2) makes each point its
// anomaly rate: the percent of its stored points the detector flagged,
// whatever the group (Netdata groups the bits with it; only average
// gives the same), null where no point is stored, and no percentage of
// the total on top.
//
// v2.go, v2run.go and json2.go are Netdata's v2 query model: scopes and
// selectors over nodes, contexts, instances, dimensions and labels
// (SelectV2), time grouping then group_by with an aggregation across
// metrics, time_resampling and the cardinality fold (RunV2), and the json2
// answer with its summary, totals, db, view and result sections
// (AppendJSON2). RunV2 keeps one instance's rows at a time (the
// instance total of options=percentage needs them) and the groups' running sums,
// so its memory is the output size plus one instance, not every metric's
// rows; it checks the caller's deadline between instances.
// aggregation=percentage is Netdata's percentage of the group: the
// metrics a dimensions selector leaves out of a selected instance are
// still read (V2Metric.Hidden) into their group's hidden part, and a
// point is selected*100/(selected+hidden); with options=raw the point
// keeps the selected sum and json2 writes the hidden sum beside it. A
// second pass's percentage stays a share of its row (the hidden parts
// belong to the first pass's groups). group_by=percentage-of-instance is
// the same percentage over one group per instance (Netdata drops the
// other groupings and the aggregation; with aggregation=average it also
// divides the share by the number of selected metrics, which with the one
// dimension its dashboards select changes nothing, and here never
// happens; it answers the plain aggregation when nothing in the whole
// query is hidden, here 100, as for aggregation=percentage). v2/v3 q's pattern is
// CompileSearch, Netdata's case-insensitive pattern in substring mode.
//
// A v1 query's dimensions pattern is every dimension, dim, dimensions
// and dims argument joined by '|' (DimensionArgs), as Netdata reads them,
// and split into words at ',' and '|' (and tabs and line breaks) but not
// at spaces, so a dimension name with spaces is one word.
//
// Run and RunV2 refuse (TooLargeError) an answer of more than
// MaxAnswerCells values before computing it.
//
// Everything here is a pure function of its inputs (the caller passes "now"
// and the windows it read from the store), so it is tested with known
// series and never touches the store, the clock or HTTP. Rendering appends
// to caller-owned byte slices so the API can reuse buffers.
package query
