package node

import (
	"strings"
	"testing"

	"peerdns/messages"
)

// TestPortMapStatus: /api/status says why a node does not map its peer
// port: PORT_MAP=false, or a peer address bound to loopback (the
// default test config, so no test asks the host's router); and the
// setting reads back as the config has it.
func TestPortMapStatus(t *testing.T) {
	for _, tt := range []struct {
		name   string
		off    bool
		detail string
		value  string
	}{
		{"loopback", false, "loopback", "true"},
		{"PORT_MAP=false", true, "PORT_MAP=false", "false"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.PortMapOff = tt.off
			n := startConfig(t, cfg)
			base := "http://" + n.AdminAddr()
			var st struct {
				Reach messages.Reach `json:"reach"`
			}
			mustJSON(t, "GET", base+"/api/status", "", 200, &st)
			pm := st.Reach.PortMapping
			if pm == nil || pm.State != messages.PortMapOff || !strings.Contains(pm.Detail, tt.detail) {
				t.Fatalf("reach.portMapping = %+v, want off (%s)", pm, tt.detail)
			}
			var s struct {
				Settings map[string]string `json:"settings"`
			}
			mustJSON(t, "GET", base+"/api/settings", "", 200, &s)
			if s.Settings["PORT_MAP"] != tt.value {
				t.Fatalf("PORT_MAP setting %q, want %q", s.Settings["PORT_MAP"], tt.value)
			}
		})
	}
}
