// Package vif is the node's virtual interface: the link that carries the
// local IPs of domains when they come from a subnet outside the loopback
// range, so that a tunnel client can listen on a domain's LAN-style
// address and other machines of the LAN reach it.
//
// On Linux the interface is a dummy link (default name peerdns0) driven
// through netlink (github.com/vishvananda/netlink), or a bridge without
// ports on a kernel built without the dummy driver; each address goes on
// it as a /32 (/128), which adds no route: the machines of the LAN reach
// it because the subnet is on their link (Linux answers ARP for any
// local address by default) or because their router sends the subnet to
// the node. On macOS the addresses are aliases of lo0 (ifconfig); other
// systems are not supported and say so. Loopback addresses need nothing:
// all of 127.0.0.0/8 is local on Linux already.
//
// Manager is not an actor: the node calls Sync from the view's
// subscriber goroutine with every address it wants (Sync is idempotent
// and serialised), and Close at shutdown, which removes the link (or the
// aliases) and with it every address. The link is made on the first
// address that needs it, or by Up (the node calls it at start when a
// configured subnet lies outside loopback), so a node with only loopback
// subnets never touches the host's interfaces.
//
// Making the link and adding addresses needs CAP_NET_ADMIN (or root) on
// Linux, root on macOS. Without it Sync records the error, logs it once
// with the command that fixes it on this system (FixCommand), and
// Explain hands the same advice to a tunnel client whose bind failed, so
// the client's error names the cure instead of "cannot assign requested
// address".
//
// One node per machine owns a given name: a link of that name left by a
// node that crashed is adopted with the host addresses on it (Sync takes
// off those it does not want, Close removes the link). While up, every
// Sync makes the link again if it was deleted from outside, and puts
// the addresses back on it.
package vif

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"sync"
)

// DefaultName is the interface name used when Config.Name is empty.
const DefaultName = "peerdns0"

// Config configures a Manager.
type Config struct {
	Name string // link name; DefaultName when empty
	Log  *slog.Logger
}

// Status is what the manager holds now.
type Status struct {
	Name  string       `json:"name"`
	Up    bool         `json:"up"`    // the link exists (Linux) or aliases are in use (macOS)
	Addrs []netip.Addr `json:"addrs"` // addresses on it, sorted
	Error string       `json:"error,omitempty"`
}

// Manager owns the virtual interface. Safe for concurrent use.
type Manager struct {
	name string
	log  *slog.Logger
	sys  system

	mu    sync.Mutex // guards the fields below and serialises system calls
	up    bool
	have  map[netip.Addr]bool
	err   error  // the last failure (nil after a full success)
	told  string // the failure logged last, so each is logged once
	close bool
}

// system is the platform part (vif_linux.go, vif_darwin.go, vif_other.go).
type system interface {
	ensure(name string) (made bool, err error)   // make the link when absent (made) and bring it up
	listAddrs(name string) ([]netip.Addr, error) // the host addresses on the link that Need it
	add(name string, a netip.Addr) error
	del(name string, a netip.Addr) error
	remove(name string, have []netip.Addr) error // drop the link / the aliases
}

// New returns a manager; nothing is changed on the machine until Sync
// asks for an address outside loopback.
func New(c Config) *Manager {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return &Manager{name: c.Name, log: c.Log, sys: newSystem(), have: map[netip.Addr]bool{}}
}

// Name is the interface's name.
func (m *Manager) Name() string { return m.name }

// Needs reports whether addr must be put on the interface to be
// listened on: a valid address outside loopback.
func Needs(addr netip.Addr) bool {
	return addr.IsValid() && !addr.Unmap().IsLoopback() && !addr.IsUnspecified()
}

// Up makes the interface now, without addresses (a node whose subnets
// lie outside loopback owns it from its start, so it is listed before
// the first domain gets an address).
func (m *Manager) Up() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.close || m.up {
		return nil
	}
	if err := m.ensure(); err != nil {
		m.fail(err)
		return m.err
	}
	return nil
}

