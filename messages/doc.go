// Package messages holds the typed messages that actors exchange and that
// cross the wire between peers: plain structs with no behaviour beyond
// validation and encoding, one file per family, plus the CBOR codec.
//
// Anything signed is encoded with the deterministic CBOR mode (Core
// Deterministic Encoding, RFC 8949 §4.2), so every node computes the same
// bytes for the same op and a signature made on one node verifies on all.
// Frames carry writer ids packed (32 bytes, not 64 hex characters), and
// signatures stay over the text form (packed.go).
package messages
