// Package query turns copied store windows into Netdata-shaped data query
// results: it resolves after/before the way Netdata does (absolute unix
// seconds, or negative values relative to now and to before), downsamples
// to the requested number of points with Netdata 1.37's groupings (average,
// min, max, sum, median, incremental-sum, stddev, cv, ses, des, extremes,
// trimmed-mean, percentile), filters dimensions, applies Netdata's options
// (nonzero, null2zero, abs, percentage, flip, seconds, ms, ...) and renders
// json, csv, tsv, ssv, ssvcomma, array, jsonp, datatable, datasource,
// csvjsonarray, html, markdown and the jsonwrap envelope. A window that
// starts before the stored data keeps its after, with null rows, as
// Netdata pads it.
//
// Everything here is a pure function of its inputs (the caller passes "now"
// and the windows it read from the store), so it is tested with known
// series and never touches the store, the clock or HTTP. Rendering appends
// to caller-owned byte slices so the API can reuse buffers.
package query
