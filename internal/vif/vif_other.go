//go:build !linux && !darwin

package vif

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
)

var errPermission = os.ErrPermission

// FixCommand is empty: no privilege makes virtual interfaces work here.
const FixCommand = ""

// privilegeAdvice follows a permission error (none is expected here).
const privilegeAdvice = "virtual interfaces are not supported on this system: use a subnet on the loopback range (127.0.0.0/8)"

type otherSystem struct{}

func newSystem() system { return otherSystem{} }

func (otherSystem) ensure(string) (bool, error) {
	return false, fmt.Errorf("virtual interfaces are not supported on %s: use a subnet on the loopback range (127.0.0.0/8)", runtime.GOOS)
}
func (otherSystem) listAddrs(string) ([]netip.Addr, error) { return nil, nil }
func (otherSystem) add(string, netip.Addr) error {
	_, err := otherSystem{}.ensure("")
	return err
}
func (otherSystem) del(string, netip.Addr) error      { return nil }
func (otherSystem) remove(string, []netip.Addr) error { return nil }
