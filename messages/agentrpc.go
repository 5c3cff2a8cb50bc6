package messages

import (
	"errors"
	"fmt"
	"strings"
)

// --- agent admin RPC and parent streaming (peerdns agent over the peer transport) ---
//
// Every call is one QUIC stream: the caller writes one AgentRequest frame
// (WriteFrame: 4-byte length + strict CBOR, at most AgentMaxFrame bytes)
// and reads one AgentReply frame. The "stream" method keeps its stream
// open: after the reply the child writes StreamBatch frames and the parent
// answers each with a StreamAck.

// Agent RPC methods.
const (
	AgentInfo          = "info"           // viewer: the agent's identity, role of the caller, listening state
	AgentGet           = "api.get"        // viewer: any /api/... GET path, answered by the REST handlers
	AgentRetentionSet  = "retention.set"  // admin: tier 0/1 retention
	AgentPrune         = "prune"          // admin: drop points before a time (one chart or all)
	AgentFunctionsList = "functions.list" // viewer: the job names /api/v3/functions lists
	AgentFunctionsRun  = "functions.run"  // admin: run one function (processes, network-connections)
	AgentLogs          = "logs"           // audit/journal: admin; anomaly: viewer
	AgentStream        = "stream"         // child: stream tier-0 points to a parent
)

// Agent peer roles, as written in the allowlist.
const (
	RoleAdmin  = "admin"  // every method
	RoleViewer = "viewer" // read methods only
	RoleChild  = "child"  // only "stream": a child agent feeding this parent
)

// AgentMaxFrame bounds one RPC frame either way (the codec's own limit).
const AgentMaxFrame = MaxDecodeBytes

// AgentMaxNonce bounds a request nonce; at least 16 bytes are required.
const AgentMaxNonce = 64

// ErrBadAgentRequest reports a request that breaks AgentRequest.Validate.
var ErrBadAgentRequest = errors.New("invalid agent request")

// AgentRequest is one RPC call. Nonce (16-64 random bytes) and
// TimeUnixNano make it single-use: the agent refuses a time outside its
// window and a nonce it has seen within it.
type AgentRequest struct {
	Method       string `cbor:"1,keyasint"`
	Nonce        []byte `cbor:"2,keyasint"`
	TimeUnixNano int64  `cbor:"3,keyasint"`
	// Path is the /api/... path with its query (api.get).
	Path      string          `cbor:"4,keyasint,omitempty"`
	Retention *AgentRetention `cbor:"5,keyasint,omitempty"`
	Prune     *AgentPruneArgs `cbor:"6,keyasint,omitempty"`
	Function  *AgentFunction  `cbor:"7,keyasint,omitempty"`
	Logs      *AgentLogsArgs  `cbor:"8,keyasint,omitempty"`
	Stream    *StreamHello    `cbor:"9,keyasint,omitempty"`
}

// AgentRetention sets the retention of tier 0 (1-second points) and tier 1
// (per-minute aggregates), in seconds; 0 keeps a tier's current value.
type AgentRetention struct {
	Tier0Seconds int64 `cbor:"1,keyasint,omitempty"`
	Tier1Seconds int64 `cbor:"2,keyasint,omitempty"`
}

// AgentPruneArgs drops every point before BeforeUnix (unix seconds) of
// Chart, or of every chart when Chart is "".
type AgentPruneArgs struct {
	Chart      string `cbor:"1,keyasint,omitempty"`
	BeforeUnix int64  `cbor:"2,keyasint"`
}

// AgentFunction names a function and its arguments (name=value).
type AgentFunction struct {
	Name string            `cbor:"1,keyasint"`
	Args map[string]string `cbor:"2,keyasint,omitempty"`
}

// AgentLogsArgs asks one log source for its newest entries.
type AgentLogsArgs struct {
	Source string `cbor:"1,keyasint"` // audit, journal or anomaly
	Limit  int    `cbor:"2,keyasint,omitempty"`
}

// AgentReply answers one call. Status is an HTTP status (200 on success;
// 400 malformed, 403 not allowed, 404 unknown, 409 replayed, 413 too
// large, 5xx failures); Error is the message when Status is not 2xx. Body
// is JSON, except api.get, which carries the handler's body as is with
// its ContentType.
type AgentReply struct {
	Status      int    `cbor:"1,keyasint"`
	Error       string `cbor:"2,keyasint,omitempty"`
	ContentType string `cbor:"3,keyasint,omitempty"`
	Body        []byte `cbor:"4,keyasint,omitempty"`
	// Resume answers "stream": the parent's newest stored second per
	// chart of that child, so the child resends from there.
	Resume map[string]int64 `cbor:"5,keyasint,omitempty"`
}

