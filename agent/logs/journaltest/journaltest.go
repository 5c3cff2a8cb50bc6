// Package journaltest writes real systemd journal files for tests, with
// systemd-journal-remote reading journal export format: the journal
// source is then tested through journalctl against known entries.
package journaltest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Entry is one journal entry to write.
type Entry struct {
	Time     time.Time
	Priority int
	Unit     string // _SYSTEMD_UNIT
	Message  string
}

// remoteBins are where Debian and Fedora install systemd-journal-remote
// (it is not on PATH).
var remoteBins = []string{"/lib/systemd/systemd-journal-remote", "/usr/lib/systemd/systemd-journal-remote"}

// Need skips the test unless journalctl and systemd-journal-remote exist.
func Need(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("journalctl"); err != nil {
		t.Skip("needs journalctl (apt-get install systemd)")
	}
	if remoteBin() == "" {
		t.Skip("needs systemd-journal-remote to write test journals (apt-get install systemd-journal-remote)")
	}
}

func remoteBin() string {
	for _, b := range remoteBins {
		if _, err := os.Stat(b); err == nil {
			return b
		}
	}
	if p, err := exec.LookPath("systemd-journal-remote"); err == nil {
		return p
	}
	return ""
}

// Write makes a journal directory holding es (oldest first) and returns
// it, for journalctl -D.
func Write(t testing.TB, es []Entry) string {
	t.Helper()
	Need(t)
	dir := t.TempDir()
	var in bytes.Buffer
	for i, e := range es {
		fmt.Fprintf(&in, "__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n_BOOT_ID=0123456789abcdef0123456789abcdef\n", e.Time.UnixMicro(), 1000000+i)
		fmt.Fprintf(&in, "MESSAGE=%s\nPRIORITY=%d\nSYSLOG_IDENTIFIER=journaltest\n", e.Message, e.Priority)
		if e.Unit != "" {
			fmt.Fprintf(&in, "_SYSTEMD_UNIT=%s\n", e.Unit)
		}
		in.WriteByte('\n')
	}
	cmd := exec.Command(remoteBin(), "-o", filepath.Join(dir, "test.journal"), "-")
	cmd.Stdin = &in
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("systemd-journal-remote: %v\n%s", err, out)
	}
	return dir
}
