package tunnel

import (
	"encoding/json"
	"fmt"

	"peerdns/internal/store"
	"peerdns/messages"
)

// Store keys in node.db.
const (
	serverPrefix = "tunnel:server:"
	clientPrefix = "tunnel:client:"
	allPrefix    = "tunnel:suball:" // + domain: subscribe-all is on
)

// serverRecord is a server as persisted. Opts.Key is never written (its
// JSON tag is "-"): the seed is, so the key survives restarts.
type serverRecord struct {
	ID      string                    `json:"id"`
	Opts    messages.TunnelServerOpts `json:"opts"`
	Seed    string                    `json:"seed"`
	Created int64                     `json:"created"` // unix ns, for listing order
}

// clientRecord is a client as persisted. Follow says what its key
// follows (follow.go): "" a fixed key, followDomain the hash of the
// domain's claim in force, followService the service of that name in the
// claim in force (a subscription client: the record is the subscription).
type clientRecord struct {
	ID      string                    `json:"id"`
	Opts    messages.TunnelClientOpts `json:"opts"`
	Follow  string                    `json:"follow,omitempty"`
	Created int64                     `json:"created"`
}

// isService: an owner-made client with a service name, listed in the
// services of its domain's claim.
func (r clientRecord) isService() bool { return r.Opts.ServiceName != "" && r.Follow != followService }

// isOwned: a client made by tunnel-client-create (which checks that the
// local writer owns the domain), listed in the clients of its domain's
// claim; every client that is not a subscription.
func (r clientRecord) isOwned() bool { return !r.isSubscription() }

// isSubscription: a client made by service-subscribe or subscribe-all.
func (r clientRecord) isSubscription() bool { return r.Follow == followService }

func saveJSON(db *store.DB, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := db.Set(key, string(b)); err != nil {
		return fmt.Errorf("persist %s: %w", key, err)
	}
	return nil
}

// loadRecords decodes every record under prefix; undecodable ones are
// returned by key in bad.
func loadRecords[T any](db *store.DB, prefix string) (recs []T, bad []string, err error) {
	kvs, err := db.List(prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("load %s*: %w", prefix, err)
	}
	for _, kv := range kvs {
		var r T
		if err := json.Unmarshal([]byte(kv.Value), &r); err != nil {
			bad = append(bad, kv.Key)
			continue
		}
		recs = append(recs, r)
	}
	return recs, bad, nil
}