// Limits of one request's arguments.
const (
	agentMaxPath  = 4096
	agentMaxName  = 256
	agentMaxArgs  = 32
	agentMaxLimit = 2000
)

// Validate checks the request's shape: the method is known and carries
// exactly the argument it needs, within bounds. Authorisation and replay
// checks are the server's.
func (r *AgentRequest) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrBadAgentRequest, fmt.Sprintf(format, a...))
	}
	if len(r.Nonce) < 16 || len(r.Nonce) > AgentMaxNonce {
		return bad("nonce must be 16 to %d bytes, got %d", AgentMaxNonce, len(r.Nonce))
	}
	if r.TimeUnixNano <= 0 {
		return bad("time missing")
	}
	set := 0
	for _, p := range []bool{r.Path != "", r.Retention != nil, r.Prune != nil, r.Function != nil, r.Logs != nil, r.Stream != nil} {
		if p {
			set++
		}
	}
	need := func(ok bool, what string) error {
		if !ok || set != 1 {
			return bad("%s needs exactly its %s argument", r.Method, what)
		}
		return nil
	}
	switch r.Method {
	case AgentInfo, AgentFunctionsList:
		if set != 0 {
			return bad("%s takes no argument", r.Method)
		}
		return nil
	case AgentGet:
		if err := need(r.Path != "", "path"); err != nil {
			return err
		}
		if len(r.Path) > agentMaxPath || !strings.HasPrefix(r.Path, "/api/") || strings.ContainsAny(r.Path, "\r\n\x00 #") {
			return bad("path must start with /api/, have no spaces and be at most %d bytes", agentMaxPath)
		}
	case AgentRetentionSet:
		if err := need(r.Retention != nil, "retention"); err != nil {
			return err
		}
		if r.Retention.Tier0Seconds < 0 || r.Retention.Tier1Seconds < 0 || (r.Retention.Tier0Seconds == 0 && r.Retention.Tier1Seconds == 0) {
			return bad("retention needs a positive tier0 or tier1 seconds")
		}
	case AgentPrune:
		if err := need(r.Prune != nil, "prune"); err != nil {
			return err
		}
		if r.Prune.BeforeUnix <= 0 || len(r.Prune.Chart) > agentMaxName {
			return bad("prune needs before (unix seconds) and a chart id of at most %d bytes", agentMaxName)
		}
	case AgentFunctionsRun:
		if err := need(r.Function != nil, "function"); err != nil {
			return err
		}
		if r.Function.Name == "" || len(r.Function.Name) > agentMaxName || len(r.Function.Args) > agentMaxArgs {
			return bad("function needs a name and at most %d args", agentMaxArgs)
		}
	case AgentLogs:
		if err := need(r.Logs != nil, "logs"); err != nil {
			return err
		}
		if r.Logs.Limit < 0 || r.Logs.Limit > agentMaxLimit {
			return bad("logs limit must be 0 to %d", agentMaxLimit)
		}
	case AgentStream:
		if err := need(r.Stream != nil, "stream"); err != nil {
			return err
		}
		return r.Stream.Validate()
	default:
		return bad("unknown method %q", r.Method)
	}
	return nil
}

// StreamHello opens a child's stream: who the child is.
type StreamHello struct {
	Hostname string `cbor:"1,keyasint"`
	GUID     string `cbor:"2,keyasint"` // machine GUID
	NodeID   string `cbor:"3,keyasint"`
	Version  string `cbor:"4,keyasint,omitempty"`
	OS       string `cbor:"5,keyasint,omitempty"`
	Arch     string `cbor:"6,keyasint,omitempty"`
	// System and Settings are the child's machine and its agent's
	// options, as the child read them when it connected: a parent
	// answers for the child with them (info, nodes, settings), never
	// with its own. A child that sends neither is shown as unknown.
	System   *StreamSystem   `cbor:"7,keyasint,omitempty"`
	Settings *StreamSettings `cbor:"8,keyasint,omitempty"`
}

