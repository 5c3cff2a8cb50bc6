package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"peerdns/messages"
)

// ManifestName is the manifest file of a plugin folder.
const ManifestName = "plugin.json"

// maxManifest bounds plugin.json.
const maxManifest = 1 << 20

// Manifest is plugin.json.
type Manifest struct {
	Name        string                  `json:"name"`
	Version     string                  `json:"version"`
	Description string                  `json:"description"`
	Author      string                  `json:"author"`
	Homepage    string                  `json:"homepage"`
	License     string                  `json:"license"`
	Domain      string                  `json:"domain"`
	Actions     []messages.PluginAction `json:"actions"`
	Settings    map[string]SettingSpec  `json:"settings"`
	Handler     string                  `json:"handler"`
	WWW         string                  `json:"www"`
	Database    bool                    `json:"database"`
}

// SettingSpec declares one plugin setting.
type SettingSpec struct {
	Type        string `json:"type"` // string, number, boolean
	Label       string `json:"label"`
	Description string `json:"description"`
	Default     any    `json:"default"`
}

// Plugin is a checked plugin folder: its manifest and the resolved paths
// of its handler and www folder ("" when it has none).
type Plugin struct {
	Dir      string
	Manifest Manifest
	Handler  string // absolute path of the executable
	WWW      string // absolute path of the static folder
}

// LoadFolder reads and checks dir/plugin.json (one JSON object of at
// most 1 MiB, nothing after it): required fields (name,
// version, domain), a valid domain name (lower-cased), action names of
// letters, digits, '-' and '_', setting types, and handler and www paths
// that stay inside the folder after following symlinks (the handler an
// executable regular file, www a folder).
func LoadFolder(dir string) (*Plugin, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	root, err = filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	// A regular file only (openRegular: a FIFO would hold the
	// supervisor, a device be read without end).
	f, err := openRegular(filepath.Join(root, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestName, err)
	}
	defer f.Close()
	var m Manifest
	dec := json.NewDecoder(&limited{r: f, n: maxManifest})
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %v", ManifestName, err)
	}
	// One object: a second one after it would be ignored without a word.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: more after the manifest's object", ManifestName)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%s: %v", ManifestName, err)
	}
	p := &Plugin{Dir: root, Manifest: m}
	if m.Handler != "" {
		if p.Handler, err = inside(root, m.Handler); err != nil {
			return nil, fmt.Errorf("%s: handler: %v", ManifestName, err)
		}
		st, err := os.Stat(p.Handler)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return nil, fmt.Errorf("%s: handler %q is not an executable file", ManifestName, m.Handler)
		}
	}
	if m.WWW != "" {
		if p.WWW, err = inside(root, m.WWW); err != nil {
			return nil, fmt.Errorf("%s: www: %v", ManifestName, err)
		}
		if st, err := os.Stat(p.WWW); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("%s: www %q is not a folder", ManifestName, m.WWW)
		}
	}
	return p, nil
}

func (m *Manifest) check() error {
	var missing []string
	for k, v := range map[string]string{"name": m.Name, "version": m.Version, "domain": m.Domain} {
		if strings.TrimSpace(v) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	d, err := messages.NormalizeDomain(m.Domain)
	if err != nil || !strings.Contains(d, ".") {
		return fmt.Errorf("domain %q is not a domain name", m.Domain)
	}
	m.Domain = d
	seen := map[string]bool{}
	for _, a := range m.Actions {
		if !validName(a.Name) {
			return fmt.Errorf("action name %q: use letters, digits, '-' and '_'", a.Name)
		}
		if seen[a.Name] {
			return fmt.Errorf("action %q declared twice", a.Name)
		}
		seen[a.Name] = true
	}
	for k, s := range m.Settings {
		if !validName(k) {
			return fmt.Errorf("setting name %q: use letters, digits, '-' and '_'", k)
		}
		switch s.Type {
		case "string", "number", "boolean":
		default:
			return fmt.Errorf("setting %q: type %q is not string, number or boolean", k, s.Type)
		}
		if s.Default != nil {
			if _, err := coerce(s.Type, s.Default); err != nil {
				return fmt.Errorf("setting %q: default: %v", k, err)
			}
		}
	}
	if m.Actions == nil {
		m.Actions = []messages.PluginAction{}
	}
	return nil
}

// validName: 1..64 of letters, digits, '-' and '_'.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// inside resolves rel under root, following symlinks, and refuses a
// result outside root.
func inside(root, rel string) (string, error) {
	if filepath.IsAbs(rel) || !filepath.IsLocal(filepath.FromSlash(rel)) {
		return "", fmt.Errorf("%q leaves the plugin folder", rel)
	}
	p, err := filepath.EvalSymlinks(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return "", fmt.Errorf("%q: %w", rel, err)
	}
	r, err := filepath.Rel(root, p)
	if err != nil || !filepath.IsLocal(r) {
		return "", fmt.Errorf("%q leads outside the plugin folder", rel)
	}
	return p, nil
}

// coerce checks a setting value against its type and returns it in its
// JSON form (string, float64, bool).
func coerce(typ string, v any) (any, error) {
	switch typ {
	case "string":
		if s, ok := v.(string); ok {
			return s, nil
		}
	case "number":
		if f, ok := v.(float64); ok {
			return f, nil
		}
		if i, ok := v.(int); ok {
			return float64(i), nil
		}
	case "boolean":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%v is not a %s", v, typ)
}

// limited is an io.Reader that fails past n bytes.
type limited struct {
	r interface{ Read([]byte) (int, error) }
	n int64
}

func (l *limited) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("larger than 1 MiB")
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	k, err := l.r.Read(b)
	l.n -= int64(k)
	return k, err
}

// isNotExist reports a missing manifest (a folder that is not a plugin).
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
