// Package fleet is parent mode: children stream their tier-0 points to a
// parent over the peer transport, and the parent answers for them.
//
// Child (child.go) reads its own store and sends what the parent lacks:
// the parent's reply to the stream call holds its newest second per
// chart (as many charts as one frame holds; the others are sent again
// from the child's ring, the seconds the parent has skipped), so
// resuming after a disconnect needs no buffer beyond the child's tier-0
// ring. Batches wait for acks in a window of 8; a full
// window stops the child reading its store (backpressure, no growth).
//
// Parent (parent.go) keeps one memory store and one api.Server per child,
// keyed by the child's peer key (a child can only ever write its own
// node), lists the children with their state (api.Fleet) and hands a
// query with a node filter to the child's server (which refuses the
// process table and logs: only metrics are streamed). Caps: dimensions per
// child, the length of a chart's strings, points from the future, frame
// size (messages.AgentMaxFrame), idle streams.
//
// It must never: trust a child's hello for who it is (the key is), store
// a point more than FutureSlack ahead of its clock, or keep a second
// stream of one child (a newer one replaces it).
package fleet
