package messages

import (
	"fmt"
	"strings"
)

// NormalizeDomain lowercases a domain name, drops a trailing dot and checks
// it is a valid DNS name (letters, digits, hyphens; labels 1-63 bytes, not
// starting or ending with a hyphen; at most 253 bytes).
func NormalizeDomain(s string) (string, error) {
	name := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(s), "."))
	if name == "" {
		return "", fmt.Errorf("%w: domain is required", ErrInvalid)
	}
	if len(name) > 253 {
		return "", fmt.Errorf("%w: domain %q is longer than 253 characters", ErrInvalid, s)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("%w: domain %q has an empty or over-long label", ErrInvalid, s)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("%w: domain %q has a label starting or ending with '-'", ErrInvalid, s)
		}
		// By character, so the message quotes what the client sent ('é',
		// not the first byte of its UTF-8, 'Ã').
		for _, ch := range label {
			if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-') {
				return "", fmt.Errorf("%w: domain %q contains %q", ErrInvalid, s, ch)
			}
		}
	}
	return name, nil
}

// ValidHash checks a tunnel hash: "hs://" followed by 64 hex digits.
func ValidHash(h string) error {
	rest, ok := strings.CutPrefix(h, "hs://")
	if !ok || len(rest) != 64 {
		return fmt.Errorf("%w: hash must be hs:// followed by 64 hex digits, got %q", ErrInvalid, h)
	}
	for i := 0; i < len(rest); i++ {
		ch := rest[i]
		if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f' || ch >= 'A' && ch <= 'F') {
			return fmt.Errorf("%w: hash must be hs:// followed by 64 hex digits, got %q", ErrInvalid, h)
		}
	}
	return nil
}
