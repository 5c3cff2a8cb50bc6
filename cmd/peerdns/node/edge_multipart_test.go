package node

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// TestEdgePassesMultipartBodies: a form upload reaches the upstream byte
// for byte. fasthttp pre-parses a multipart body of known length into a
// form by default, and a proxy that forwarded that form would send a
// re-encoded body (fields in map order, parts' headers rebuilt, files
// over 16 MiB through temp files on the node's disk).
func TestEdgePassesMultipartBodies(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	got := make(chan [32]byte, 4)
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- sha256.Sum256(b)
		w.WriteHeader(204)
	}))
	t.Cleanup(back.Close)
	_, url := tunnelServerURL(t, n, fmt.Sprintf(`{"name":"forms","port":%d}`, back.Listener.Addr().(*net.TCPAddr).Port))
	mustJSON(t, "POST", base+"/api/add-domain", `{"domain":"forms.p2p","hash":"`+url+`"}`, 200, nil)
	httpAddr, _ := n.EdgeAddrs()

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, f := range []string{"zeta", "alpha", "mid", "alpha"} { // an order no map keeps
		_ = mw.WriteField(f, "value of "+f)
	}
	fw, _ := mw.CreateFormFile("upload", "data.bin")
	_, _ = fw.Write(bytes.Repeat([]byte{0, 1, 2, 0xff}, 64<<10))
	_ = mw.Close()
	want := sha256.Sum256(body.Bytes())

	testutil.Eventually(t, 10*time.Second, func() error {
		req, _ := http.NewRequest("POST", "http://forms.p2p/upload", bytes.NewReader(body.Bytes()))
		req.Header.Set("Content-Type", mw.FormDataContentType())
		r, err := edgeClient(httpAddr, nil).Do(req)
		if err != nil {
			return err
		}
		r.Body.Close()
		if r.StatusCode != 204 {
			return fmt.Errorf("status %d", r.StatusCode)
		}
		return nil
	})
	select {
	case h := <-got:
		if h != want {
			t.Fatal("the upstream got a different body than the client sent")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream got nothing")
	}
}
