//go:build !linux

package dns

import (
	"errors"
	"net"
)

// Replies from the queried address are wired up on Linux only; elsewhere
// a wildcard-bound server's replies leave from the address routing picks
// (see README.md, "Known limits").

const havePktinfo = false

const ctlSize = 128

func enablePktinfo(*net.UDPConn) error {
	return errors.New("IP_PKTINFO is not wired up on this platform")
}

func replyControl(in, out []byte) int { return 0 }
