package messages

import (
	"errors"
	"time"
)

// SettingMeta describes one whitelisted setting (GET /api/settings
// metadata). Type, Category, Label, Description and Default are the
// spec's; the rest tell the panel how to treat it.
type SettingMeta struct {
	Type            string   `json:"type"`
	Category        string   `json:"category"`
	Label           string   `json:"label"`
	Description     string   `json:"description"`
	Default         string   `json:"default"`
	Options         []string `json:"options,omitempty"`
	RestartRequired bool     `json:"restartRequired"`          // a change applies at the next start
	RestartPending  bool     `json:"restartPending,omitempty"` // saved value differs from the one in force
	ReadOnly        bool     `json:"readOnly,omitempty"`       // informational
	Deprecated      bool     `json:"deprecated,omitempty"`
	// Source of the value in force: "flag" or "env" (then it cannot be
	// changed here), "saved" or "default".
	Source string `json:"source"`
}

// GetSettings asks the settings actor for every setting.
type GetSettings struct{}

// GetSettingsReply answers GetSettings.
type GetSettingsReply struct {
	Settings map[string]string
	Metadata map[string]SettingMeta
	Err      error
}

// UpdateSettings validates and applies a set of settings, all or none.
// Deadline (zero: none) is when the asker stops waiting: an update whose
// turn comes later changes nothing, and one that waits for the ledger
// waits no longer than that, so the answer (applied or not) reaches the
// asker before it gives up.
type UpdateSettings struct {
	Settings map[string]string
	Deadline time.Time
}

// UpdateSettingsReply answers UpdateSettings: Errors (one per bad name
// or value, nothing changed), or Err (saving failed, nothing changed),
// or the outcome.
type UpdateSettingsReply struct {
	Errors                  []string
	Err                     error
	Message                 string
	RestartRequired         bool
	RestartRequiredSettings []string
}

// ErrSettingsStore: the settings could not be saved.
var ErrSettingsStore = errors.New("settings not saved")
