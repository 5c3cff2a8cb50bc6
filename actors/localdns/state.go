package localdns

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"peerdns/internal/store"
	"peerdns/messages"
)

// Store key families (node store).
const (
	keyRecord   = "localdns:rec:"      // + 16 hex digits of a sequence number → record JSON
	keyPref     = "localdns:pref:"     // + domain → p2p or public
	keyConflict = "localdns:conflict:" // + domain → public IP
)

type stored struct {
	seq uint64
	rec messages.LocalRecord
}

// state is the actor's data; methods are pure (they return the next
// state and the store writes that make it durable).
type state struct {
	recs      []stored // index order = sequence order
	nextSeq   uint64
	prefs     map[string]string
	conflicts map[string]string // domain → public IP
}

func recordKey(seq uint64) string { return fmt.Sprintf("%s%016x", keyRecord, seq) }

// write is one store change.
type write struct {
	key, value string
	del        bool
}

func (s *state) list() []messages.LocalRecord {
	out := make([]messages.LocalRecord, len(s.recs))
	for i, r := range s.recs {
		out[i] = r.rec
	}
	return out
}

func (s *state) clone() *state {
	n := &state{recs: append([]stored(nil), s.recs...), nextSeq: s.nextSeq, prefs: map[string]string{}, conflicts: map[string]string{}}
	for k, v := range s.prefs {
		n.prefs[k] = v
	}
	for k, v := range s.conflicts {
		n.conflicts[k] = v
	}
	return n
}

// normalise re-validates a record that may not have come through
// messages.ParseLocalRecord, and returns its stored JSON.
func normalise(r messages.LocalRecord) (messages.LocalRecord, string, error) {
	js, err := r.MarshalJSON()
	if err != nil {
		return r, "", err
	}
	r, err = messages.ParseLocalRecord(js)
	if err != nil {
		return r, "", err
	}
	js, err = r.MarshalJSON()
	return r, string(js), err
}

func (s *state) add(r messages.LocalRecord) (*state, []write, error) {
	r, js, err := normalise(r)
	if err != nil {
		return nil, nil, err
	}
	n := s.clone()
	n.recs = append(n.recs, stored{seq: n.nextSeq, rec: r})
	n.nextSeq++
	if err := messages.CheckLocalRecords(n.list()); err != nil {
		return nil, nil, err
	}
	return n, []write{{key: recordKey(n.nextSeq - 1), value: js}}, nil
}

func (s *state) update(i int, r messages.LocalRecord) (*state, []write, error) {
	if i < 0 || i >= len(s.recs) {
		return nil, nil, fmt.Errorf("%w %d: %d records", messages.ErrBadRecordIndex, i, len(s.recs))
	}
	r, js, err := normalise(r)
	if err != nil {
		return nil, nil, err
	}
	n := s.clone()
	n.recs[i].rec = r
	if err := messages.CheckLocalRecords(n.list()); err != nil {
		return nil, nil, err
	}
	return n, []write{{key: recordKey(n.recs[i].seq), value: js}}, nil
}

func (s *state) delete(i int) (*state, []write, error) {
	if i < 0 || i >= len(s.recs) {
		return nil, nil, fmt.Errorf("%w %d: %d records", messages.ErrBadRecordIndex, i, len(s.recs))
	}
	n := s.clone()
	seq := n.recs[i].seq
	n.recs = append(n.recs[:i], n.recs[i+1:]...)
	return n, []write{{key: recordKey(seq), del: true}}, nil
}

func (s *state) setPref(domain, version string) (*state, []write, error) {
	if version != messages.VersionP2P && version != messages.VersionPublic {
		return nil, nil, fmt.Errorf("%w, got %q", messages.ErrBadVersionPreference, version)
	}
	d, err := messages.CleanName("domain", domain)
	if err != nil {
		return nil, nil, err
	}
	n := s.clone()
	n.prefs[d] = version
	return n, []write{{key: keyPref + d, value: version}}, nil
}

// setConflict records (ip != "") or clears a conflict; changed is false
// when nothing differs.
func (s *state) setConflict(domain, ip string) (n *state, ws []write, changed bool) {
	if s.conflicts[domain] == ip {
		return s, nil, false
	}
	n = s.clone()
	if ip == "" {
		delete(n.conflicts, domain)
		return n, []write{{key: keyConflict + domain, del: true}}, true
	}
	n.conflicts[domain] = ip
	return n, []write{{key: keyConflict + domain, value: ip}}, true
}

func (s *state) conflictList() []messages.DNSConflict {
	out := make([]messages.DNSConflict, 0, len(s.conflicts))
	for d, ip := range s.conflicts {
		v := s.prefs[d]
		if v == "" {
			v = messages.VersionP2P
		}
		out = append(out, messages.DNSConflict{Domain: d, Version: v, PublicIP: ip})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Domain < out[j].Domain })
	return out
}

func (s *state) snapshot(version uint64) *messages.LocalSnapshot {
	prefs := make(map[string]string, len(s.prefs))
	for k, v := range s.prefs {
		prefs[k] = v
	}
	return &messages.LocalSnapshot{Version: version, Records: s.list(), Prefs: prefs}
}

// load reads the state from the node store. Entries that no longer
// validate are skipped and reported in bad; they stay in the store, and
// new records are numbered past them.
func load(db *store.DB) (st *state, bad []string, err error) {
	st = &state{nextSeq: 1, prefs: map[string]string{}, conflicts: map[string]string{}}
	kvs, err := db.List(keyRecord)
	if err != nil {
		return nil, nil, fmt.Errorf("load local records: %w", err)
	}
	for _, kv := range kvs {
		seq, perr := strconv.ParseUint(strings.TrimPrefix(kv.Key, keyRecord), 16, 64)
		r, rerr := messages.ParseLocalRecord([]byte(kv.Value))
		if perr == nil {
			st.nextSeq = max(st.nextSeq, seq+1) // a skipped record keeps its key
		}
		if perr != nil || rerr != nil {
			bad = append(bad, kv.Key)
			continue
		}
		st.recs = append(st.recs, stored{seq: seq, rec: r})
	}
	kvs, err = db.List(keyPref)
	if err != nil {
		return nil, nil, fmt.Errorf("load version preferences: %w", err)
	}
	for _, kv := range kvs {
		if kv.Value == messages.VersionP2P || kv.Value == messages.VersionPublic {
			st.prefs[strings.TrimPrefix(kv.Key, keyPref)] = kv.Value
		}
	}
	kvs, err = db.List(keyConflict)
	if err != nil {
		return nil, nil, fmt.Errorf("load conflicts: %w", err)
	}
	for _, kv := range kvs {
		st.conflicts[strings.TrimPrefix(kv.Key, keyConflict)] = kv.Value
	}
	return st, bad, nil
}

func persist(db *store.DB, ws []write) error {
	return db.Update(func(tx *store.Tx) error {
		for _, w := range ws {
			var err error
			if w.del {
				err = tx.Delete(w.key)
			} else {
				err = tx.Set(w.key, w.value)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}
