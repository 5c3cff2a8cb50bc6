package ledger

import (
	"fmt"
	"slices"

	"peerdns/actors/consensus"
	"peerdns/messages"
)

// setClaimServices rewrites the local writer's claim of a domain with new
// services and clients, keeping its hash and ssl. Unchanged lists write
// nothing.
func (a *Actor) setClaimServices(m *messages.SetClaimServices) error {
	name, err := messages.NormalizeDomain(m.Domain)
	if err != nil {
		return err
	}
	if !a.writable() {
		return messages.ErrNotInitialised
	}
	rec, ok := a.st.claim(name, a.st.self)
	if !ok {
		return fmt.Errorf("%w: %s", messages.ErrNotOwner, name)
	}
	svcs := slices.Clone(m.Services)
	if svcs == nil {
		svcs = []messages.Service{}
	}
	clients := slices.Clone(m.Clients)
	if clients == nil {
		clients = []string{}
	}
	if slices.Equal(rec.Services, svcs) && slices.Equal(rec.Clients, clients) {
		return nil
	}
	rec.Services, rec.Clients = svcs, clients
	if _, err := a.appendLocal(write{key: messages.ClaimKey(name, a.st.self), value: encodeClaim(rec)}); err != nil {
		return fmt.Errorf("store claim services: %w", err)
	}
	a.d.Log.Info("claim services written", "domain", name, "services", len(svcs), "clients", len(clients))
	return nil
}

// domainServices lists the services of the resolved claim of a domain.
func (a *Actor) domainServices(domain string) ([]messages.Service, error) {
	name, err := messages.NormalizeDomain(domain)
	if err != nil {
		return nil, err
	}
	r := a.results[name]
	if r == nil || r.State.Status != consensus.Resolved {
		return []messages.Service{}, nil
	}
	rec, ok := a.st.claim(name, r.State.ResolvedClaimant)
	if !ok || len(rec.Services) == 0 {
		return []messages.Service{}, nil
	}
	return slices.Clone(rec.Services), nil
}

// targets finds the claim in force of each domain: the local writer's own
// claim when it has one that did not win and its hash preference is
// "local", else the resolved claim.
func (a *Actor) targets(domains []string) map[string]messages.DomainTarget {
	out := make(map[string]messages.DomainTarget, len(domains))
	for _, d := range domains {
		name, err := messages.NormalizeDomain(d)
		if err != nil {
			continue
		}
		if t, ok := a.targetOf(name); ok {
			out[name] = t
		}
	}
	return out
}

func (a *Actor) targetOf(name string) (messages.DomainTarget, bool) {
	r := a.results[name]
	resolved := r != nil && r.State.Status == consensus.Resolved
	if mine, ok := a.st.claim(name, a.st.self); ok && a.hashPref[name] == "local" &&
		(!resolved || r.State.ResolvedClaimant != a.st.self) {
		return messages.DomainTarget{Domain: name, Hash: mine.Hash, Services: slices.Clone(mine.Services), Owned: true}, true
	}
	if !resolved {
		return messages.DomainTarget{}, false
	}
	t := messages.DomainTarget{Domain: name, Hash: r.State.Hash, Owned: r.State.ResolvedClaimant == a.st.self}
	if rec, ok := a.st.claim(name, r.State.ResolvedClaimant); ok {
		t.Services = slices.Clone(rec.Services)
	}
	return t, true
}
