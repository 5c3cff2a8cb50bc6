package api

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/store"
	"peerdns/http/httpx"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// Fleet is what a parent agent knows of its children (agent/fleet.Parent).
type Fleet interface {
	// Children lists every child that ever streamed since the parent
	// started, sorted by hostname.
	Children() []FleetNode
	// Handler answers API requests with the data of one child, named by
	// machine GUID, node id, hostname or peer key.
	Handler(name string) (fasthttp.RequestHandler, bool)
}

// FleetStores is a Fleet whose children's stores the API can read
// directly (agent/fleet.Parent): v2/v3 data then answers over several
// nodes at once instead of handing the query to one child.
type FleetStores interface {
	ChildDB(name string) (*store.DB, bool)
}

// FleetNode is one child as the listings show it.
type FleetNode struct {
	GUID, NodeID, Hostname, PublicKey string
	Version, OS, Arch                 string
	// State is "live" (streaming, a batch within the last staleAfter
	// seconds), "stale" (connected, nothing newer) or "disconnected".
	State string
	// Since is when State began (unix seconds).
	Since                 int64
	ConnectedAt, LastSeen int64
	FirstEntry, LastEntry int64
	Charts, Dimensions    int
	// Dropped counts points refused (future timestamps, dimension cap).
	Dropped int64
	Batches int64
}

// PeerRPC is what the API shows of the agent's admin RPC (agent/rpc.Server).
type PeerRPC interface {
	ID() string
	// Listening is whether the RPC accepts calls, and where.
	Listening() (bool, string)
	// Status is the whole state (allowlist counts, call counters).
	Status() map[string]any
	// Functions maps the job names functions.run runs to their help.
	Functions() map[string]string
}

// StatusReporter is a background sender the API shows (agent/remotewrite).
type StatusReporter interface {
	Status() map[string]any
}

// Child states of FleetNode.State.
const (
	ChildLive         = "live"
	ChildStale        = "stale"
	ChildDisconnected = "disconnected"
)

// nodeFilterArgs are Netdata's names for a node filter: v2/v3 use
// scope_nodes and nodes, v1 clients send node.
var nodeFilterArgs = []string{"scope_nodes", "nodes", "node"}

// listingCommands answer for the whole fleet and are never handed to a
// child.
var listingCommands = map[string]bool{
	"nodes": true, "node_instances": true, "fleet": true, "stream_path": true, "tunnel": true,
}

// childHandler returns the handler of the child a request's node filter
// names. A filter naming this agent, "*" or nothing stays local; one that
// names an unknown node, or several, is an error the caller answers 404/400.
func (s *Server) childHandler(ctx *fasthttp.RequestCtx) (fasthttp.RequestHandler, error) {
	if s.o.Fleet == nil {
		return nil, nil
	}
	var name string
	for _, k := range nodeFilterArgs {
		if v, ok := arg(ctx, k); ok && v != "" {
			name = v
			break
		}
	}
	if name == "" || name == "*" {
		return nil, nil
	}
	p := string(ctx.Path())
	if i := strings.LastIndexByte(p, '/'); i >= 0 && listingCommands[p[i+1:]] {
		return nil, nil
	}
	if _, ok := s.o.Fleet.(FleetStores); ok && (p == "/api/v2/data" || p == "/api/v3/data") {
		return nil, nil // v2 data selects nodes itself (dataV2)
	}
	if strings.ContainsAny(name, ",|") {
		return nil, httpx.Errorf(fasthttp.StatusBadRequest, "node filter %q: this agent answers one node per query", name)
	}
	if s.isSelf(name) {
		return nil, nil
	}
	h, ok := s.o.Fleet.Handler(name)
	if !ok {
		return nil, httpx.Errorf(fasthttp.StatusNotFound, "node %q is not this agent nor one of its children", name)
	}
	return h, nil
}

func (s *Server) isSelf(name string) bool {
	h := &s.host
	return name == h.GUID || name == h.NodeID || name == h.Hostname || name == h.PublicKey
}

// childNode turns a child into a v2 node.
func childNode(c FleetNode, index int) *v2Node {
	state := stateReachable
	if c.State != ChildLive {
		state = "stale"
	}
	return &v2Node{
		MachineGUID: c.GUID, NodeID: c.NodeID, Hostname: c.Hostname, Index: index,
		Version: c.Version, State: state, Hops: 1, PublicKey: c.PublicKey,
		Labels:     map[string]string{"_os_name": c.OS, "_architecture": c.Arch},
		FirstEntry: c.FirstEntry, LastEntry: c.LastEntry,
		Child: &childState{State: c.State, Since: c.Since, ConnectedAt: c.ConnectedAt, LastSeen: c.LastSeen, Dropped: c.Dropped, Charts: c.Charts, Dimensions: c.Dimensions},
	}
}

// childState is the streaming state of a child in the listings.
type childState struct {
	State       string `json:"state"`
	Since       int64  `json:"since"`
	ConnectedAt int64  `json:"connected_at"`
	LastSeen    int64  `json:"last_seen"`
	Charts      int    `json:"charts"`
	Dimensions  int    `json:"dimensions"`
	Dropped     int64  `json:"dropped_points"`
}

func (s *Server) children() []FleetNode {
	if s.o.Fleet == nil {
		return nil
	}
	return s.o.Fleet.Children()
}

