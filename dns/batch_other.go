//go:build !(linux && (amd64 || arm64))

package dns

import "net"

// serveUDP reads one datagram per system call where batched I/O is not
// wired up.
func (s *Server) serveUDP(c *net.UDPConn, sh *shard) { s.readLoop(c, sh) }
