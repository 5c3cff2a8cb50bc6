package rpc

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	psnet "github.com/shirou/gopsutil/v3/net"
)

// Functions are the jobs functions.run can run, by name; /api/v3/functions
// lists these names. Each returns a JSON-encodable table.
var Functions = map[string]struct {
	Help string
	Run  func(ctx context.Context, args map[string]string) (any, error)
}{
	// processes is answered by the REST API's process table (Server.dispatch).
	"processes":           {"the live process table, as /api/v3/processes answers it (sort, order, filter, q, limit, offset, pid)", nil},
	"network-connections": {"open TCP and UDP sockets: protocol, local, remote, state, pid (kind=inet|tcp|udp|inet4|inet6, limit)", runConnections},
}

// FunctionNames returns the names of Functions, sorted.
func FunctionNames() []string {
	out := make([]string, 0, len(Functions))
	for k := range Functions {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// FunctionHelp returns the help line of a function.
func FunctionHelp(name string) string { return Functions[name].Help }

func limitArg(args map[string]string, def, max int) (int, error) {
	v, ok := args["limit"]
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, fmt.Errorf("limit %q: want 1 to %d", v, max)
	}
	return n, nil
}

// connRow is one socket of network-connections.
type connRow struct {
	Proto  string `json:"protocol"`
	Local  string `json:"local"`
	Remote string `json:"remote"`
	State  string `json:"state"`
	PID    int32  `json:"pid"`
}

func runConnections(ctx context.Context, args map[string]string) (any, error) {
	limit, err := limitArg(args, 500, 20000)
	if err != nil {
		return nil, err
	}
	kind := args["kind"]
	switch kind {
	case "":
		kind = "inet"
	case "inet", "inet4", "inet6", "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return nil, fmt.Errorf("kind %q: want inet, inet4, inet6, tcp, tcp4, tcp6, udp, udp4 or udp6", kind)
	}
	conns, err := psnet.ConnectionsWithContext(ctx, kind)
	if err != nil {
		return nil, err
	}
	rows := make([]connRow, 0, len(conns))
	for _, c := range conns {
		proto := "tcp"
		if c.Type == 2 { // SOCK_DGRAM
			proto = "udp"
		}
		if c.Family == 10 { // AF_INET6
			proto += "6"
		}
		rows = append(rows, connRow{
			Proto: proto, State: c.Status, PID: c.Pid,
			Local:  fmt.Sprintf("%s:%d", c.Laddr.IP, c.Laddr.Port),
			Remote: fmt.Sprintf("%s:%d", c.Raddr.IP, c.Raddr.Port),
		})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Proto != rows[j].Proto {
			return rows[i].Proto < rows[j].Proto
		}
		return rows[i].Local < rows[j].Local
	})
	total := len(rows)
	if len(rows) > limit {
		rows = rows[:limit]
	}
	return map[string]any{"function": "network-connections", "total": total, "rows": rows, "at": time.Now().Unix()}, nil
}
