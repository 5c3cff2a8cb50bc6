// Package remotewrite sends the agent's new tier-0 points to a Prometheus
// remote-write receiver (Prometheus with --web.enable-remote-write-receiver,
// VictoriaMetrics, Mimir, Thanos receive): remote-write 1.0, protobuf
// (encode.go) compressed with snappy (klauspost/compress/snappy, block
// format), one sender posting batches in order.
//
// It owns the collection cursor per source and chart, the bounded queue
// (full: new batches dropped and counted) and the retry policy (network
// errors, 5xx and 429 retried with capped backoff, or after the
// receiver's Retry-After when it asks longer, up to 5 minutes; other
// 4xx drop the batch and count it). It must never grow its memory with
// the time a receiver stays down, nor backfill history a receiver would
// refuse.
//
// When the agent stops, the writer collects once more and sends what is
// queued, each batch tried once within one request timeout; what is not
// sent then is lost (the queue is memory only), and the next start
// begins at each chart's newest point.
package remotewrite
