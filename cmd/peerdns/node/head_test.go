package node

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// HEAD is answered wherever GET is (RFC 9110 §9.3.2: the GET's status
// and headers, no body), so an uptime monitor's HEAD /api/health sees
// the node's health, and a 405 lists HEAD among the methods allowed.
func TestHeadWhereGet(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	for _, tt := range []struct {
		path   string
		stable bool // the same body twice in a row: its length is compared
	}{
		{"/api/health", false}, {"/api/status", false}, {"/api/logs/core?lines=3", false},
		{"/api/consensus/none.p2p", true}, {"/api/entries", true}, {"/", true}, {"/domains", true},
	} {
		path := tt.path
		get, err := noRedirect.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := io.ReadAll(get.Body)
		get.Body.Close()
		head, err := noRedirect.Head(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(head.Body)
		head.Body.Close()
		if head.StatusCode != get.StatusCode || len(body) != 0 || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") ||
			head.Header.Get("Location") != get.Header.Get("Location") ||
			(tt.stable && get.StatusCode == 200 && head.Header.Get("Content-Length") != strconv.Itoa(len(want))) {
			t.Errorf("HEAD %s = %d %q (Content-Length %q, %d body bytes); GET = %d %q with %d bytes",
				path, head.StatusCode, head.Header.Get("Content-Type"), head.Header.Get("Content-Length"), len(body),
				get.StatusCode, get.Header.Get("Content-Type"), len(want))
		}
	}
	req, _ := http.NewRequest("PUT", base+"/api/status", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if allow := resp.Header.Get("Allow"); resp.StatusCode != 405 || !strings.Contains(allow, "HEAD") {
		t.Errorf("PUT /api/status = %d, Allow %q; want 405 listing HEAD", resp.StatusCode, allow)
	}
	// POST routes take no HEAD.
	resp, err = http.Head(base + "/api/add-domain")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("HEAD /api/add-domain = %d, want 405", resp.StatusCode)
	}
}

// noRedirect shows a redirect as it is.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
