package view

import (
	"maps"
	"slices"
)

// Which domains a snapshot changed.
//
// The ledger publishes hundreds of snapshots in a burst of claims, each a
// copy of the previous domain map with a few entries replaced, and every
// subscriber used to find those few by walking the whole map: with 4,000
// domains the subscribers (the local-DNS actor, the virtual interface,
// the DNS table) were a third of the five-node burst's CPU, and a burst
// slowed down with every thousand domains the ledger held. A snapshot
// derived from the previous one (Derive) now carries the names each
// version changed, and a subscriber asks Changed for the names that may
// differ from the snapshot it handled last.
//
// The names sit in a log shared by the snapshots of one lineage: a
// derived snapshot appends its names to its parent's log and sees the
// log up to its own length, so a published snapshot never changes (an
// append writes past the end the older snapshots see). The log keeps
// the changes of at least the last logKeep entries' versions (a few
// hundred KB at most); for a subscriber further behind than that, or one
// whose last snapshot is of another lineage (a restarted ledger),
// ChangedSince says it cannot tell and Changed walks both snapshots.

// logKeep is how many changed names a lineage's log keeps at least
// before it starts again from a copy of its newest half: a burst's
// publishes change a few names to a few hundred each.
const logKeep = 8192

// changeLog is a lineage's log as one snapshot sees it.
type changeLog struct {
	lineage *lineage
	from    uint64   // the log holds every change of versions from..Version
	entries []change // in version order; the snapshot's own are the last
}

// lineage tells the snapshots derived from one another from all others.
// last is the newest log of the lineage, touched only by its publisher
// (Derive): a snapshot derived from an older one than that starts a
// lineage of its own, so a lineage never branches (two snapshots of one
// version would then tell each other "nothing changed", and the second
// would append into the array the first wrote).
type lineage struct{ last *changeLog }

type change struct {
	version uint64
	name    string
}

// Derive makes next (not yet published) the successor of prev: changed
// names every domain whose entry differs between them (added, replaced or
// removed). A nil prev (or one not derived, not older than next, or not
// the newest of its lineage) starts a new lineage with next.
func Derive(prev, next *Snapshot, changed []string) {
	if prev == nil || prev.log == nil || next.Version <= prev.Version || prev.log != prev.log.lineage.last {
		l := &lineage{}
		next.log = &changeLog{lineage: l, from: next.Version + 1}
		l.last = next.log
		return
	}
	old := prev.log
	log := &changeLog{lineage: old.lineage, from: old.from, entries: old.entries}
	if len(log.entries)+len(changed) > 2*logKeep {
		// Start a fresh array with the newest entries, whole versions
		// only: what is dropped is older than from.
		keep := log.entries[max(0, len(log.entries)-logKeep):]
		for len(keep) > 0 && len(keep) < len(log.entries) && keep[0].version == log.entries[len(log.entries)-len(keep)-1].version {
			keep = keep[1:]
		}
		if len(keep) > 0 {
			log.from = keep[0].version
		} else {
			log.from = next.Version
		}
		log.entries = append(make([]change, 0, 2*logKeep+len(changed)), keep...)
	}
	for _, name := range changed {
		log.entries = append(log.entries, change{version: next.Version, name: name})
	}
	// The array past the older snapshots' lengths is written only here,
	// by the one publisher of a lineage, and only from its newest log.
	next.log = log
	log.lineage.last = log
}

// ChangedSince returns the names of the domains whose entries may differ
// between prev and s (each name once or more), and true; or false when s
// cannot tell (prev is nil, of another lineage, or older than s's log),
// and the caller compares the two snapshots whole.
func (s *Snapshot) ChangedSince(prev *Snapshot) ([]string, bool) {
	if s == nil || prev == nil || s.log == nil || prev.log == nil || s.log.lineage != prev.log.lineage || prev.Version > s.Version {
		return nil, false
	}
	if prev.Version+1 < s.log.from {
		return nil, false
	}
	e := s.log.entries
	i := len(e)
	for i > 0 && e[i-1].version > prev.Version {
		i--
	}
	names := make([]string, 0, len(e)-i)
	for _, c := range e[i:] {
		names = append(names, c.name)
	}
	return names, true
}

// Changed returns the names of the domains whose entries may differ
// between prev (nil: an empty view) and s, each once: the names s's log
// gives (ChangedSince) or, when it cannot tell, those a walk of both
// snapshots finds.
func (s *Snapshot) Changed(prev *Snapshot) []string {
	names, ok := s.ChangedSince(prev)
	if ok {
		seen := make(map[string]bool, len(names))
		return slices.DeleteFunc(names, func(n string) bool {
			dup := seen[n]
			seen[n] = true
			return dup
		})
	}
	var old map[string]*Domain
	if prev != nil {
		old = prev.Domains
	}
	for name, d := range s.Domains {
		if o, had := old[name]; !had || o != d {
			names = append(names, name)
		}
	}
	for name := range old {
		if _, ok := s.Domains[name]; !ok {
			names = append(names, name)
		}
	}
	return names
}

// Next returns the snapshot of the given version that is prev with the
// entries of changes put in (a nil entry removes its domain), derived
// from prev (Derive) so that it names them; prev nil is an empty view.
// Internal is the caller's to set.
func Next(prev *Snapshot, version uint64, changes map[string]*Domain) *Snapshot {
	next := &Snapshot{Version: version}
	if prev != nil {
		next.Domains = maps.Clone(prev.Domains)
	}
	if next.Domains == nil {
		next.Domains = make(map[string]*Domain, len(changes))
	}
	changed := make([]string, 0, len(changes))
	for name, d := range changes {
		if d != nil {
			next.Domains[name] = d
		} else if _, ok := next.Domains[name]; ok {
			delete(next.Domains, name)
		} else {
			continue
		}
		changed = append(changed, name)
	}
	Derive(prev, next, changed)
	return next
}
