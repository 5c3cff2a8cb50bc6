package main

import (
	"strings"
	"testing"
)

// --advertise-addr and PEERDNS_ADVERTISE_ADDR take only what
// update-settings takes for ADVERTISE_ADDR: one that is not host:port
// was advertised to peers and put in invites as it was. The error names
// the flag or the variable; a flag given over a bad variable wins.
func TestAdvertiseAddrChecked(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string // "" for no error
	}{
		{"advertise flag", []string{"--advertise-addr", "bogus"}, nil, "-advertise-addr"},
		{"advertise list", []string{"--advertise-addr", "192.0.2.1:7740,bogus"}, nil, "-advertise-addr"},
		{"advertise env", nil, map[string]string{"PEERDNS_ADVERTISE_ADDR": "bogus"}, "PEERDNS_ADVERTISE_ADDR"},
		{"advertise port", []string{"--advertise-addr", "192.0.2.1:99999"}, nil, "-advertise-addr"},
		{"flag wins over env", []string{"--advertise-addr", "192.0.2.1:7740"}, map[string]string{"PEERDNS_ADVERTISE_ADDR": "bogus"}, ""},
		{"good", []string{"--advertise-addr", "node.example:7740", "--bootstrap", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa@192.0.2.1:7740", "--admin-addr", "127.0.0.1:0", "--dns-query-log"}, nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			_, err := parseNodeFlags(tt.args, func(k string) string { return tt.env[k] }, &out)
			msg := out.String()
			if err != nil {
				msg += err.Error()
			}
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("parseNodeFlags(%q): %v", tt.args, err)
			case tt.want != "" && (err == nil || !strings.Contains(msg, tt.want)):
				t.Fatalf("parseNodeFlags(%q) with %v: err %v, output %q; want an error naming %s", tt.args, tt.env, err, out.String(), tt.want)
			}
		})
	}
}
