//go:build !linux

package udpgro

import "net"

const msgTrunc = 0

// setGRO: UDP_GRO is Linux's; elsewhere the socket is read as quic-go
// reads it.
func setGRO(*net.UDPConn, bool) bool { return false }

func buffers(*Reader, int) []byte { return nil }

func splitOOB(oob, rest []byte) (int, []byte) { return 0, append(rest, oob...) }

func appendWhole(dst, oob []byte) int { return len(append(dst, oob...)) }
