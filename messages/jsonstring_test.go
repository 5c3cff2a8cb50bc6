package messages

import (
	"encoding/json"
	"testing"
)

// FuzzAppendJSONString: whatever the bytes, the literal is valid JSON and
// reads back as the string encoding/json's encoding reads back as
// (invalid UTF-8 as U+FFFD alike).
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "example.p2p", `"\`, "\n\r\t\b\f\x00\x1f\x7f", "<>&", "é日本💡", "\u2028\u2029", "\xff", "a\xe2\x82b", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ours := AppendJSONString([]byte("x"), s)[1:]
		if !json.Valid(ours) {
			t.Fatalf("%q: not JSON: %s", s, ours)
		}
		std, _ := json.Marshal(s)
		var a, b string
		if err := json.Unmarshal(ours, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(std, &b); err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Fatalf("%q: reads back %q, encoding/json's %q", s, a, b)
		}
	})
}
