package vif

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
)

// macOS has no dummy links: the addresses become aliases of lo0, which
// is what such tools do there (ifconfig needs root). The name of the
// Manager is only a label on this system.

var errPermission = os.ErrPermission

// FixCommand is how the node gets the privilege here: macOS has no
// capability to grant a binary, and only root may alias lo0.
const FixCommand = "sudo peerdns node"

// privilegeAdvice follows a permission error.
const privilegeAdvice = "putting a domain's address on lo0 needs root (ifconfig lo0 alias): run the node as root, " +
	"`" + FixCommand + "` with its usual flags"

type darwinSystem struct{}

func newSystem() system { return darwinSystem{} }

func (darwinSystem) ensure(string) (bool, error) {
	if os.Geteuid() != 0 {
		return false, fmt.Errorf("ifconfig lo0 alias: %w", os.ErrPermission)
	}
	return false, nil
}

// listAddrs is none: lo0's aliases cannot be told from the operator's own,
// so none left by a node that crashed is taken off.
func (darwinSystem) listAddrs(string) ([]netip.Addr, error) { return nil, nil }

func ifconfig(args ...string) error {
	out, err := exec.Command("ifconfig", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ifconfig %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "inet"
	}
	return "inet6"
}

func (darwinSystem) add(_ string, a netip.Addr) error {
	return ifconfig("lo0", family(a), "alias", netip.PrefixFrom(a, a.BitLen()).String())
}

func (darwinSystem) del(_ string, a netip.Addr) error {
	return ifconfig("lo0", family(a), "-alias", a.String())
}

func (s darwinSystem) remove(name string, have []netip.Addr) error {
	var first error
	for _, a := range have {
		if err := s.del(name, a); err != nil && first == nil {
			first = err
		}
	}
	return first
}
