package messages

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestFrameRoundTripSizes reads frames of every size around the body
// buffer's growth steps back whole, and a body cut short as
// io.ErrUnexpectedEOF.
func TestFrameRoundTripSizes(t *testing.T) {
	for _, size := range []int{0, 1, BodyChunk - 20, BodyChunk, 3*BodyChunk + 7, AgentMaxFrame - 64} {
		in := AgentReply{Status: 200, Body: bytes.Repeat([]byte{0xa5}, size)}
		var buf bytes.Buffer
		if err := WriteFrame(&buf, &in, AgentMaxFrame); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		whole := buf.Bytes()
		var out AgentReply
		if err := ReadFrame(bytes.NewReader(whole), &out, AgentMaxFrame); err != nil || !bytes.Equal(out.Body, in.Body) {
			t.Fatalf("size %d: %v, body of %d bytes", size, err, len(out.Body))
		}
		err := ReadFrame(bytes.NewReader(whole[:len(whole)-1]), &out, AgentMaxFrame)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("size %d cut short: %v, want %v", size, err, io.ErrUnexpectedEOF)
		}
	}
}
