package testutil

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Client is the HTTP client tests use: a real net/http client with a
// timeout, so a hung server fails the test instead of hanging it.
var Client = &http.Client{Timeout: 10 * time.Second}

// Call does one request and returns status and body.
func Call(t testing.TB, method, url, body string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// MustJSON does a request that must answer want and decodes its body
// into v (when v is not nil).
func MustJSON(t testing.TB, method, url, body string, want int, v any) {
	t.Helper()
	code, got := Call(t, method, url, body)
	if code != want {
		t.Fatalf("%s %s = %d %q, want %d", method, url, code, got, want)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(got), v); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, url, got, err)
		}
	}
}

// AddDomain claims domain with hash through the admin API at base.
func AddDomain(t testing.TB, base, domain, hash string) {
	t.Helper()
	code, body := Call(t, "POST", base+"/api/add-domain", `{"domain":"`+domain+`","hash":"`+hash+`"}`)
	if code != 200 || body != "OK" {
		t.Fatalf("add-domain %s = %d %q", domain, code, body)
	}
}

// Hash returns a valid tunnel hash made of one repeated hex digit.
func Hash(digit byte) string { return "hs://" + strings.Repeat(string(digit), 64) }
