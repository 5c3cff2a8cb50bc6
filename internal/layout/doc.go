// Package layout holds the test that keeps the tree and its documents in
// step: every package of a top-level folder has its row in that folder's
// README, every top-level folder has its row in docs/architecture.md, and
// every import arrow follows the rules of the layout table there (which
// folders may import which). It has no code of its own; it imports nothing
// of the project.
package layout
