package rpc

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// AuditFile is the audit trail's file name in the agent's data dir.
const AuditFile = "audit.log"

// auditKeep is how many entries the trail keeps in memory for the logs
// method (the file keeps more: it rotates to audit.log.1 at auditMaxBytes).
const (
	auditKeep     = 2000
	auditMaxBytes = 16 << 20
)

// AuditEntry is one call, allowed or not.
type AuditEntry struct {
	Time       time.Time `json:"time"`
	Peer       string    `json:"peer"`
	Remote     string    `json:"remote,omitempty"`
	Role       string    `json:"role"` // "" for an unknown key
	Method     string    `json:"method"`
	Target     string    `json:"target,omitempty"` // path, chart, function or log source
	Status     int       `json:"status"`
	Error      string    `json:"error,omitempty"`
	DurationMS float64   `json:"duration_ms"`
}

// Audit is the trail of every RPC call: a JSON line per call appended to
// DIR/audit.log (0600) and the newest auditKeep entries in memory. Safe for
// concurrent use.
type Audit struct {
	path string

	mu   sync.Mutex // guards the fields below
	f    *os.File
	size int64
	ring []AuditEntry
	next int
	full bool
}

// OpenAudit opens (creating) DIR/audit.log for appending.
func OpenAudit(dir string) (*Audit, error) {
	a := &Audit{path: filepath.Join(dir, AuditFile), ring: make([]AuditEntry, auditKeep)}
	if err := a.open(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Audit) open() error {
	f, err := os.OpenFile(a.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	a.f, a.size = f, fi.Size()
	return nil
}

// Record appends e. A write error is returned but the entry stays in memory.
func (a *Audit) Record(e AuditEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ring[a.next] = e
	a.next = (a.next + 1) % len(a.ring)
	if a.next == 0 {
		a.full = true
	}
	if a.f == nil {
		return os.ErrClosed
	}
	if a.size+int64(len(b)) > auditMaxBytes {
		a.f.Close()
		_ = os.Rename(a.path, a.path+".1")
		if err := a.open(); err != nil {
			a.f = nil
			return err
		}
	}
	n, err := a.f.Write(b)
	a.size += int64(n)
	return err
}

// Last returns up to limit newest entries, newest first.
func (a *Audit) Last(limit int) []AuditEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.next
	if a.full {
		n = len(a.ring)
	}
	limit = min(limit, n)
	out := make([]AuditEntry, 0, limit)
	for i := 0; i < limit; i++ {
		j := (a.next - 1 - i + len(a.ring)) % len(a.ring)
		out = append(out, a.ring[j])
	}
	return out
}

// Close closes the file.
func (a *Audit) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	return err
}
