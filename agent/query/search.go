package query

import "strings"

// SearchPattern is the full-text search pattern of v2/v3 q, built as
// Netdata builds it (a case-insensitive simple pattern in substring
// mode): words separated by ',', '|', tab, CR, LF, FF or VT (a space is
// part of a word, so "load average" is one word); a word without '*'
// matches anywhere in a string, a word with '*' is a glob over the whole
// string ("cpu*" a prefix, "*cpu" a suffix, "a*b" both); a leading '!'
// makes the word negative; the first word that matches a string decides.
// Words are trimmed of spaces around them (Netdata keeps them; the
// dashboard's search box does not send them on purpose). A nil
// *SearchPattern ("", "*" or only separators) matches nothing: q without
// a pattern selects by nothing but the node.
type SearchPattern struct {
	words []patWord
}

// SearchResult is what a search pattern says of one string.
type SearchResult int

const (
	SearchNone     SearchResult = iota // no word matched
	SearchPositive                     // the first matching word is positive
	SearchNegative                     // the first matching word is negative
)

// CompileSearch parses q; nil when q selects nothing by pattern.
func CompileSearch(q string) *SearchPattern {
	words := patternWords(strings.ToLower(q), func(r rune) bool {
		switch r {
		case ',', '|', '\t', '\r', '\n', '\f', '\v':
			return true
		}
		return false
	})
	if words == nil {
		return nil
	}
	return &SearchPattern{words: words}
}

// Test reports whether the first word matching s is positive, negative,
// or none matched.
func (p *SearchPattern) Test(s string) SearchResult {
	if p == nil {
		return SearchNone
	}
	ls := strings.ToLower(s)
	for i := range p.words {
		w := &p.words[i]
		var ok bool
		if w.parts != nil {
			ok = w.matches(ls)
		} else {
			ok = strings.Contains(ls, w.text)
		}
		if ok {
			if w.neg {
				return SearchNegative
			}
			return SearchPositive
		}
	}
	return SearchNone
}

// Match reports whether s matches positively.
func (p *SearchPattern) Match(s string) bool { return p.Test(s) == SearchPositive }
