package ledger

import (
	"maps"
	"net/netip"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// Internal domains: the node's own (Deps.Internal: the admin domain) and
// those other owners add (plugin domains, the profile domain). They
// answer in DNS with their address, are listed with hash "internal", and
// cannot be claimed. A domain another owner asks for is refused when it
// is one of the node's own or already has claims in the ledger; a claim
// that arrives later for an internal domain stays in the ledger but the
// node keeps answering the domain itself (internal domains come first)
// and lists it once, as internal.

// mergeInternal rebuilds a.internal from Deps.Internal and the owners'.
func (a *Actor) mergeInternal() {
	m := maps.Clone(a.d.Internal)
	if m == nil {
		m = map[string]netip.Addr{}
	}
	for _, ds := range a.extraInternal {
		for d, ip := range ds {
			if _, own := a.d.Internal[d]; !own {
				m[d] = ip
			}
		}
	}
	a.internal = m
	a.internalChanged = true
}

// setInternal replaces owner's internal domains and returns the refused
// ones with the reason.
func (a *Actor) setInternal(c actor.Context, owner string, domains map[string]netip.Addr) map[string]string {
	refused := map[string]string{}
	kept := map[string]netip.Addr{}
	for raw, ip := range domains {
		d, err := messages.NormalizeDomain(raw)
		switch {
		case err != nil:
			refused[raw] = err.Error()
		case a.d.Internal[d].IsValid() || hasKey(a.d.Internal, d):
			refused[raw] = "it is the node's own internal domain"
		case a.st.domains[d] != nil && len(a.st.domains[d].claims) > 0:
			refused[raw] = "it is claimed in the ledger"
		default:
			for o, ds := range a.extraInternal {
				if o != owner && hasKey(ds, d) {
					refused[raw] = "it is already used by " + o
				}
			}
			if _, bad := refused[raw]; !bad {
				kept[d] = ip
			}
		}
	}
	if a.extraInternal == nil {
		a.extraInternal = map[string]map[string]netip.Addr{}
	}
	a.extraInternal[owner] = kept
	a.mergeInternal()
	a.list.ok = false // the internal entries lead the listing: build it whole
	a.step(c, Changed{Now: true})
	return refused
}

func hasKey(m map[string]netip.Addr, k string) bool {
	_, ok := m[k]
	return ok
}
