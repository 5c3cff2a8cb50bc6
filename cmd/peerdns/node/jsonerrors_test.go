package node

import (
	"strings"
	"testing"

	"github.com/fasthttp/websocket"
)

// A body with a value of the wrong JSON kind is refused with a message
// in JSON's terms (the field, the kind it must be, the kind it was),
// never with the Go types the node decodes into.
func TestWrongJSONKindsNamedInJSONTerms(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	tests := []struct {
		name, path, body string
		want             int
		msg              string
	}{
		{"add-domain: array body", "/api/add-domain", `[]`, 500, "the body must be a JSON object, got array"},
		{"add-domain: string ssl", "/api/add-domain", `{"domain":"a.p2p","hash":"` + hashA + `","ssl":"yes"}`, 500, `field "ssl" must be a boolean, got string`},
		{"tunnel-create: port past int64", "/api/tunnel-create", `{"port":99999999999999999999}`, 500,
			`field "port" must be an integer from -9223372036854775808 to 9223372036854775807, got number 99999999999999999999`},
		{"subnets: string", "/api/subnets", `{"subnets":"x"}`, 400, `field \"subnets\" must be an array, got string`},
		{"subnets: string cidr", "/api/subnets", `{"subnets":[{"base":"10.0.0.0","cidr":"24","startIndex":1}]}`, 400, `must be an integer`},
		{"update-local-dns: number record", "/api/update-local-dns", `{"index":0,"record":5}`, 500, "the record must be a JSON object, got number"},
		{"add-local-dns: string ttl", "/api/add-local-dns", `{"name":"x.home","type":"A","ttl":"60","data":"192.0.2.1"}`, 500, `field "ttl" must be an integer`},
		{"plugin action: array", "/api/plugins/profile.p2p/actions/x", `[1]`, 400, "the body must be a JSON object, got array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := call(t, "POST", base+tt.path, tt.body)
			if code != tt.want || !strings.Contains(body, tt.msg) || goTypes(body) {
				t.Fatalf("POST %s %s = %d %q, want %d containing %q and no Go type", tt.path, tt.body, code, body, tt.want, tt.msg)
			}
		})
	}

	c := dialWS(t, n.AdminAddr(), 0)
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"subscribe-log","channel":"core","lines":"10"}`)); err != nil {
		t.Fatal(err)
	}
	m := readUntil(t, c, ofType("error"))
	if msg, _ := m["message"].(string); !strings.Contains(msg, `field "lines" must be an integer`) || goTypes(msg) {
		t.Fatalf("ws error for a string lines = %q, want the field named in JSON terms", msg)
	}
}

// goTypes reports whether an answer names Go types or packages.
func goTypes(s string) bool {
	for _, g := range []string{"Go ", "struct", "messages.", "int64", "[]", "map["} {
		if strings.Contains(s, g) {
			return true
		}
	}
	return false
}
