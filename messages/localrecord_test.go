package messages

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		js   string
		err  string // substring; "" means valid
	}{
		{"A", `{"name":"Host.Example.","type":"a","ttl":60,"data":"192.0.2.1"}`, ""},
		{"A default class and ttl", `{"name":"h.example","type":"A","data":"192.0.2.1"}`, ""},
		{"A with v6", `{"name":"h.example","type":"A","data":"2001:db8::1"}`, "not an IPv4"},
		{"A bad ip", `{"name":"h.example","type":"A","data":"300.1.1.1"}`, "not an IP"},
		{"A missing data", `{"name":"h.example","type":"A"}`, "data"},
		{"AAAA", `{"name":"h.example","type":"AAAA","data":"2001:db8::1"}`, ""},
		{"AAAA with v4", `{"name":"h.example","type":"AAAA","data":"192.0.2.1"}`, "not an IPv6"},
		{"CNAME", `{"name":"w.example","type":"CNAME","data":"h.example"}`, ""},
		{"CNAME bad target", `{"name":"w.example","type":"CNAME","data":"a..b"}`, "data"},
		{"MX", `{"name":"example","type":"MX","preference":10,"exchange":"mx.example"}`, ""},
		{"MX missing preference", `{"name":"example","type":"MX","exchange":"mx.example"}`, "preference is required"},
		{"MX preference range", `{"name":"example","type":"MX","preference":70000,"exchange":"mx.example"}`, "between 0 and 65535"},
		{"MX null exchange", `{"name":"example","type":"MX","preference":0,"exchange":"."}`, ""},
		{"TXT", `{"name":"example","type":"TXT","data":"v=spf1 -all \"q\" \\"}`, ""},
		{"TXT long", `{"name":"example","type":"TXT","data":"` + strings.Repeat("x", 600) + `"}`, ""},
		{"TXT too long", `{"name":"example","type":"TXT","data":"` + strings.Repeat("x", 4001) + `"}`, "longer"},
		{"SRV", `{"name":"_x._tcp.example","type":"SRV","priority":1,"weight":2,"port":443,"target":"h.example"}`, ""},
		{"SRV missing port", `{"name":"_x._tcp.example","type":"SRV","priority":1,"weight":2,"target":"h.example"}`, "port is required"},
		{"SRV negative", `{"name":"_x._tcp.example","type":"SRV","priority":-1,"weight":2,"port":1,"target":"h.example"}`, "priority"},
		{"SOA", `{"name":"example","type":"SOA","mname":"ns.example","rname":"admin.example","serial":1,"refresh":2,"retry":3,"expire":4,"minimum":5}`, ""},
		{"SOA missing minimum", `{"name":"example","type":"SOA","mname":"ns.example","rname":"admin.example","serial":1,"refresh":2,"retry":3,"expire":4}`, "minimum"},
		{"CAA", `{"name":"example","type":"CAA","flag":128,"tag":"issue","value":"ca.example"}`, ""},
		{"CAA bad tag", `{"name":"example","type":"CAA","tag":"is-sue","value":"x"}`, "tag"},
		{"CAA longest value", `{"name":"example","type":"CAA","tag":"iodef","value":"` + strings.Repeat("x", 1025) + `"}`, ""},
		{"CAA value too long", `{"name":"example","type":"CAA","tag":"iodef","value":"` + strings.Repeat("x", 1026) + `"}`, "value is longer than 1025 bytes"},
		{"CAA backslashes too long", `{"name":"example","type":"CAA","tag":"iodef","value":"` + strings.Repeat(`\\`, 513) + `"}`, "a backslash counts as two"},
		{"NS", `{"name":"example","type":"NS","data":"ns.example"}`, ""},
		{"PTR", `{"name":"1.2.0.192.in-addr.arpa","type":"PTR","data":"h.example"}`, ""},
		{"OTHER", `{"name":"example","type":"OTHER","rrtype":65280,"data":"DE AD be ef"}`, ""},
		{"OTHER empty rdata", `{"name":"example","type":"OTHER","rrtype":65281,"data":""}`, ""},
		{"OTHER known type bad rdata", `{"name":"example","type":"OTHER","rrtype":13,"data":"05aa"}`, "not valid RDATA"},
		{"OTHER named type", `{"name":"example","type":"OTHER","rrtype":1,"data":"c0000201"}`, "use type A"},
		{"OTHER meta type", `{"name":"example","type":"OTHER","rrtype":41,"data":""}`, "meta"},
		{"OTHER bad hex", `{"name":"example","type":"OTHER","rrtype":65280,"data":"xyz"}`, "hex"},
		{"OTHER missing rrtype", `{"name":"example","type":"OTHER","data":"00"}`, "rrtype is required"},
		{"unknown type", `{"name":"example","type":"HINFO"}`, "not one of"},
		{"missing type", `{"name":"example"}`, "type is required"},
		{"missing name", `{"type":"A","data":"192.0.2.1"}`, "name is required"},
		{"bad name", `{"name":"a b.example","type":"A","data":"192.0.2.1"}`, "not allowed"},
		{"long label", `{"name":"` + strings.Repeat("x", 64) + `.example","type":"A","data":"192.0.2.1"}`, "not a valid"},
		{"long name", `{"name":"` + strings.Repeat("abcdefghi.", 26) + `","type":"A","data":"192.0.2.1"}`, "not a valid"},
		{"wildcard", `{"name":"*.Example","type":"A","data":"192.0.2.1"}`, ""},
		{"wildcard inside", `{"name":"a.*.example","type":"A","data":"192.0.2.1"}`, "first label"},
		{"wildcard alone", `{"name":"*","type":"A","data":"192.0.2.1"}`, "first label"},
		{"wildcard of root", `{"name":"*.","type":"A","data":"192.0.2.1"}`, "below it"},
		{"wildcard target", `{"name":"x.example","type":"CNAME","data":"*.example"}`, "first label"},
		{"double wildcard", `{"name":"*.*.example","type":"A","data":"192.0.2.1"}`, "first label"},
		{"root name", `{"name":".","type":"A","data":"192.0.2.1"}`, "root"},
		{"class CH", `{"name":"version.test","class":"ch","type":"TXT","data":"x"}`, ""},
		{"class HS", `{"name":"x.test","class":"HS","type":"TXT","data":"x"}`, "class"},
		{"ttl negative", `{"name":"x.test","type":"A","ttl":-1,"data":"192.0.2.1"}`, "ttl"},
		{"ttl too big", `{"name":"x.test","type":"A","ttl":2147483648,"data":"192.0.2.1"}`, "ttl"},
		{"ttl string", `{"name":"x.test","type":"A","ttl":"60","data":"192.0.2.1"}`, `"ttl" must be an integer from -9223372036854775808 to 9223372036854775807, got string`},
		{"not JSON", `{`, "bad JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseLocalRecord([]byte(tt.js))
			if tt.err == "" {
				if err != nil {
					t.Fatalf("ParseLocalRecord(%s) = %v", tt.js, err)
				}
				if _, err := r.RR(); err != nil {
					t.Fatalf("RR() = %v", err)
				}
				// The API shape round-trips.
				b, err := json.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				r2, err := ParseLocalRecord(b)
				if err != nil || r2 != r {
					t.Fatalf("round trip %s: %+v, %v; want %+v", b, r2, err, r)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("ParseLocalRecord(%s) = %v, want an ErrInvalidRecord containing %q", tt.js, err, tt.err)
			}
		})
	}
}

