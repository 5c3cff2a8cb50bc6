package rpc

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	psnet "github.com/shirou/gopsutil/v3/net"
	"github.com/shirou/gopsutil/v3/process"
)

// Functions are the jobs functions.run can run, by name; /api/v3/functions
// lists these names. Each returns a JSON-encodable table.
var Functions = map[string]struct {
	Help string
	Run  func(ctx context.Context, args map[string]string) (any, error)
}{
	"processes":           {"the live process table: pid, ppid, user, name, cmdline, cpu %, rss, threads (sort=cpu|rss|pid, limit)", runProcesses},
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

type procRow struct {
	PID     int32   `json:"pid"`
	PPID    int32   `json:"ppid"`
	User    string  `json:"user"`
	Name    string  `json:"name"`
	Cmdline string  `json:"cmdline"`
	CPU     float64 `json:"cpu_percent"`
	RSS     uint64  `json:"rss_bytes"`
	Threads int32   `json:"threads"`
}

// runProcesses reads the process table with gopsutil. cpu_percent is the
// average since the process started (gopsutil's Percent(0) without a
// previous sample), the same figure `ps` shows.
func runProcesses(ctx context.Context, args map[string]string) (any, error) {
	limit, err := limitArg(args, 200, 5000)
	if err != nil {
		return nil, err
	}
	sortBy := args["sort"]
	switch sortBy {
	case "", "cpu", "rss", "pid":
	default:
		return nil, fmt.Errorf("sort %q: want cpu, rss or pid", sortBy)
	}
	procs, err := process.ProcessesWithContext(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]procRow, 0, len(procs))
	for _, p := range procs {
		r := procRow{PID: p.Pid}
		r.PPID, _ = p.PpidWithContext(ctx)
		r.User, _ = p.UsernameWithContext(ctx)
		r.Name, _ = p.NameWithContext(ctx)
		r.Cmdline, _ = p.CmdlineWithContext(ctx)
		r.CPU, _ = p.CPUPercentWithContext(ctx)
		if mi, err := p.MemoryInfoWithContext(ctx); err == nil && mi != nil {
			r.RSS = mi.RSS
		}
		r.Threads, _ = p.NumThreadsWithContext(ctx)
		if r.Name == "" {
			continue // exited while we read it
		}
		rows = append(rows, r)
	}
	switch sortBy {
	case "", "cpu":
		sort.Slice(rows, func(i, j int) bool { return rows[i].CPU > rows[j].CPU })
	case "rss":
		sort.Slice(rows, func(i, j int) bool { return rows[i].RSS > rows[j].RSS })
	case "pid":
		sort.Slice(rows, func(i, j int) bool { return rows[i].PID < rows[j].PID })
	}
	total := len(rows)
	if len(rows) > limit {
		rows = rows[:limit]
	}
	return map[string]any{"function": "processes", "total": total, "rows": rows, "at": time.Now().Unix()}, nil
}

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
