package api

import (
	"os"
	"time"

	"github.com/valyala/fasthttp"
)

// v2Node is a node in Netdata's v2 layout (nodes, contexts, fleet).
type v2Node struct {
	MachineGUID string            `json:"mg"`
	NodeID      string            `json:"nd"`
	Hostname    string            `json:"nm"`
	Index       int               `json:"ni"`
	Version     string            `json:"v"`
	State       string            `json:"state"`
	Hops        int               `json:"hops"`
	IsParent    bool              `json:"is_parent"`
	PublicKey   string            `json:"public_key"`
	Labels      map[string]string `json:"labels"`
	FirstEntry  int64             `json:"first_entry"`
	LastEntry   int64             `json:"last_entry"`
	Instances   []v2Instance      `json:"instances,omitempty"` // node_instances only
	// Child is the streaming state of a child of this parent (nil for
	// the agent itself).
	Child *childState `json:"child,omitempty"`
	// Netdata's v2 node information (nodes-info): hardware, OS, health
	// and capabilities; set for the agent itself.
	HW           map[string]any `json:"hw,omitempty"`
	OS           map[string]any `json:"os,omitempty"`
	Health       map[string]any `json:"health,omitempty"`
	Capabilities []capability   `json:"capabilities,omitempty"`
}

// capability is one entry of Netdata's capabilities list.
type capability struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	Enabled bool   `json:"enabled"`
}

// v2Instance is one agent instance that holds a node's data.
type v2Instance struct {
	Index      int    `json:"ni"`
	Hostname   string `json:"hostname"`
	GUID       string `json:"mg"`
	Collecting bool   `json:"collecting"`
	// LastCollected is the newest collected second (0: nothing yet), so a
	// reader sees why collecting is false.
	LastCollected int64 `json:"last_collected"`
	Charts        int   `json:"charts"`
}

// stateReachable is Netdata's state of a node that answers: this agent
// (it is the one answering) and live children. Netdata says "stale" for a
// child whose stream is gone or silent; the child's own state (live,
// stale, disconnected since) is in its "child" object. Whether the agent
// still collects is a separate fact: the instance's collecting.
const stateReachable = "reachable"

// localNode is this agent as a v2 node.
func (s *Server) localNode() *v2Node {
	st := s.stats()
	return &v2Node{
		MachineGUID: s.host.GUID, NodeID: s.host.NodeID, Hostname: s.host.Hostname, Index: 0,
		Version: s.host.Version, State: stateReachable, Hops: 0, IsParent: s.isParent(),
		PublicKey:  s.host.PublicKey,
		Labels:     map[string]string{"_os_name": s.host.OSName, "_architecture": s.host.Arch},
		FirstEntry: st.FirstTime, LastEntry: st.LastTime,
		HW: map[string]any{
			"architecture": s.host.Arch, "cpu_frequency": s.host.CPUFreq, "cpus": s.host.Cores,
			"memory": s.host.RAMTotal, "disk_space": s.host.DiskTotal, "virtualization": s.host.Virt, "container": s.host.Container,
		},
		OS: map[string]any{
			"id": s.host.OSID, "nm": s.host.OSName, "v": s.host.OSVersion,
			"kernel": map[string]any{"nm": s.host.KernelName, "v": s.host.KernelVersion},
		},
		Health:       s.nodeHealth(),
		Capabilities: s.capabilities(),
	}
}

// nodeHealth is Netdata's node health: running with the alert counts, or
// disabled without an alert engine.
func (s *Server) nodeHealth() map[string]any {
	if s.o.Health == nil {
		return map[string]any{"status": "disabled"}
	}
	c := map[string]int{"critical": 0, "warning": 0, "clear": 0, "undefined": 0, "uninitialized": 0}
	for _, a := range s.alerts() {
		switch a.Status {
		case "CRITICAL":
			c["critical"]++
		case "WARNING":
			c["warning"]++
		case "CLEAR":
			c["clear"]++
		case "UNINITIALIZED":
			c["uninitialized"]++
		default:
			c["undefined"]++
		}
	}
	return map[string]any{"status": "running", "alerts": c}
}

// capabilities lists what this agent serves, in Netdata's names; for a
// child, its anomaly detector and functions are the child's own (health
// is the parent's: it evaluates the child's alerts itself).
func (s *Server) capabilities() []capability {
	ml, funcs := s.o.ML != nil, s.o.Peer != nil
	if r := s.o.Remote; r != nil {
		ml = r.Settings != nil && r.Settings.AnomalyDetector
		funcs = r.Settings != nil && r.Settings.PeerAddr != ""
	}
	return []capability{
		{"ml", 1, ml},
		{"health", 1, s.o.Health != nil},
		{"funcs", 1, funcs},
		{"ctx", 1, true},
		{"dataweb", 1, true},
	}
}