// ensure makes the link when it is absent; called with mu held. A link
// there at the first call was left by a node that crashed: the
// addresses on it are taken as had, so Sync takes off those not wanted.
// One made again while up was deleted from outside, its addresses with
// it.
func (m *Manager) ensure() error {
	made, err := m.sys.ensure(m.name)
	if err != nil {
		return fmt.Errorf("make interface %s: %w", m.name, err)
	}
	switch {
	case !m.up && !made:
		left, err := m.sys.listAddrs(m.name)
		if err != nil {
			return fmt.Errorf("read the addresses on interface %s: %w", m.name, err)
		}
		for _, a := range left {
			m.have[a.Unmap()] = true
		}
		if len(left) > 0 {
			m.log.Info("virtual interface adopted with addresses", "name", m.name, "addrs", len(left))
		}
	case m.up && made:
		clear(m.have)
		m.log.Warn("virtual interface was deleted from outside; made again", "name", m.name)
	}
	if !m.up {
		m.up = true
		m.log.Info("virtual interface up", "name", m.name)
	}
	return nil
}

// Sync makes the interface carry exactly the addresses of want that
// need it (Needs); the rest of want is ignored. It returns the first
// failure (also kept for Explain and Status, and logged once).
func (m *Manager) Sync(want []netip.Addr) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.close {
		return nil
	}
	set := map[netip.Addr]bool{}
	for _, a := range want {
		if Needs(a) {
			set[a.Unmap()] = true
		}
	}
	var errs []error
	if len(set) > 0 || m.up {
		if err := m.ensure(); err != nil {
			m.fail(err)
			return m.err
		}
	}
	for a := range m.have {
		if !set[a] {
			if err := m.sys.del(m.name, a); err != nil {
				errs = append(errs, fmt.Errorf("take %s off %s: %w", a, m.name, err))
				continue
			}
			delete(m.have, a)
			m.log.Info("address off the virtual interface", "name", m.name, "addr", a.String())
		}
	}
	for _, a := range sorted(set) {
		if m.have[a] {
			continue
		}
		if err := m.sys.add(m.name, a); err != nil {
			errs = append(errs, fmt.Errorf("put %s on %s: %w", a, m.name, err))
			continue
		}
		m.have[a] = true
		m.log.Info("address on the virtual interface", "name", m.name, "addr", a.String())
	}
	if len(errs) > 0 {
		m.fail(errors.Join(errs...))
		return m.err
	}
	m.err, m.told = nil, ""
	return nil
}

// fail records err and logs it once, with the advice for a permission
// error. Called with mu held.
func (m *Manager) fail(err error) {
	m.err = advise(err)
	if s := m.err.Error(); s != m.told {
		m.told = s
		m.log.Error("virtual interface", "err", s)
	}
}

// advise adds how to grant the privilege to a permission error: the
// privilege and the command that grants it on this system
// (privilegeAdvice, FixCommand: vif_linux.go, vif_darwin.go).
func advise(err error) error {
	if !errors.Is(err, errPermission) {
		return err
	}
	return fmt.Errorf("%w: %s", err, privilegeAdvice)
}

// Explain says why addr may not be listened on yet: nil when it needs no
// interface or is on it, the manager's failure when there is one, or a
// note that it is being added.
func (m *Manager) Explain(addr netip.Addr) error {
	if !Needs(addr) {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.have[addr.Unmap()] {
		return nil
	}
	if m.err != nil {
		return fmt.Errorf("%s is not on interface %s: %w", addr, m.name, m.err)
	}
	return fmt.Errorf("%s is not on interface %s yet", addr, m.name)
}

// Status is a copy of the manager's state.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Status{Name: m.name, Up: m.up, Addrs: sorted(m.have)}
	if m.err != nil {
		st.Error = m.err.Error()
	}
	return st
}

// Close removes the interface and its addresses; later Syncs do nothing.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.close = true
	if !m.up {
		return nil
	}
	err := m.sys.remove(m.name, sorted(m.have))
	m.up, m.have = false, map[netip.Addr]bool{}
	if err != nil {
		return fmt.Errorf("remove interface %s: %w", m.name, err)
	}
	m.log.Info("virtual interface removed", "name", m.name)
	return nil
}

func sorted(set map[netip.Addr]bool) []netip.Addr {
	out := make([]netip.Addr, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return slices.Clip(out)
}
