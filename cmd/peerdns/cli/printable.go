package cli

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// printable is s as text for a terminal, whatever a node put in it:
// any character that does not print (C0 and C1 controls, DEL, bidi
// overrides) is written as its Go escape (\x1b, \u202e), and bytes that
// are not UTF-8 become U+FFFD, so a node's text cannot move the cursor,
// clear the screen or retitle the terminal. With spaces, tabs and line
// breaks become spaces (a message on one line); without, they are
// escaped too (a table cell, whose tab or line break would end the cell
// or the row).
func printable(s string, spaces bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case spaces && (r == '\n' || r == '\r' || r == '\t'):
			b.WriteByte(' ')
		case !unicode.IsPrint(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// cell is a value as one table cell (printable, everything escaped).
func cell(v any) string { return printable(fmt.Sprint(v), false) }

// Printable is s as text for a terminal as printable makes a table cell:
// every character that does not print, tabs and line breaks too, as its
// Go escape. For text the node did not write that this binary prints
// (`peerdns agent call`'s reply).
func Printable(s string) string { return printable(s, false) }
