package certs

import (
	"log/slog"
	"strings"
	"sync"
)

// Advice tells the operator when the root no longer covers what the node
// serves: Check compares the root with the scope now served and, once
// per new gap (a suffix or range it has not named before), logs how to
// get a root that covers it (regenerate-ca, then install-ca again) and
// calls Notify (the node sends update-certs so the panel's certificate
// tab shows it). A root without name constraints (made before they
// existed) is named once: it covers everything, which is the problem.
// The node calls Check whenever the view or the local records change;
// Check is safe for concurrent use.
type Advice struct {
	ca     *CA
	scope  func() Scope
	log    *slog.Logger
	notify func()

	mu   sync.Mutex      // guards told
	told map[string]bool // gaps already named
}

// NewAdvice advises on ca's root against scope (what is served now);
// notify may be nil.
func NewAdvice(ca *CA, scope func() Scope, log *slog.Logger, notify func()) *Advice {
	if notify == nil {
		notify = func() {}
	}
	return &Advice{ca: ca, scope: scope, log: log, notify: notify, told: map[string]bool{}}
}

// Check logs and notifies about the gaps not named before.
func (a *Advice) Check() {
	a.mu.Lock()
	defer a.mu.Unlock()
	root := a.ca.Root()
	if !Constrained(root) {
		if !a.told["unconstrained"] {
			a.told["unconstrained"] = true
			a.log.Warn("the root CA has no name constraints: once trusted it can vouch for any site; " +
				"POST /api/regenerate-ca makes a root limited to the names this node serves (then install-ca again)")
		}
		return
	}
	miss := Missing(root, a.scope())
	var fresh []string
	for _, s := range miss.Suffixes {
		fresh = a.appendNew(fresh, s)
	}
	for _, p := range miss.Ranges {
		fresh = a.appendNew(fresh, p.String())
	}
	if len(fresh) == 0 {
		return
	}
	a.log.Warn("the node serves names the root CA may not sign for: POST /api/regenerate-ca (or Certificates in the panel) "+
		"makes a root that covers them, then install-ca again", "new", strings.Join(fresh, ","), "root", RootScope(root).String())
	a.notify()
}

// appendNew appends k to out the first time it is seen.
func (a *Advice) appendNew(out []string, k string) []string {
	if a.told[k] {
		return out
	}
	a.told[k] = true
	return append(out, k)
}
