// Command notes is an example peerdns plugin: a small notes app on
// notes.p2p with a page (www/), a JSON API served by this handler, its
// own database, actions, a setting and a call to the same plugin on
// another peer. See ../README.md for the protocol and how to install it.
//
//	GET    /api/notes         the notes, oldest first
//	POST   /api/notes         {"text": "..."} → 201 and the note
//	DELETE /api/notes/{id}    → 204
//	GET    /api/hello         {greeting, domain, peerId, writer}
//
// Actions: count → {notes}, ping-peer {peer} → the other peer's answer,
// crash → the process exits with status 3.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Stdin, os.Stdout, os.Stderr))
}