func TestNormalised(t *testing.T) {
	r, err := ParseLocalRecord([]byte(`{"name":"Host.Example.","type":"a","data":"192.0.2.1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "host.example" || r.Type != "A" || r.Class != "IN" || r.TTL != DefaultRecordTTL {
		t.Fatalf("got %+v", r)
	}
	f := r.Fields()
	if _, ok := f["preference"]; ok {
		t.Fatalf("A record shows MX fields: %v", f)
	}
}

func TestCheckSet(t *testing.T) {
	p := func(js string) LocalRecord {
		r, err := ParseLocalRecord([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	cn := p(`{"name":"w.example","type":"CNAME","data":"h.example"}`)
	a := p(`{"name":"w.example","type":"A","data":"192.0.2.1"}`)
	other := p(`{"name":"x.example","type":"A","data":"192.0.2.1"}`)
	if err := CheckLocalRecords([]LocalRecord{cn, other}); err != nil {
		t.Fatal(err)
	}
	if err := CheckLocalRecords([]LocalRecord{a, cn}); err == nil {
		t.Fatal("CNAME beside A accepted")
	}
	if err := CheckLocalRecords([]LocalRecord{cn, cn}); err == nil {
		t.Fatal("two CNAMEs accepted")
	}
}

func FuzzParseLocalRecord(f *testing.F) {
	for _, s := range []string{
		`{"name":"h.example","type":"A","data":"192.0.2.1"}`,
		`{"name":"example","type":"MX","preference":10,"exchange":"mx.example"}`,
		`{"name":"example","type":"OTHER","rrtype":65280,"data":"deadbeef"}`,
		`{"name":"example","type":"TXT","data":"a\\b\"c"}`,
		`{"name":"example","type":"CAA","flag":0,"tag":"issue","value":"x"}`,
		`{"name":"example","type":"SOA","mname":"a","rname":"b","serial":1,"refresh":2,"retry":3,"expire":4,"minimum":5}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseLocalRecord(b)
		if err != nil {
			return
		}
		if _, err := r.RR(); err != nil {
			t.Fatalf("valid record does not convert: %+v: %v", r, err)
		}
		js, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := ParseLocalRecord(js)
		if err != nil || r2 != r {
			t.Fatalf("round trip of %+v: %+v, %v", r, r2, err)
		}
	})
}
