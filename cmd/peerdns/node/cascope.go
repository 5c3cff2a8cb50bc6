package node

import (
	"maps"
	"net/netip"
	"path/filepath"
	"time"

	"peerdns/internal/ask"
	"peerdns/internal/certs"
	"peerdns/internal/view"
	"peerdns/messages"
)

// The root CA's scope is internal/certs' (Served, Advice): what a new
// root is constrained to and when to advise regenerate-ca. The root
// gathers what the node serves from its parts and calls them.

// caScope is what the node serves now.
func (n *Node) caScope() certs.Scope {
	s := certs.Served{
		Suffixes: []string{"p2p", n.cfg.AdminDomain, n.cfg.ProfileDomain},
		Addrs:    []netip.Addr{n.edgeAnswer(), n.adminAnswer()},
		Subnets:  n.subnets(),
	}
	if v := n.pub.Load(); v != nil {
		s.Internal = v.Internal
	}
	if n.records != nil {
		if r := n.records.Load(); r != nil {
			s.Records = r.Records
		}
	}
	return s.Scope()
}

// adminAnswer is the admin domain's address (invalid before the admin
// socket is open).
func (n *Node) adminAnswer() netip.Addr {
	if n.adminLn == nil {
		return netip.Addr{}
	}
	return answerAddr(n.adminLn.Addr())
}

// subnets asks the ledger for the configured subnets (nil when it does
// not answer in time).
func (n *Node) subnets() []messages.Subnet {
	if n.root == nil || n.ledger == nil {
		return nil
	}
	rep, err := ask.Reply[*messages.GetSubnetsReply](n.root.System.Root, n.ledger, &messages.GetSubnets{}, 2*time.Second)
	if err != nil {
		return nil
	}
	return rep.Subnets
}

// openCA opens the node's certificate authority (DATA/ca); a root it
// makes is constrained to caScope.
func (n *Node) openCA() error {
	ca, err := certs.OpenScoped(filepath.Join(n.orig.Data, "ca"), nil, n.caScope)
	if err != nil {
		return err
	}
	n.ca = ca
	n.watchScope()
	return nil
}

// watchScope has certs.Advice check the root whenever the view's
// internal domains, the local records or the settings change (a subnet
// saved through POST /api/subnets is a new IP range of the scope, and
// the ledger announces it with update-settings, not with a new view); it
// stops with the node. Of the view the scope reads the internal domains
// alone, so a view that changed only p2p domains (hundreds a second in a
// burst of claims) is not checked: each check asks the ledger for the
// subnets.
func (n *Node) watchScope() {
	adv := certs.NewAdvice(n.ca, n.caScope, n.logs["core"], func() {
		n.root.System.EventStream.Publish(&messages.Hint{Type: messages.HintCerts})
	})
	var internal map[string]netip.Addr // of the last view checked
	checked := false
	stopView := n.pub.Subscribe(func(v *view.Snapshot) {
		// Called from one goroutine, one view at a time (view.Publisher).
		if checked && maps.Equal(v.Internal, internal) {
			return
		}
		checked, internal = true, v.Internal
		adv.Check()
	})
	var stopRecs func()
	if n.records != nil {
		stopRecs = n.records.Subscribe(func(*messages.LocalSnapshot) { adv.Check() })
	}
	stopSettings := n.onSettingsHint(adv.Check)
	n.closers = append(n.closers, func() {
		stopView()
		if stopRecs != nil {
			stopRecs()
		}
		stopSettings()
	})
}

// onSettingsHint calls f after each update-settings hint, from a
// goroutine of its own, one call at a time; hints that come while f runs
// are coalesced into one more call. The event stream calls its
// subscribers in the publisher's goroutine (the ledger's Receive for a
// subnet change), and f may ask that actor, so f never runs there. The
// returned func stops it; once it returns f is not running.
func (n *Node) onSettingsHint(f func()) (stop func()) {
	wake, quit, done := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	es := n.root.System.EventStream
	sub := es.Subscribe(func(evt any) {
		if h, ok := evt.(*messages.Hint); ok && h.Type == messages.HintSettings {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-wake:
				f()
			}
		}
	}()
	return func() {
		es.Unsubscribe(sub)
		close(quit)
		<-done
	}
}
