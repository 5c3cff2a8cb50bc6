package messages

import (
	"errors"
	"strings"
	"testing"
)

func TestStreamHelloValidate(t *testing.T) {
	long := strings.Repeat("x", agentMaxName+1)
	ok := func() StreamHello { return StreamHello{Hostname: "h", GUID: "g", NodeID: "n"} }
	for _, tt := range []struct {
		name  string
		edit  func(*StreamHello)
		valid bool
	}{
		{"bare", func(*StreamHello) {}, true},
		{"full", func(h *StreamHello) {
			h.Version = "v0.5.0"
			h.System = &StreamSystem{OSID: "debian", Cores: 4, RAMTotal: 1 << 30}
			h.Settings = &StreamSettings{Parent: true, CORS: "*", Tier0Seconds: 3600}
		}, true},
		{"no hostname", func(h *StreamHello) { h.Hostname = "" }, false},
		{"long kernel", func(h *StreamHello) { h.System = &StreamSystem{KernelVersion: long} }, false},
		{"negative cores", func(h *StreamHello) { h.System = &StreamSystem{Cores: -1} }, false},
		{"long export dir", func(h *StreamHello) { h.Settings = &StreamSettings{ExportDir: long} }, false},
		{"negative retention", func(h *StreamHello) { h.Settings = &StreamSettings{Tier1Seconds: -1} }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := ok()
			tt.edit(&h)
			err := h.Validate()
			if tt.valid != (err == nil) || (err != nil && !errors.Is(err, ErrBadAgentRequest)) {
				t.Errorf("Validate() = %v, want valid %v", err, tt.valid)
			}
		})
	}
}
