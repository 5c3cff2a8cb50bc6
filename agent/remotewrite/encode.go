package remotewrite

import (
	"math"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
)

// Label is one label of a series.
type Label struct{ Name, Value string }

// Sample is one point: milliseconds since the epoch.
type Sample struct {
	Value     float64
	Timestamp int64
}

// Series is one time series with the samples of a batch, oldest first.
type Series struct {
	Labels  []Label // sorted by name, __name__ included
	Samples []Sample
}

// Field numbers of Prometheus' remote-write 1.0 messages
// (prometheus/prompb/remote.proto and types.proto):
//
//	message WriteRequest { repeated TimeSeries timeseries = 1; ... }
//	message TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; ... }
//	message Label        { string name = 1; string value = 2; }
//	message Sample       { double value = 1; int64 timestamp = 2; }
//
// They are written with protowire, the Go protobuf project's wire
// encoder, instead of importing prometheus/prompb: that package lives in
// the prometheus/prometheus module, whose requirements would upgrade a
// dozen of this module's shared dependencies (OpenTelemetry,
// client_golang, x/net) for four messages of two fields each. The test
// against a real Prometheus receiver checks the encoding.
const (
	fWriteTimeseries = 1
	fSeriesLabels    = 1
	fSeriesSamples   = 2
	fLabelName       = 1
	fLabelValue      = 2
	fSampleValue     = 1
	fSampleTimestamp = 2
)

// SortLabels sorts labels by name, as the protocol requires.
func SortLabels(ls []Label) {
	sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
}

// AppendWriteRequest appends the protobuf encoding of a WriteRequest
// holding series to b.
func AppendWriteRequest(b []byte, series []Series) []byte {
	var ts, tmp []byte
	for i := range series {
		s := &series[i]
		ts = ts[:0]
		for _, l := range s.Labels {
			tmp = tmp[:0]
			tmp = protowire.AppendTag(tmp, fLabelName, protowire.BytesType)
			tmp = protowire.AppendString(tmp, l.Name)
			tmp = protowire.AppendTag(tmp, fLabelValue, protowire.BytesType)
			tmp = protowire.AppendString(tmp, l.Value)
			ts = protowire.AppendTag(ts, fSeriesLabels, protowire.BytesType)
			ts = protowire.AppendBytes(ts, tmp)
		}
		for _, p := range s.Samples {
			tmp = tmp[:0]
			tmp = protowire.AppendTag(tmp, fSampleValue, protowire.Fixed64Type)
			tmp = protowire.AppendFixed64(tmp, math.Float64bits(p.Value))
			tmp = protowire.AppendTag(tmp, fSampleTimestamp, protowire.VarintType)
			tmp = protowire.AppendVarint(tmp, uint64(p.Timestamp))
			ts = protowire.AppendTag(ts, fSeriesSamples, protowire.BytesType)
			ts = protowire.AppendBytes(ts, tmp)
		}
		b = protowire.AppendTag(b, fWriteTimeseries, protowire.BytesType)
		b = protowire.AppendBytes(b, ts)
	}
	return b
}
