// Package ledger is the actor that owns the signed, replicated ledger of
// domain claims and votes, the naming view derived from it, and the local
// IP assignments of its domains.
//
// Every change is an op signed by its writer and committed to ledger.db
// (buntdb, SyncPolicy Always) before it is applied, so anything the actor
// acknowledged survives kill -9. Ops from peers are verified (signature,
// authorised writer, key ownership, contiguous seq) before they are
// applied; rejected ops count as validationFailures and never reach the
// view. Ops read back from our own ledger.db at start are verified again
// (signatures side by side on every core: sigs.go), so a file edited or
// damaged on disk cannot bring in an op no writer signed; one that no
// longer applies is logged and left out of the view. An applied op moves our
// hybrid logical clock (so our later ops order after it) unless another
// writer dated it more than an hour past our wall clock (maxClockAhead:
// one op from a broken or hostile clock would otherwise move every
// node's clock there for good); our own ops' clocks only ever increase,
// the logical counter carrying into the milliseconds at its top.
//
// The actor spawns one domain actor (actors/domain) per domain with claims
// and asks it to evaluate consensus whenever an op touches the domain,
// the set of active peers changes (a connected peer becoming a writer
// included) or this node becomes a writer; the domain actor answers with the
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
// at once, and a scheduled commit of claims is brought forward once as
// many are queued as the largest commit of the last second took (its
// clients are back). Beyond R writers our votes also wait VoteHold
// (250 ms) from the first one queued, so a burst's votes go out in few
// ops; while peers' ops wait in our mailbox more than half of it (we are
// behind), twice their wait, at most 1 s.
//
// Questions that change nothing (the listing, entries, one domain's
// consensus, the store's status for /api/health, the metrics scrape's
// counts, the conflicts), the operator's add-domain and remove-domain
// requests and the group commit of our claims are handled before the
// peers' ops and the actor's own work queued ahead of them
// (internal/mailbox, operatorFirst; at most four in a row while other
// messages wait, so a client polling in a loop cannot stop the ops): a
// ledger that is behind on peers' ops still answers its health probe
// and its operator at once, and an operator's claim is committed (and
// reaches the peers) without waiting for the backlog. A request
// overtakes only what is still queued, never a request its own sender
// was answered for, so a client reads its writes; front requests keep
// their order among themselves. The peer network's questions (vectors,
// ops since) keep their place among the ops they go with.
//
// Requests that change a domain (add, remove, recalculate) are answered
// once the domain has settled, so a read that follows sees the result;
// add-domain requests committed in one op are answered together, once all
// of them have settled, or 3 s (waitLimit) after the oldest request
// arrived whether settled or not: the change is committed before the
// wait (waiters.go).
//
// # Layout: a state machine in an actor shell
//
// The code is in layers, so that what decides can be tested without an
// actor system or a clock:
//
//   - state (state.go): the ledger's key view, writers, version vector
//     and per-domain index; verify and apply ops. Pure.
//   - machine (machine.go, waiters.go, pacing.go): the scheduling core, in
//     the manner of etcd raft's Step/Ready. machine.Step(input, now)
//     takes one input (an op touched domains, a request waits, a domain
//     actor answered, a timer fired, the message's round) and the time,
//     and returns an Output: the domains to retire, to give an address
//     and to evaluate (with the evalKey), whether to publish, the
//     waiters' replies to answer, the queued claims, votes or peer ops
//     to commit now, and the timers to arm. It owns the group-commit
//     queues of claims, votes and peer ops and their pacing, the
//     dirty/in-flight/deferred/recalc sets of the evaluation rounds, the
//     waiters and their groups, and the publish schedule; it does no I/O
//     and reads no clock. machine_test.go drives it with scripts
//     (testdata/machine/*.txt: input, expected output, time as input);
//     FuzzMachineAnswersEveryWaiter checks that any sequence of inputs,
//     brought to rest, answers every waiter exactly once and only with a
//     publish.
//   - addresses (addresses.go): IP assignment's owner. It alone holds the
//     pool (internal/ipam), the "ip:<domain>" records and the SUBNETS
//     setting in node.db (no other code reads or writes those keys) and
//     decides every address; the actor calls it when a round names a
//     claimed domain and for the subnet, interface and cleanup requests,
//     and sends the hints its changes call for. It is a type the ledger
//     actor holds, not an actor of its own, on purpose:
//     (1) an address follows from a round of the ledger (a domain became
//     claimed), and the naming snapshot the ledger publishes carries each
//     resolved domain with its address in one swap; an actor in between
//     would let DNS and the edge see a resolved domain without its IP, or
//     need a second publisher and a join on their read path.
//     (2) it has no input of its own: assignment, cleanup and the subnet
//     and interface requests all follow the ledger's set of claimed
//     domains, and none is slow (a pool lookup, one node.db batch per
//     round), so a mailbox of its own would isolate nothing.
//     Were addresses ever given for something the ledger does not know
//     (relays, peers), that is when it becomes an actor.
//   - the actor (actor.go, shell.go, requests.go, evaluate.go, ops.go,
//     queries.go, services.go, internal.go): Receive turns messages and
//     timer self-messages into machine inputs (Actor.step) and carries out
//     the Output (Actor.do): it signs and persists ops (appendLocal,
//     applyBatch), commits the queued claims, votes and peer ops the
//     machine hands back when their timer fires, spawns and asks the
//     domain actors, has addresses assign and persist the round's
//     addresses, builds and stores the snapshot, and answers requests.
//
// Still in the actor, not the machine: validating requests and building
// the ops they write, the snapshot and listing caches, the replica-set
// membership and the active-peer epoch (the machine gets the epoch with
// each Round), and the internal domains. Each domain keeps its own
// supervised actor (actors/domain), whose consensus and auto-vote are
// pure functions in actors/consensus.
package ledger
