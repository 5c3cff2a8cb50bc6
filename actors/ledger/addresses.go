package ledger

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	"peerdns/internal/ipam"
	"peerdns/internal/store"
	"peerdns/messages"
)

// addresses owns the local IP assignments of the ledger's domains: the
// pool (internal/ipam), its records in node.db ("ip:<domain>"), and the
// subnet setting it is built from. The actor asks it for a domain's
// address when a round names the domain, and sends the hints its changes
// call for (it sends nothing itself). Why it is a type the ledger actor
// holds rather than an actor of its own is in the package doc.
type addresses struct {
	node    *store.DB
	log     *slog.Logger
	base    string // SUBNET_BASE, "" = ipam.DefaultBase
	initial int    // the first host index of the default subnet
	pool    *ipam.Pool
	fresh   []store.KV // assigned since the last persist
	usage   usage      // what describe counts, kept up to date by assign
}

// usage is how many of the addresses each of subs hands out are
// assigned (subs: the configured subnets it was counted for; seen: the
// addresses counted; ok: counted and still true).
// describe answers GetSubnets, which the CA scope check asks after every
// published view: building a pool from every assignment for each answer
// took 15% of the five nodes' CPU in a 1,000-claim burst. A fresh
// assignment adds its address to each configured subnet holding it
// (once: addresses are counted as distinct, as a pool counts them); a
// release, or configured subnets other than the counted ones, makes the
// next describe count again from the pool.
type usage struct {
	subs []ipam.Subnet
	used []int
	seen map[netip.Addr]bool
	ok   bool
}

// The node.db keys addresses owns; nothing else in the ledger reads or
// writes them.
const (
	ipPrefix   = "ip:"              // ip:<domain> → the domain's address
	subnetsKey = "settings:SUBNETS" // the configured subnets (JSON)
)

// loadAddresses reads the subnets and the stored assignments.
func loadAddresses(node *store.DB, log *slog.Logger, base string, initial int) (*addresses, error) {
	ad := &addresses{node: node, log: log, base: base, initial: initial}
	subnets, err := ad.subnets()
	if err != nil {
		return nil, err
	}
	ips, err := node.List(ipPrefix)
	if err != nil {
		return nil, err
	}
	assigned := map[string]netip.Addr{}
	for _, kv := range ips {
		ip, err := netip.ParseAddr(kv.Value)
		if err != nil {
			log.Warn("ledger: ignoring bad stored IP", "key", kv.Key, "value", kv.Value)
			continue
		}
		assigned[strings.TrimPrefix(kv.Key, ipPrefix)] = ip
	}
	ad.pool = ipam.New(subnets, assigned)
	return ad, nil
}

// subnets returns the configured subnets, or the default one.
func (ad *addresses) subnets() ([]ipam.Subnet, error) {
	raw, err := ad.node.Get(subnetsKey)
	if err == nil {
		var in []messages.Subnet
		if err := jsonUnmarshal(raw, &in); err != nil {
			return nil, fmt.Errorf("stored subnets: %w", err)
		}
		subs, errs := ipam.Validate(in)
		if len(errs) == 0 {
			return subs, nil
		}
		ad.log.Warn("ledger: stored subnets invalid, using default", "errors", strings.Join(errs, "; "))
	}
	return ipam.DefaultSubnets(ad.base, ad.initial)
}

// assign gives a domain its address and says whether it is a new one;
// new ones are written together by persist (one commit for many domains).
func (ad *addresses) assign(name string) (fresh bool) {
	ip, fresh, err := ad.pool.Assign(name)
	if err != nil {
		ad.log.Error("ledger: no IP for domain", "domain", name, "err", err)
		return false
	}
	if fresh {
		ad.fresh = append(ad.fresh, store.KV{Key: ipPrefix + name, Value: ip.String()})
		if ad.usage.ok {
			ad.usage.add(ip)
		}
	}
	return fresh
}

// persist writes the addresses assigned since the last call in one
// transaction, without its own fsync (store.UpdateLazy: it reaches the
// disk with the node store's next fsynced commit), and says whether there
// were any. An address is only ever handed out again after a crash if
// this write was lost, which cleanup-interfaces would also do.
func (ad *addresses) persist() bool {
	if len(ad.fresh) == 0 {
		return false
	}
	kvs := ad.fresh
	ad.fresh = nil
	err := ad.node.UpdateLazy(func(tx *store.Tx) error {
		for _, kv := range kvs {
			if err := tx.Set(kv.Key, kv.Value); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		ad.log.Error("ledger: persist IPs", "count", len(kvs), "err", err)
	}
	return true
}

func (ad *addresses) lookup(name string) (netip.Addr, bool) { return ad.pool.Lookup(name) }

func (ad *addresses) assignments() []messages.Interface { return ad.pool.Assignments() }

// describe is the subnets as configured now (a change waits for the next
// start) with the current assignments (usage).
func (ad *addresses) describe() []messages.Subnet {
	subs, err := ad.subnets()
	if err != nil {
		return ad.pool.Describe()
	}
	if !ad.usage.ok || !slices.Equal(subs, ad.usage.subs) {
		ad.usage = countUsage(subs, ad.pool.Assignments())
	}
	out := ipam.New(subs, nil).Describe()
	for i := range out {
		out[i].Used = ad.usage.used[i]
		out[i].Remaining = out[i].Available - out[i].Used
	}
	return out
}

// countUsage counts the distinct assigned addresses each of subs hands
// out.
func countUsage(subs []ipam.Subnet, assigned []messages.Interface) usage {
	u := usage{subs: slices.Clone(subs), used: make([]int, len(subs)), seen: make(map[netip.Addr]bool, len(assigned)), ok: true}
	for _, it := range assigned {
		if ip, err := netip.ParseAddr(it.IP); err == nil {
			u.add(ip)
		}
	}
	return u
}

// add counts an assigned address, unless it is counted already.
func (u *usage) add(ip netip.Addr) {
	if u.seen[ip] {
		return
	}
	u.seen[ip] = true
	for i, s := range u.subs {
		if s.HandsOut(ip) {
			u.used[i]++
		}
	}
}

// setSubnets stores validated subnets. They take effect for new
// assignments at the next start (the API says restartRequired): existing
// domains keep their addresses either way.
func (ad *addresses) setSubnets(in []messages.Subnet) error {
	subs, errs := ipam.Validate(in)
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", messages.ErrInvalid, strings.Join(errs, "; "))
	}
	out := make([]messages.Subnet, len(subs))
	for i, s := range subs {
		out[i] = messages.Subnet{Base: s.Base.String(), CIDR: s.CIDR, StartIndex: s.StartIndex, Name: s.Name}
	}
	b, _ := json.Marshal(out)
	if err := ad.node.Set(subnetsKey, string(b)); err != nil {
		return fmt.Errorf("store subnets: %w", err)
	}
	return nil
}

// cleanup releases the addresses of the domains that have no claims.
func (ad *addresses) cleanup(claimed func(string) bool) (int, error) {
	n := 0
	err := ad.node.Update(func(tx *store.Tx) error {
		for _, it := range ad.pool.Assignments() {
			if claimed(it.Domain) {
				continue
			}
			if err := tx.Delete(ipPrefix + it.Domain); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("release interfaces: %w", err)
	}
	for _, it := range ad.pool.Assignments() {
		if !claimed(it.Domain) {
			ad.pool.Release(it.Domain)
			ad.usage.ok = false
		}
	}
	return n, nil
}