// nodeList is every node the agent can answer for: itself, then in parent
// mode every child that streamed to it.
func (s *Server) nodeList() []*v2Node {
	out := []*v2Node{s.localNode()}
	for i, c := range s.children() {
		out = append(out, childNode(c, i+1))
	}
	return out
}

func (s *Server) nodes(ctx *fasthttp.RequestCtx, ver int) error {
	received := time.Now()
	out := map[string]any{"nodes": s.nodeList(), "parent": s.isParent()}
	if ver >= 2 {
		out["api"] = 2
		out["timings"] = cloudTimings(received)
	}
	return writeJSON(ctx, out)
}

func (s *Server) nodeInstances(ctx *fasthttp.RequestCtx, _ int) error {
	n := s.localNode()
	last := s.stats().LastTime
	n.Instances = []v2Instance{{
		Index: 0, Hostname: s.host.Hostname, GUID: s.host.GUID,
		Collecting: collectingAt(last, s.now().Unix()), LastCollected: last,
		Charts: len(s.o.DB.Charts()),
	}}
	nodes := []*v2Node{n}
	for i, c := range s.children() {
		cn := childNode(c, i+1)
		cn.Instances = []v2Instance{{
			Index: i + 1, Hostname: c.Hostname, GUID: c.GUID,
			Collecting: c.State == ChildLive, LastCollected: c.LastEntry, Charts: c.Charts,
		}}
		nodes = append(nodes, cn)
	}
	return writeJSON(ctx, map[string]any{"nodes": nodes})
}

// fleet lists this node and, in parent mode, its children with their
// streaming state.
func (s *Server) fleet(ctx *fasthttp.RequestCtx, _ int) error {
	nodes := s.nodeList()
	children := make([]*v2Node, 0, len(nodes)-1)
	count := map[string]int{ChildLive: 0, ChildStale: 0, ChildDisconnected: 0}
	for _, n := range nodes[1:] {
		children = append(children, n)
		count[n.Child.State]++
	}
	return writeJSON(ctx, map[string]any{
		"parent":   s.isParent(),
		"nodes":    nodes,
		"children": children,
		"states":   count,
		"total":    len(nodes),
	})
}

// streamPath is Netdata's streaming path: this agent at hops 0 and, in
// parent mode, each child at hops 1 (its path to this parent).
func (s *Server) streamPath(ctx *fasthttp.RequestCtx, _ int) error {
	st := s.stats()
	path := []any{map[string]any{
		"hostname": s.host.Hostname, "host_id": s.host.GUID, "node_id": s.host.NodeID, "claim_id": nil,
		"hops": 0, "since": s.started.Unix(), "first_time_t": st.FirstTime, "start_time": s.started.UnixMilli(),
		"shutdown_time": 0, "flags": []string{"collect"}, "capabilities": []string{},
	}}
	for _, c := range s.children() {
		flags := []string{"stream"}
		shutdown := int64(0)
		if c.State == ChildDisconnected {
			flags = []string{"disconnected"}
			shutdown = c.Since * 1000
		}
		path = append(path, map[string]any{
			"hostname": c.Hostname, "host_id": c.GUID, "node_id": c.NodeID, "claim_id": nil,
			"hops": 1, "since": c.ConnectedAt, "first_time_t": c.FirstEntry, "start_time": c.ConnectedAt * 1000,
			"shutdown_time": shutdown, "flags": flags, "capabilities": []string{"peerdns-stream"}, "state": c.State,
		})
	}
	return writeJSON(ctx, map[string]any{"streaming_path": path})
}

// tunnel is the state of the REST tunnel: the admin RPC over the peer
// transport, through which allowed peers call this API (api.get) and the
// admin methods.
func (s *Server) tunnel(ctx *fasthttp.RequestCtx, _ int) error {
	out := map[string]any{
		"status":        "disabled",
		"enabled":       false,
		"public_key":    s.host.PublicKey,
		"discovery_key": s.host.DiscoveryKey,
		"pid":           os.Getpid(),
	}
	if r := s.o.Remote; r != nil {
		// The child's tunnel, as it reported it: its process and RPC
		// counters stay on the child.
		delete(out, "pid")
		switch {
		case r.Settings == nil:
			out["status"], out["enabled"], out["note"] = "unknown", nil, notReported
		case r.Settings.PeerAddr != "":
			out["status"], out["enabled"] = "listening", true
			out["rpc"] = map[string]any{"listening": true, "address": r.Settings.PeerAddr, "protocol": "quic peerdns/1"}
		}
		return writeJSON(ctx, out)
	}
	if s.o.Peer != nil {
		st := s.o.Peer.Status()
		out["enabled"] = true
		out["status"] = "listening"
		if l, _ := st["listening"].(bool); !l {
			out["status"] = "closed"
		}
		out["rpc"] = st
	}
	return writeJSON(ctx, out)
}
