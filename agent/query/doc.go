// Package query turns copied store windows into Netdata-shaped data query
// results: it resolves after/before the way Netdata does (absolute unix
// seconds, or negative values relative to now and to before), downsamples
// to the requested number of points with the average, min, max, sum or
// median of each group of slots, filters dimensions, applies Netdata's
// options (nonzero, null2zero, abs, percentage, flip, seconds, ms, ...) and
// renders json, csv, tsv, ssv, array and the jsonwrap envelope.
//
// Everything here is a pure function of its inputs (the caller passes "now"
// and the windows it read from the store), so it is tested with known
// series and never touches the store, the clock or HTTP. Rendering appends
// to caller-owned byte slices so the API can reuse buffers.
package query
