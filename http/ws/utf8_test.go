package ws

import (
	"errors"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
)

// A text message that is not UTF-8 fails the connection with close code
// 1007 (RFC 6455 §8.1); a binary message is read as JSON all the same.
func TestTextNotUTF8Fails(t *testing.T) {
	noLeaks(t)
	w := newTestWS(t, true, nil)

	c := w.mustDial(t, "")
	if err := c.WriteMessage(websocket.BinaryMessage, []byte(`{"type":"request-domains"}`)); err != nil {
		t.Fatal(err)
	}
	if m := next(t, c); m["type"] != "domains-list" {
		t.Fatalf("reply to a binary request-domains = %v", m)
	}
	if err := c.WriteMessage(websocket.TextMessage, []byte("{\"type\":\"request-domains\",\"x\":\"\xff\"}")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, b, err := c.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseInvalidFramePayloadData {
		t.Fatalf("after a text message that is not UTF-8: %q, %v; want close 1007", b, err)
	}
}
