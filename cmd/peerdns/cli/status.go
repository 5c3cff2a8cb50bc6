package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// statusOut is `status --json`: the admin API's status and health, and
// the node's identity from the invites diagnostics (absent while the
// node initialises).
type statusOut struct {
	Status map[string]any  `json:"status"`
	Health map[string]any  `json:"health"`
	Node   json.RawMessage `json:"node,omitempty"`
}

func (e *env) status() error {
	var out statusOut
	// Valid JSON is not yet the node's status: null, or an object
	// without isMaster, comes from something else and is an exit 1, not
	// a table of "<nil>".
	sb, err := e.c.getRaw("/api/status")
	if err != nil {
		return err
	}
	if json.Unmarshal(sb, &out.Status) != nil {
		out.Status = nil
	}
	if _, ok := out.Status["isMaster"].(bool); !ok {
		return fail(ExitNoNode, "%s answered /api/status with something that is not its status: %s", e.c.addr, Message(sb))
	}
	// Health answers 503 with the same body when degraded: still an answer.
	st, b, err := e.c.do("GET", "/api/health?probe=readiness", nil)
	if err != nil {
		return err
	}
	if st != http.StatusOK && st != http.StatusServiceUnavailable {
		return refused(st, b)
	}
	if err := json.Unmarshal(b, &out.Health); err != nil {
		return fail(ExitNoNode, "%s answered /api/health with something that is not its JSON: %v", e.c.addr, err)
	}
	if _, ok := out.Health["status"].(string); !ok {
		return fail(ExitNoNode, "%s answered /api/health with something that is not its health: %s", e.c.addr, Message(b))
	}
	var diag struct {
		Summary json.RawMessage `json:"summary"`
	}
	if e.c.getJSON("/api/diagnostics/invites", &diag) == nil {
		out.Node = diag.Summary
	}
	if e.json {
		return e.printJSON(out)
	}
	var node struct {
		PeerID     string `json:"peerId"`
		Network    string `json:"networkKey"`
		ListenAddr string `json:"listenAddr"`
		Joining    bool   `json:"joining"`
	}
	if len(out.Node) > 0 {
		_ = json.Unmarshal(out.Node, &node)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	kv := func(k string, v any) { fmt.Fprintf(w, "%s\t%s\n", k, cell(v)) }
	if node.PeerID != "" {
		kv("node", node.PeerID)
		kv("network", node.Network)
		kv("p2p address", node.ListenAddr)
	}
	role := "joiner"
	if b, _ := out.Status["isMaster"].(bool); b {
		role = "master"
	}
	if node.Joining {
		role = "joining"
	}
	kv("role", role)
	kv("health", out.Health["status"])
	if up, ok := out.Health["uptime"].(float64); ok {
		kv("uptime", (time.Duration(up) * time.Second).String())
	}
	if svc, ok := out.Health["services"].(map[string]any); ok {
		names := make([]string, 0, len(svc))
		for k := range svc {
			names = append(names, k)
		}
		sort.Strings(names)
		var parts []string
		for _, k := range names {
			state := "unhealthy"
			if m, ok := svc[k].(map[string]any); ok && m["healthy"] == true {
				state = "healthy"
			}
			parts = append(parts, k+" "+state)
		}
		kv("services", strings.Join(parts, ", "))
	}
	kv("peers connected", out.Status["peersCount"])
	return w.Flush()
}