// RemoteHost is the identity of a child node whose data a parent serves,
// as the child reported it in its stream hello.
type RemoteHost struct {
	Hostname, GUID, NodeID, PublicKey, OS, Arch string
	// Version is the child's agent version ("v0.5.0"; "" when it sent
	// none: shown as "unknown").
	Version string
	// System is the child's machine; nil when it sent none (unknown).
	System *messages.StreamSystem
	// Settings are the child agent's options; nil when it sent none
	// (left out of the answers that show them).
	Settings *messages.StreamSettings
}

// keptByChild refuses, with status, a read of what (the process table,
// a log source) when this server answers for a child (Options.Remote):
// a child streams its metrics to its parent and nothing else, so what
// the parent could answer is its own machine's, or nothing.
func (s *Server) keptByChild(what string, status int) error {
	if s.o.Remote == nil {
		return nil
	}
	return httpx.Errorf(status, "the %s of node %q stays on that node: a child streams only its metrics to its parent; ask the agent on %s (its REST API or RPC)",
		what, s.host.Hostname, s.host.Hostname)
}

func (r *RemoteHost) hostInfo() hostInfo {
	hi := hostInfo{
		Hostname: r.Hostname, GUID: r.GUID, NodeID: r.NodeID, PublicKey: r.PublicKey,
		Version: r.Version, OSName: r.OS, OSID: r.OS, Arch: r.Arch, OSVersion: "unknown", OSVersionID: "unknown",
		KernelName: "unknown", Virt: "none", Container: "none", CPUFreq: "0", Timezone: "unknown", Zone: "unknown",
	}
	if hi.Version == "" {
		hi.Version = "unknown"
	}
	// The discovery key is derived from the public key, as the child
	// derives its own (identity.DiscoveryKey).
	if pub, err := hex.DecodeString(r.PublicKey); err == nil && len(pub) > 0 {
		sum := sha256.Sum256(pub)
		hi.DiscoveryKey = hex.EncodeToString(sum[:])
	}
	if y := r.System; y != nil {
		set := func(dst *string, v string) {
			if v != "" {
				*dst = v
			}
		}
		set(&hi.OSID, y.OSID)
		set(&hi.OSVersion, y.OSVersion)
		set(&hi.OSVersionID, y.OSVersion)
		set(&hi.KernelName, y.KernelName)
		set(&hi.KernelVersion, y.KernelVersion)
		set(&hi.Virt, y.Virt)
		set(&hi.Container, y.Container)
		set(&hi.CPUFreq, y.CPUFreq)
		set(&hi.Timezone, y.Timezone)
		hi.Cores, hi.RAMTotal, hi.DiskTotal = y.Cores, y.RAMTotal, y.DiskTotal
		if y.Zone != "" {
			hi.Zone, hi.ZoneOffset = y.Zone, y.ZoneOffset
		}
	}
	return hi
}

// peerState is the admin RPC's listening state for /, info and db; for
// a child, its own as it reported it.
func (s *Server) peerState() map[string]any {
	if r := s.o.Remote; r != nil {
		if r.Settings == nil {
			return map[string]any{"listening": nil, "note": notReported}
		}
		if r.Settings.PeerAddr == "" {
			return map[string]any{"listening": false}
		}
		return map[string]any{"listening": true, "address": r.Settings.PeerAddr, "protocol": "quic"}
	}
	if s.o.Peer == nil {
		return map[string]any{"listening": false}
	}
	on, addr := s.o.Peer.Listening()
	return map[string]any{"listening": on, "address": addr, "protocol": "quic"}
}

// NodeOf is the identity this host's agent shows (and streams to a
// parent), with its machine (System); Settings are the caller's to fill.
func NodeOf(id *identity.Identity) RemoteHost {
	hi := collectHostInfo(id)
	zone, off := time.Now().Zone()
	return RemoteHost{
		Hostname: hi.Hostname, GUID: hi.GUID, NodeID: hi.NodeID, PublicKey: hi.PublicKey, OS: hi.OSName, Arch: hi.Arch,
		Version: hi.Version,
		System: &messages.StreamSystem{
			OSID: hi.OSID, OSVersion: hi.OSVersion, KernelName: hi.KernelName, KernelVersion: hi.KernelVersion,
			Virt: hi.Virt, Container: hi.Container, Cores: hi.Cores, CPUFreq: hi.CPUFreq,
			RAMTotal: hi.RAMTotal, DiskTotal: hi.DiskTotal, Timezone: hi.Timezone, Zone: zone, ZoneOffset: off,
		},
	}
}

// remoteWriteState is settings' remote_write member.
func (s *Server) remoteWriteState() any {
	if s.o.RemoteWrite == nil {
		return map[string]any{"enabled": false}
	}
	st := s.o.RemoteWrite.Status()
	st["enabled"] = true
	return st
}

// notReported is the note of a member a child did not report: a child
// that sends no settings in its stream hello.
const notReported = "not reported by this child"

// isParent is whether the node answered for is a parent: this agent's
// AGENT_PARENT, or what a child reported of its own.
func (s *Server) isParent() bool {
	if r := s.o.Remote; r != nil {
		return r.Settings != nil && r.Settings.Parent
	}
	return s.o.Parent
}

// agentVersion is the version of the agent of the node answered for,
// without info's "v" ("0.5.0").
func (s *Server) agentVersion() string { return strings.TrimPrefix(s.host.Version, "v") }
