package messages

import "errors"

// Services of a domain and subscriptions to them: the ledger's claim
// services write and the hash in force per domain (actors/ledger), and
// the subscription requests to the tunnels supervisor (actors/tunnel).

// Sentinels of the subscription requests.
var (
	// ErrAlreadySubscribed: service-subscribe for a service this node
	// subscribes to already, or whose client id is taken (409).
	ErrAlreadySubscribed = errors.New("already subscribed")
	// ErrNotSubscribed: service-unsubscribe for a service this node does
	// not subscribe to (404).
	ErrNotSubscribed = errors.New("not subscribed")
)

// SetClaimServices rewrites the local writer's claim of Domain with the
// same hash and ssl and these services and clients (a signed ledger op,
// so every node sees them). Nothing is written when they are unchanged.
// Err wraps ErrNotOwner when the local writer has no claim for the
// domain.
type SetClaimServices struct {
	Domain   string
	Services []Service
	// Clients are the ids of the tunnel clients the owner made for the
	// domain with tunnel-client-create (services included), sorted: the
	// claim record's clients array.
	Clients []string
}

// SetClaimServicesReply answers SetClaimServices.
type SetClaimServicesReply struct{ Err error }

// GetDomainServices asks for the services of a domain's resolved claim
// (empty when it has none or is unresolved).
type GetDomainServices struct{ Domain string }

// GetDomainServicesReply answers GetDomainServices.
type GetDomainServicesReply struct {
	Services []Service
	Err      error
}

// DomainTarget is what tunnel clients of a domain follow on this node:
// the claim in force, which is the resolved claim, or the local writer's
// own claim when it lost and its hash preference is "local".
type DomainTarget struct {
	Domain   string
	Hash     string    // hash of the claim in force ("" when none)
	Services []Service // services of the claim in force
	Owned    bool      // the claim in force is the local writer's
}

// GetDomainTargets asks the ledger for the DomainTarget of each domain.
type GetDomainTargets struct{ Domains []string }

// GetDomainTargetsReply answers GetDomainTargets; domains without a
// claim in force are absent.
type GetDomainTargetsReply struct{ Targets map[string]DomainTarget }

// HashPreferenceChanged is published on the event stream by the ledger
// when update-hash-preference changed a domain's preference.
type HashPreferenceChanged struct{ Domain, Preference string }

// Subscription is one item of GET /api/service-subscriptions and the
// service-subscribe body (spec: Subscription).
type Subscription struct {
	Domain      string `json:"domain"`
	ServiceName string `json:"serviceName"`
	Key         string `json:"key"`
	Port        int    `json:"port"`
	Protocol    string `json:"protocol"`
}

// ServiceSubscribe makes the client <domain>_<serviceName> and keeps the
// subscription. The reply is a SubscriptionReply.
type ServiceSubscribe struct{ Sub Subscription }

// ServiceUnsubscribe deletes the subscription and its client.
type ServiceUnsubscribe struct{ Domain, ServiceName string }

// SubscribeAll subscribes to every service of Domain, now and later.
type SubscribeAll struct{ Domain string }

// UnsubscribeAll ends subscribe-all for Domain and unsubscribes from
// every service of it.
type UnsubscribeAll struct{ Domain string }

// SubscriptionReply answers the four subscription writes.
type SubscriptionReply struct{ Err error }

// GetSubscriptions lists the subscriptions.
type GetSubscriptions struct{}

// GetSubscriptionsReply answers GetSubscriptions.
type GetSubscriptionsReply struct {
	Subscriptions []Subscription
	AllDomains    []string // domains with subscribe-all on
}

// DomainAnswered tells the tunnels supervisor that the DNS server
// answered a p2p domain (at most once a second per domain, sent off the
// answer path). No reply.
type DomainAnswered struct{ Domain string }

// RestartDomainClients restarts every tunnel client of Domain onto the
// hash in force, closing their connections. The reply is a
// TunnelWriteReply.
type RestartDomainClients struct{ Domain string }
