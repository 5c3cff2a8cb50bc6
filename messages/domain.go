package messages

import (
	"errors"
	"time"
)

// Sentinel errors that actors return and http/ maps to statuses.
var (
	ErrNotFound       = errors.New("not found")
	ErrNotOwner       = errors.New("this peer has no claim for the domain")
	ErrNotInitialised = errors.New("this peer has not joined a network yet")
	ErrInternalDomain = errors.New("domain is internal and cannot be claimed")
	ErrInvalid        = errors.New("invalid request")
)

// AddDomain claims a domain for the local writer. The reply comes once the
// claim is durable, the domain has an IP and consensus has settled.
type AddDomain struct {
	Domain string
	Hash   string
	SSL    bool
	// KeepSSL: when the local writer's claim of Domain has Hash already,
	// its ssl flag stays and SSL is not looked at (a tunnel server
	// claiming its domain again at its start must not undo add-domain's
	// ssl).
	KeepSSL bool
	// Asked is when the asker sent the request (zero: when the ledger
	// takes it): the ledger answers within its wait limit of it, so an
	// asker that stops waiting after a few seconds gets an answer even
	// when the request sat in the ledger's mailbox meanwhile.
	Asked time.Time
}

// AddDomainReply answers AddDomain.
type AddDomainReply struct{ Err error }

// RemoveDomain drops the local writer's claim (and, when it is the resolved
// claimant, asks every peer to drop theirs).
type RemoveDomain struct{ Domain string }

// RemoveDomainReply answers RemoveDomain; Err wraps ErrNotOwner for 403.
type RemoveDomainReply struct{ Err error }

// ConsensusState is the spec's ConsensusState object.
type ConsensusState struct {
	Status           string         `json:"status"`
	Hash             *string        `json:"hash"`
	ResolvedClaimant *string        `json:"resolvedClaimant"`
	VoteCounts       map[string]int `json:"voteCounts"`
	ActivePeers      int            `json:"activePeers"`
	QuorumMet        bool           `json:"quorumMet"`
	MinVotes         int            `json:"minVotes"`
	TotalVotes       int            `json:"totalVotes"`
	LastResolution   *int64         `json:"lastResolution"`
	Error            string         `json:"error,omitempty"`
}

// DomainEntry is one item of GET /api/resolved-domains.
type DomainEntry struct {
	Domain          string          `json:"domain"`
	Hash            string          `json:"hash"`
	IsLocal         bool            `json:"isLocal"`
	IsOwner         bool            `json:"isOwner"`
	ConsensusState  *ConsensusState `json:"consensusState,omitempty"`
	ConsensusStatus string          `json:"consensusStatus"`
	Services        []Service       `json:"services"`
	// Clients is the clients array of the claim shown (the same claim as
	// Services): the ids of the tunnel clients its writer made for the
	// domain with tunnel-client-create. Not in the spec's table; absent
	// when empty.
	Clients []string `json:"clients,omitempty"`
}

// GetDomains asks for the domain listing (internal domains first).
type GetDomains struct{}

// GetDomainsReply is an immutable listing shared by all readers, with its
// JSON encoding (built once per change, not per request).
type GetDomainsReply struct {
	Domains []DomainEntry
	JSON    []byte
}

// LedgerEntry is one item of GET /api/entries.
type LedgerEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// GetEntries asks for the live claim and vote entries.
type GetEntries struct{}

// GetEntriesReply answers GetEntries.
type GetEntriesReply struct{ Entries []LedgerEntry }

// GetConsensus asks for one domain's ConsensusState.
type GetConsensus struct{ Domain string }

// GetConsensusReply answers GetConsensus.
type GetConsensusReply struct {
	State ConsensusState
	Err   error
}

// SidecarStatus is the spec's consensus sidecar status.
type SidecarStatus struct {
	Open              bool    `json:"open"`
	Ready             bool    `json:"ready"`
	Writable          bool    `json:"writable"`
	BootstrapComplete bool    `json:"bootstrapComplete"`
	EventCount        int     `json:"eventCount"`
	DomainCount       int     `json:"domainCount"`
	IndexedLength     int     `json:"indexedLength"`
	Length            int     `json:"length"`
	LastApplyAt       *int64  `json:"lastApplyAt"`
	Key               *string `json:"key"`
}

