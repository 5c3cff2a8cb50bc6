package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"
)

// peerRow is one item of the invites diagnostics' peers.
type peerRow struct {
	ID          string   `json:"id"`
	State       string   `json:"state"`
	Direction   string   `json:"direction"`
	Path        string   `json:"path"` // absent: a direct session
	Addrs       []string `json:"addresses"`
	RemoteAddr  string   `json:"remoteAddr"`
	RTTMillis   float64  `json:"rttMs"`
	OpsSent     int64    `json:"opsSent"`
	OpsReceived int64    `json:"opsReceived"`
	ConnectedAt int64    `json:"connectedAt"`
	QUIC        *struct {
		PacketsSent uint64 `json:"packetsSent"`
		PacketsLost uint64 `json:"packetsLost"`
	} `json:"quic"`
}

func (e *env) peers() error {
	var diag struct {
		Peers []json.RawMessage `json:"peers"`
	}
	if err := e.c.getJSON("/api/diagnostics/invites", &diag); err != nil {
		return err
	}
	if diag.Peers == nil {
		diag.Peers = []json.RawMessage{}
	}
	if e.json {
		return e.printJSON(diag.Peers)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "PEER\tSTATE\tPATH\tDIRECTION\tRTT\tLOST\tADDRESS\tSINCE\tOPS SENT\tOPS RECEIVED")
	for _, r := range diag.Peers {
		var p peerRow
		_ = json.Unmarshal(r, &p)
		path := p.Path
		if path == "" {
			path = "-"
			if p.State == "connected" {
				path = "direct"
			}
		}
		rtt := "-"
		if p.RTTMillis > 0 {
			rtt = (time.Duration(p.RTTMillis * float64(time.Millisecond))).Round(10 * time.Microsecond).String()
		}
		// LOST: the share of the QUIC connection's packets it declared
		// lost since it started ("-" on TCP and relayed paths).
		lost := "-"
		if q := p.QUIC; q != nil && q.PacketsSent > 0 {
			lost = strconv.FormatFloat(100*float64(q.PacketsLost)/float64(q.PacketsSent), 'f', 2, 64) + "%"
		}
		addr := p.RemoteAddr
		if addr == "" && len(p.Addrs) > 0 {
			addr = p.Addrs[0]
		}
		since := "-"
		if p.ConnectedAt > 0 {
			since = time.Since(time.UnixMilli(p.ConnectedAt)).Round(time.Second).String()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", cell(p.ID), cell(p.State), cell(path), cell(dash(p.Direction)), rtt, lost, cell(dash(addr)), since, p.OpsSent, p.OpsReceived)
	}
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type tunnelCounters struct {
	State            string `json:"state"`
	URL              string `json:"url"`
	Address          string `json:"address"`
	Error            string `json:"error"`
	ConnectionsOpen  int64  `json:"connectionsOpen"`
	ConnectionsTotal int64  `json:"connectionsTotal"`
	BytesIn          int64  `json:"bytesIn"`
	BytesOut         int64  `json:"bytesOut"`
}

func (e *env) tunnels() error {
	var servers, clients []json.RawMessage
	if err := e.c.getJSON("/api/tunnel-servers", &servers); err != nil {
		return err
	}
	if err := e.c.getJSON("/api/tunnel-clients", &clients); err != nil {
		return err
	}
	if servers == nil {
		servers = []json.RawMessage{}
	}
	if clients == nil {
		clients = []json.RawMessage{}
	}
	if e.json {
		return e.printJSON(map[string]any{"servers": servers, "clients": clients})
	}
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tID\tSTATE\tNAME/DOMAIN\tPORT\tCONNS\tTOTAL\tBYTES IN\tBYTES OUT\tKEY/ADDRESS")
	for _, r := range servers {
		var t struct {
			ID   string `json:"id"`
			Opts struct {
				Name   string `json:"name"`
				Domain string `json:"domain"`
				Host   string `json:"host"`
				Port   int    `json:"port"`
				UDP    bool   `json:"udp"`
			} `json:"opts"`
			Info tunnelCounters `json:"info"`
		}
		_ = json.Unmarshal(r, &t)
		name := t.Opts.Name
		if t.Opts.Domain != "" {
			name += " (" + t.Opts.Domain + ")"
		}
		port := strconv.Itoa(t.Opts.Port)
		if t.Opts.UDP {
			port += "/udp"
		}
		fmt.Fprintf(w, "server\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", cell(t.ID), cell(t.Info.State), cell(dash(name)), port,
			t.Info.ConnectionsOpen, t.Info.ConnectionsTotal, t.Info.BytesIn, t.Info.BytesOut, cell(dash(t.Info.URL)))
	}
	for _, r := range clients {
		var t struct {
			ID   string `json:"id"`
			Opts struct {
				Domain   string `json:"domain"`
				Port     int    `json:"port"`
				Protocol string `json:"protocol"`
			} `json:"opts"`
			Info tunnelCounters `json:"info"`
		}
		_ = json.Unmarshal(r, &t)
		port := strconv.Itoa(t.Opts.Port)
		if t.Opts.Protocol == "udp" {
			port += "/udp"
		}
		state := t.Info.State
		if t.Info.Error != "" {
			state += ": " + t.Info.Error
		}
		fmt.Fprintf(w, "client\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", cell(t.ID), cell(state), cell(dash(t.Opts.Domain)), port,
			t.Info.ConnectionsOpen, t.Info.ConnectionsTotal, t.Info.BytesIn, t.Info.BytesOut, cell(dash(t.Info.Address)))
	}
	return w.Flush()
}