// StreamSystem is what a child tells its parent about its machine.
type StreamSystem struct {
	OSID          string `cbor:"1,keyasint,omitempty"`
	OSVersion     string `cbor:"2,keyasint,omitempty"`
	KernelName    string `cbor:"3,keyasint,omitempty"`
	KernelVersion string `cbor:"4,keyasint,omitempty"`
	Virt          string `cbor:"5,keyasint,omitempty"`
	Container     string `cbor:"6,keyasint,omitempty"`
	Cores         int    `cbor:"7,keyasint,omitempty"`
	CPUFreq       string `cbor:"8,keyasint,omitempty"` // Hz, as info's cpu_freq
	RAMTotal      uint64 `cbor:"9,keyasint,omitempty"`
	DiskTotal     uint64 `cbor:"10,keyasint,omitempty"`
	// Timezone is the child's time zone as its charts name it; Zone and
	// ZoneOffset (seconds east of UTC) its zone when it connected, as its
	// alarm log writes them.
	Timezone   string `cbor:"11,keyasint,omitempty"`
	Zone       string `cbor:"12,keyasint,omitempty"`
	ZoneOffset int    `cbor:"13,keyasint,omitempty"`
}

// StreamSettings is what a child tells its parent about its agent's
// options.
type StreamSettings struct {
	Parent          bool   `cbor:"1,keyasint,omitempty"`
	Journal         bool   `cbor:"2,keyasint,omitempty"`
	AnomalyDetector bool   `cbor:"3,keyasint,omitempty"`
	RemoteWrite     bool   `cbor:"4,keyasint,omitempty"`
	ExportDir       string `cbor:"5,keyasint,omitempty"`
	CORS            string `cbor:"6,keyasint,omitempty"`
	PeerAddr        string `cbor:"7,keyasint,omitempty"` // its admin RPC ("" when off)
	Tier0Seconds    int64  `cbor:"8,keyasint,omitempty"` // its own retention
	Tier1Seconds    int64  `cbor:"9,keyasint,omitempty"`
}

// Validate bounds the hello's strings.
func (h *StreamHello) Validate() error {
	for _, f := range []string{h.Hostname, h.GUID, h.NodeID} {
		if f == "" || len(f) > agentMaxName {
			return fmt.Errorf("%w: stream hello needs hostname, guid and node id of at most %d bytes", ErrBadAgentRequest, agentMaxName)
		}
	}
	long := []string{h.Version, h.OS, h.Arch}
	if y := h.System; y != nil {
		long = append(long, y.OSID, y.OSVersion, y.KernelName, y.KernelVersion, y.Virt, y.Container, y.CPUFreq, y.Timezone, y.Zone)
		if y.Cores < 0 {
			return fmt.Errorf("%w: stream hello: negative cores", ErrBadAgentRequest)
		}
	}
	if st := h.Settings; st != nil {
		long = append(long, st.ExportDir, st.CORS, st.PeerAddr)
		if st.Tier0Seconds < 0 || st.Tier1Seconds < 0 {
			return fmt.Errorf("%w: stream hello: negative retention", ErrBadAgentRequest)
		}
	}
	for _, f := range long {
		if len(f) > agentMaxName {
			return fmt.Errorf("%w: stream hello field too long", ErrBadAgentRequest)
		}
	}
	return nil
}

// StreamChart defines one chart of a child (sent before its first points
// and again whenever its definition changes).
type StreamChart struct {
	ID        string   `cbor:"1,keyasint"`
	Context   string   `cbor:"2,keyasint,omitempty"`
	Family    string   `cbor:"3,keyasint,omitempty"`
	Title     string   `cbor:"4,keyasint,omitempty"`
	Units     string   `cbor:"5,keyasint,omitempty"`
	ChartType string   `cbor:"6,keyasint,omitempty"`
	Priority  int      `cbor:"7,keyasint,omitempty"`
	Dims      []string `cbor:"8,keyasint"`
	DimNames  []string `cbor:"9,keyasint,omitempty"`
}

// StreamPoints are consecutive seconds of one chart: Values[i] holds the
// dimension values (chart order, NaN = gap) of second Start+i.
type StreamPoints struct {
	Chart  string      `cbor:"1,keyasint"`
	Start  int64       `cbor:"2,keyasint"`
	Values [][]float64 `cbor:"3,keyasint"`
}

// StreamBatch is one frame of a child's stream. Seq counts batches on this
// stream from 1; the parent acks each by Seq once it is stored.
type StreamBatch struct {
	Seq    uint64         `cbor:"1,keyasint"`
	Charts []StreamChart  `cbor:"2,keyasint,omitempty"`
	Points []StreamPoints `cbor:"3,keyasint,omitempty"`
}

// StreamAck acknowledges a stored batch; Error set means the parent
// refused it (and closes the stream).
type StreamAck struct {
	Seq   uint64 `cbor:"1,keyasint"`
	Error string `cbor:"2,keyasint,omitempty"`
	// Dropped counts points of the batch the parent refused (future
	// timestamps, over the dimension cap) without refusing the batch.
	Dropped int `cbor:"3,keyasint,omitempty"`
}
