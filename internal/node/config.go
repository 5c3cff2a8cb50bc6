package node

// Config is what a node is started with: the command-line contract of
// `peerdns node` (cmd/peerdns fills it from flags and PEERDNS_* env).
type Config struct {
	Data      string
	AdminAddr string
	DNSAddr   string
	HTTPAddr  string
	HTTPSAddr string
	P2PAddr   string
	Bootstrap []string
	Join      string
	Upstream  []string
	System    bool

	// Settings read from the environment only (no flag): ADMIN_DOMAIN,
	// PROFILE_DOMAIN, SUBNET_BASE, INITIAL_IP_INDEX, LOG_LEVEL.
	AdminDomain    string
	SubnetBase     string
	InitialIPIndex int
	LogLevel       string

	// Version is reported in logs and APIs.
	Version string
}
