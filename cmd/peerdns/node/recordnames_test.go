package node

import (
	"strings"
	"testing"
)

// A local record's names are ASCII without controls: a name the API
// took must be the name DNS answers. "Ä.home" was stored lowercased by
// Unicode rules ("ä.home") while queries are matched ASCII-lowercased,
// so its own name was NXDOMAIN; a name with an ESC went into listings
// and terminals as a control sequence.
func TestRecordNamesAreASCII(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	refused := []struct{ name, body, msg string }{
		{"non-ASCII name", `{"name":"Ä.home","type":"A","ttl":60,"data":"192.0.2.7"}`, `name "Ä.home" has 'Ä'`},
		{"ESC in name", `{"name":"a\u001b[2j.home","type":"A","ttl":60,"data":"192.0.2.7"}`, `'\x1b'`},
		{"DEL in wildcard base", `{"name":"*.a\u007f.home","type":"A","ttl":60,"data":"192.0.2.7"}`, `'\x7f'`},
		{"BEL in CNAME target", `{"name":"c.home","type":"CNAME","ttl":60,"data":"x\u0007.home"}`, `data "x\a.home" has '\a'`},
		{"non-ASCII MX exchange", `{"name":"m.home","type":"MX","ttl":60,"preference":5,"exchange":"mäil.home"}`, `exchange "mäil.home" has 'ä'`},
		{"invalid UTF-8 SRV target", "{\"name\":\"_s._tcp.home\",\"type\":\"SRV\",\"ttl\":60,\"priority\":1,\"weight\":1,\"port\":80,\"target\":\"t\xff.home\"}", `has '�'`},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			code, body := call(t, "POST", base+"/api/add-local-dns", tt.body)
			if code != 500 || !strings.Contains(body, tt.msg) || !strings.Contains(body, "xn--") {
				t.Fatalf("add-local-dns %s = %d %q, want 500 naming %s and the xn-- form", tt.body, code, body, tt.msg)
			}
		})
	}
	for _, body := range []string{
		`{"name":"xn--4ca.home","type":"A","ttl":60,"data":"192.0.2.7"}`,
		`{"name":"*.dev.home","type":"A","ttl":60,"data":"192.0.2.8"}`,
		`{"name":"_sip._tcp.home","type":"SRV","ttl":60,"priority":1,"weight":1,"port":5060,"target":"sip.home"}`,
	} {
		if code, resp := call(t, "POST", base+"/api/add-local-dns", body); code != 200 {
			t.Fatalf("add-local-dns %s = %d %q, want 200", body, code, resp)
		}
	}
	var got struct {
		Records []map[string]any `json:"records"`
	}
	mustJSON(t, "GET", base+"/api/local-dns", "", 200, &got)
	if len(got.Records) != 3 {
		t.Fatalf("records = %v, want the three ASCII ones only", got.Records)
	}
}
