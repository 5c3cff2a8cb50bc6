//go:build !linux

package dns

import "net"

// steerByCPU: only Linux has the reuseport BPF hook; elsewhere the
// server has one UDP socket and nothing to steer.
func steerByCPU(c *net.UDPConn, sockets int) error { return nil }