// GetSidecarStatus asks for the sidecar status.
type GetSidecarStatus struct{}

// GetSidecarStatusReply answers GetSidecarStatus.
type GetSidecarStatusReply struct{ Status SidecarStatus }

// DomainResolutionCount is one item of ConsensusMetrics.DomainResolutions.
type DomainResolutionCount struct {
	Domain   string `json:"domain"`
	Resolved int    `json:"resolved"`
	Failed   int    `json:"failed"`
}

// ConsensusMetrics is the spec's consensus metrics object.
type ConsensusMetrics struct {
	Resolutions        int                     `json:"resolutions"`
	QuorumFailures     int                     `json:"quorumFailures"`
	Ties               int                     `json:"ties"`
	ValidationFailures int                     `json:"validationFailures"`
	TotalVotes         int                     `json:"totalVotes"`
	AvgVotesPerDomain  float64                 `json:"avgVotesPerDomain"`
	DomainResolutions  []DomainResolutionCount `json:"domainResolutions"`
	Sidecar            SidecarStatus           `json:"sidecar"`
	BootstrapComplete  bool                    `json:"bootstrapComplete"`
}

// GetConsensusMetrics asks for the consensus metrics.
type GetConsensusMetrics struct{}

// GetConsensusMetricsReply answers GetConsensusMetrics.
type GetConsensusMetricsReply struct{ Metrics ConsensusMetrics }

// Recalculate invalidates cached consensus (one domain, or all when Domain
// is "") and re-runs auto-voting. The reply comes once it settled.
type Recalculate struct{ Domain string }

// RecalculateReply answers Recalculate.
type RecalculateReply struct {
	Domains int
	Err     error
}

// P2PConflict is one item of GET /api/p2p-domain-conflicts.
type P2PConflict struct {
	Domain           string `json:"domain"`
	LocalHash        string `json:"localHash"`
	ResolvedHash     string `json:"resolvedHash"`
	ResolvedClaimant string `json:"resolvedClaimant"`
	LocalClaimant    string `json:"localClaimant"`
	ConsensusStatus  string `json:"consensusStatus"`
	HashPreference   string `json:"hashPreference"`
}

// GetP2PConflicts asks for the domains where another claimant won.
type GetP2PConflicts struct{}

// GetP2PConflictsReply answers GetP2PConflicts.
type GetP2PConflictsReply struct{ Conflicts []P2PConflict }

// SetHashPreference stores which hash to use for a conflicted domain.
type SetHashPreference struct{ Domain, Preference string }

// SetHashPreferenceReply answers SetHashPreference.
type SetHashPreferenceReply struct{ Err error }

// Subnet is the spec's Subnet object.
type Subnet struct {
	Base       string `json:"base"`
	CIDR       int    `json:"cidr"`
	StartIndex int    `json:"startIndex"`
	Name       string `json:"name"`
	Index      int    `json:"index"`
	Available  int    `json:"available"`
	Used       int    `json:"used"`
	Remaining  int    `json:"remaining"`
}

// GetSubnets asks for the configured subnets with their usage.
type GetSubnets struct{}

// GetSubnetsReply answers GetSubnets.
type GetSubnetsReply struct{ Subnets []Subnet }

// SetSubnets replaces the subnets (validated by the caller first).
type SetSubnets struct{ Subnets []Subnet }

// SetSubnetsReply answers SetSubnets.
type SetSubnetsReply struct{ Err error }

// Interface is one domain → local IP mapping.
type Interface struct {
	Domain string `json:"domain"`
	IP     string `json:"ip"`
}

// GetInterfaces asks for the IP assignments.
type GetInterfaces struct{}

// GetInterfacesReply answers GetInterfaces.
type GetInterfacesReply struct{ Interfaces []Interface }

// CleanupInterfaces releases the IPs of domains that no longer exist.
type CleanupInterfaces struct{}

// CleanupInterfacesReply answers CleanupInterfaces.
type CleanupInterfacesReply struct {
	Released int
	Err      error
}
