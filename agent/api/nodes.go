package api

import (
	"os"

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

// stateReachable is Netdata's state of a node that answers. Netdata says
// "stale" for a child whose stream is gone; this agent lists only itself,
// and it is reachable because it is the one answering the request. Whether
// it still collects is a separate fact: the instance's collecting.
const stateReachable = "reachable"

// localNode is this agent as a v2 node.
func (s *Server) localNode() *v2Node {
	st := s.stats()
	return &v2Node{
		MachineGUID: s.host.GUID, NodeID: s.host.NodeID, Hostname: s.host.Hostname, Index: 0,
		Version: "v" + Version, State: stateReachable, Hops: 0, IsParent: s.o.Parent,
		PublicKey:  s.host.PublicKey,
		Labels:     map[string]string{"_os_name": s.host.OSName, "_architecture": s.host.Arch},
		FirstEntry: st.FirstTime, LastEntry: st.LastTime,
	}
}

// nodeList is every node the agent can answer for: itself. In parent mode
// children would join once they stream to it, which does not exist yet.
func (s *Server) nodeList() []*v2Node { return []*v2Node{s.localNode()} }

func (s *Server) nodes(ctx *fasthttp.RequestCtx, _ int) error {
	return writeJSON(ctx, map[string]any{"nodes": s.nodeList(), "parent": s.o.Parent})
}

func (s *Server) nodeInstances(ctx *fasthttp.RequestCtx, _ int) error {
	n := s.localNode()
	last := s.stats().LastTime
	n.Instances = []v2Instance{{
		Index: 0, Hostname: s.host.Hostname, GUID: s.host.GUID,
		Collecting: collectingAt(last, s.now().Unix()), LastCollected: last,
		Charts: len(s.o.DB.Charts()),
	}}
	return writeJSON(ctx, map[string]any{"nodes": []*v2Node{n}})
}

// fleet lists this node and, in parent mode, its children. This agent
// does not stream, so a parent has no children to list yet.
func (s *Server) fleet(ctx *fasthttp.RequestCtx, _ int) error {
	nodes := s.nodeList()
	return writeJSON(ctx, map[string]any{
		"parent":   s.o.Parent,
		"nodes":    nodes,
		"children": []any{},
		"total":    len(nodes),
	})
}

func (s *Server) streamPath(ctx *fasthttp.RequestCtx, _ int) error {
	st := s.stats()
	return writeJSON(ctx, map[string]any{"streaming_path": []any{map[string]any{
		"hostname": s.host.Hostname, "host_id": s.host.GUID, "node_id": s.host.NodeID, "claim_id": nil,
		"hops": 0, "since": s.started.Unix(), "first_time_t": st.FirstTime, "start_time": s.started.UnixMilli(),
		"shutdown_time": 0, "flags": []string{"collect"}, "capabilities": []string{},
	}}})
}

func (s *Server) tunnel(ctx *fasthttp.RequestCtx, _ int) error {
	return writeJSON(ctx, map[string]any{
		"status":        "local",
		"enabled":       false,
		"public_key":    s.host.PublicKey,
		"discovery_key": s.host.DiscoveryKey,
		"note":          "no peer-to-peer access yet: the agent's admin RPC over the peer transport is not built; this key is the identity it will use",
		"pid":           os.Getpid(),
	})
}
