// Package ledger is the actor that owns the signed, replicated ledger of
// domain claims and votes, the naming view derived from it, and the local
// IP assignments of its domains.
//
// Every change is an op signed by its writer and committed to ledger.db
// (buntdb, SyncPolicy Always) before it is applied, so anything the actor
// acknowledged survives kill -9. Ops from peers are verified (signature,
// authorised writer, key ownership, contiguous seq) before they are
// applied; rejected ops count as validationFailures and never reach the
// view. Ops read back from our own ledger.db at start are trusted: they
// were verified when they were first applied.
//
// The actor spawns one domain actor (actors/domain) per domain with claims
// and asks it to evaluate consensus whenever an op touches the domain or
// the set of active peers changes; the domain actor answers with the
// state and the votes the local peer should cast, which this actor signs
// and appends. A first claim of a domain (no claims or votes on it yet)
// carries our own vote in the same op: the auto-vote is known then. When
// nothing is in flight the resolved view is published as an immutable
// view.Snapshot for DNS and the edge proxy: at once when a request waits
// for it, otherwise at most every publishGap (a peer's burst would publish
// after every op), and before any read of the admin API, so the API never
// reports what DNS and the proxy do not serve yet.
//
// Our own claims and auto-votes are group-committed, and a commit that
// follows the previous one by less than ClaimGap (claims) or VoteGap
// (votes) waits for the rest of the gap so that what arrives meanwhile
// joins it (pacing.go); a lone request after a quiet spell is committed
// at once.
//
// Requests that change a domain (add, remove, recalculate) are answered
// only once the domain has settled, so a read that follows sees the result;
// add-domain requests committed in one op are answered together, once all
// of them have settled (waiters.go).
package ledger
