package rpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"peerdns/messages"
)

// AllowFile is the allowlist's file name in the agent's data dir.
const AllowFile = "peers.json"

// ValidRole reports whether role is one the allowlist may give.
func ValidRole(role string) bool {
	switch role {
	case messages.RoleAdmin, messages.RoleViewer, messages.RoleChild:
		return true
	}
	return false
}

// allowDoc is the file: {"peers": {"<key hex>": "admin"|"viewer"|"child"}}.
type allowDoc struct {
	Peers map[string]string `json:"peers"`
}

// Allowlist maps peer keys to roles. It is a JSON file that the
// command-line helpers edit while the agent runs; the agent re-reads it
// at every connection, so an allow or deny takes effect at the next
// connection without a restart. Safe for concurrent use.
type Allowlist struct {
	path string

	mu    sync.Mutex // guards the fields below
	peers map[string]string
	err   error
}

// OpenAllowlist reads DIR/peers.json (a missing file is an empty list).
func OpenAllowlist(dir string) *Allowlist {
	return &Allowlist{path: filepath.Join(dir, AllowFile)}
}

// Role returns the role of key, "" when the key is not allowed (or the file
// cannot be read: then nobody is allowed, and Err says why).
func (a *Allowlist) Role(key string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refresh()
	return a.peers[key]
}

// Err is the last error reading the file (nil when it read fine).
func (a *Allowlist) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refresh()
	return a.err
}

// Count returns how many keys have each role.
func (a *Allowlist) Count() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refresh()
	out := map[string]int{messages.RoleAdmin: 0, messages.RoleViewer: 0, messages.RoleChild: 0}
	for _, r := range a.peers {
		out[r]++
	}
	return out
}

// refresh re-reads the file. It is read once per connection (and per
// status request): a file of a few keys costs microseconds, and comparing
// modification times would miss two edits within the file system's time
// granularity that leave the size unchanged (admin -> child).
func (a *Allowlist) refresh() {
	doc, err := readAllow(a.path)
	if err != nil {
		a.peers, a.err = nil, err
		return
	}
	a.peers, a.err = doc.Peers, nil
}

func readAllow(path string) (allowDoc, error) {
	var doc allowDoc
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return allowDoc{Peers: map[string]string{}}, nil
	}
	if err != nil {
		return doc, err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return doc, fmt.Errorf("%s: %w", path, err)
	}
	for k, r := range doc.Peers {
		if !messages.ValidPeerID(k) || !ValidRole(r) {
			return doc, fmt.Errorf("%s: entry %q: %q (want a 64-hex key and admin, viewer or child)", path, k, r)
		}
	}
	if doc.Peers == nil {
		doc.Peers = map[string]string{}
	}
	return doc, nil
}

// Allow gives key role in the allowlist of data dir dir (writing the file
// atomically, mode 0600).
func Allow(dir, key, role string) error {
	key = strings.ToLower(strings.TrimSpace(key))
	if !messages.ValidPeerID(key) {
		return fmt.Errorf("%q is not a peer key (64 hex digits)", key)
	}
	if !ValidRole(role) {
		return fmt.Errorf("role %q: want admin, viewer or child", role)
	}
	return editAllow(dir, func(p map[string]string) { p[key] = role })
}

// Deny removes key from the allowlist of data dir dir. Removing a key that
// is not there is an error, so a typo does not look like success.
func Deny(dir, key string) error {
	key = strings.ToLower(strings.TrimSpace(key))
	found := false
	err := editAllow(dir, func(p map[string]string) {
		_, found = p[key]
		delete(p, key)
	})
	if err == nil && !found {
		return fmt.Errorf("%s is not in %s", key, filepath.Join(dir, AllowFile))
	}
	return err
}

// List returns the allowlist of data dir dir as "key role" lines, sorted.
func List(dir string) ([]string, error) {
	doc, err := readAllow(filepath.Join(dir, AllowFile))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(doc.Peers))
	for k, r := range doc.Peers {
		out = append(out, k+" "+r)
	}
	sort.Strings(out)
	return out, nil
}

func editAllow(dir string, edit func(map[string]string)) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(dir, AllowFile)
	doc, err := readAllow(path)
	if err != nil {
		return err
	}
	edit(doc.Peers)
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
