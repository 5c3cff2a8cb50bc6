package localdns

import (
	"peerdns/messages"

	"fmt"
	"strings"

	"peerdns/internal/view"
)

// checkWildcard refuses a wildcard record ("*.<base>") that would shadow
// names the ledger answers: base is a claimed p2p domain, or lies under
// one (its subdomains are the domain's), or an internal domain; or base
// is "p2p" itself (it would answer every unclaimed .p2p name and hide
// that it is unclaimed). A wildcard above a claimed domain ("*.lan" with
// nas.lan claimed) is allowed: exact and p2p names beat wildcards in the
// answer table (dns/zone, cover). Other names pass. v may be nil.
func checkWildcard(name string, v *view.Snapshot) error {
	base, ok := messages.WildcardBase(name)
	if !ok {
		return nil
	}
	if base == "p2p" {
		return fmt.Errorf("%w: wildcard %q would answer every unclaimed .p2p name; .p2p names come from the ledger", messages.ErrInvalidRecord, name)
	}
	if v == nil {
		return nil
	}
	if d, ok := v.Lookup(base); ok {
		return fmt.Errorf("%w: wildcard %q would shadow the claimed p2p domain %q, whose names the ledger answers; add exact records instead, or use a name outside it", messages.ErrInvalidRecord, name, d.Name)
	}
	for n := base; n != ""; {
		if _, ok := v.Internal[n]; ok {
			return fmt.Errorf("%w: wildcard %q would shadow the internal domain %q", messages.ErrInvalidRecord, name, n)
		}
		_, n, _ = strings.Cut(n, ".")
	}
	return nil
}
