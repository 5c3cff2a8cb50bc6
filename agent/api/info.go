package api

import (
	"hash/fnv"
	"runtime"
	"strconv"

	"github.com/valyala/fasthttp"

	"peerdns/agent/health"
	"peerdns/agent/logs"
	"peerdns/agent/store"
	"peerdns/http/httpx"
)

func (s *Server) alarmCounts() (normal, warning, critical int) {
	for _, a := range s.alerts() {
		switch a.Status {
		case health.StatusWarning:
			warning++
		case health.StatusCritical:
			critical++
		case health.StatusClear:
			normal++
		}
	}
	return
}

// dbKeys is the database section of /, info and /api/v3/db.
func (s *Server) dbKeys() map[string]any {
	st := s.stats()
	return map[string]any{
		"public_key":    s.host.PublicKey,
		"discovery_key": s.host.DiscoveryKey,
		"dir":           st.Dir,
		"collections":   s.collections(),
		"peer_rpc":      s.peerState(),
	}
}

func (s *Server) collections() []map[string]any {
	st := s.stats()
	out := []map[string]any{
		{"name": "tier0", "kind": "memory ring", "resolution_seconds": 1, "retention_seconds": int64(st.Tier0Retention.Seconds()),
			"charts": st.Charts, "dimensions": st.Dimensions, "bytes_per_dimension": st.Tier0BytesPerDim,
			"first_entry": st.FirstTime, "last_entry": st.LastTime},
		{"name": "tier1", "kind": "memory + append-only file", "resolution_seconds": 60, "retention_seconds": int64(st.Tier1Retention.Seconds()),
			"bytes_per_dimension": st.Tier1BytesPerDim, "disk_bytes": st.Tier1DiskBytes,
			"first_entry": st.Tier1First, "last_entry": st.Tier1Last},
	}
	if s.o.Health != nil {
		out = append(out, map[string]any{"name": "alert_transitions", "kind": "file", "entries": len(s.transitions(0))})
	}
	return out
}

func (s *Server) index(ctx *fasthttp.RequestCtx, _ int) error {
	return writeJSON(ctx, map[string]any{
		"service":         "peerdns agent",
		"version":         s.agentVersion(),
		"hostname":        s.host.Hostname,
		"peer_public_key": s.host.PublicKey,
		"db":              s.dbKeys(),
		"api": []string{
			"/api/v3/info", "/api/v3/db", "/api/v3/versions", "/api/v3/me", "/api/v3/settings",
			"/health", "/api/v3/contexts", "/api/v3/context?context=", "/api/v1/charts", "/api/v1/chart?chart=",
			"/api/v3/q?q=", "/api/v3/data?chart=", "/api/v3/allmetrics?format=prometheus", "/api/v3/badge.svg?chart=",
			"/api/v3/nodes", "/api/v3/node_instances", "/api/v3/fleet", "/api/v3/stream_path", "/api/v3/export",
			"/api/v3/tunnel", "/api/v3/alerts", "/api/v3/alert_transitions", "/api/v3/alert_config",
			"/api/v3/variable?chart=", "/api/v3/functions", "/api/v3/processes", "/api/v3/logs?source=audit",
			"/api/v3/ai/snapshot", "/api/v3/ai/charts?q=",
		},
	})
}

// info is Netdata's /api/v1/info layout, plus a "database" section with
// the agent's keys. The body is rebuilt at most once a second: it is the
// most polled endpoint after data and it only changes with alarm counts.
func (s *Server) info(ctx *fasthttp.RequestCtx, ver int) error {
	now := s.now().Unix()
	if c := s.infoBody[ver&3].Load(); c != nil && c.at == now {
		setBody(ctx, ctJSON, c.body)
		return nil
	}
	hi := &s.host
	normal, warning, critical := s.alarmCounts()
	var collectors []map[string]string
	seen := map[string]bool{}
	charts := s.o.DB.Charts()
	for _, c := range charts {
		k := c.Plugin + "\x00" + c.Module
		if !seen[k] {
			seen[k] = true
			collectors = append(collectors, map[string]string{"plugin": c.Plugin, "module": c.Module})
		}
	}
	dims := 0
	for _, c := range charts {
		dims += len(c.Dims)
	}
	labels := map[string]string{
		"_os_name": hi.OSName, "_os_version": hi.OSVersion, "_kernel_version": hi.KernelVersion,
		"_system_cores": strconv.Itoa(hi.Cores), "_system_cpu_freq": hi.CPUFreq,
		"_system_ram_total": strconv.FormatUint(hi.RAMTotal, 10), "_system_disk_space": strconv.FormatUint(hi.DiskTotal, 10),
		"_architecture": hi.Arch, "_virtualization": hi.Virt, "_container": hi.Container,
		"_is_ephemeral": "false", "_has_unstable_connection": "false", "_is_parent": strconv.FormatBool(s.isParent()),
		"_aclk_available": "false",
	}
	mirrored := []string{hi.Hostname}
	mirroredStatus := []mirroredHost{{GUID: hi.GUID, Hostname: hi.Hostname, Reachable: true}}
	for _, c := range s.children() {
		mirrored = append(mirrored, c.Hostname)
		mirroredStatus = append(mirroredStatus, mirroredHost{GUID: c.GUID, Hostname: c.Hostname, Reachable: c.State == ChildLive, Hops: 1})
	}
	v := infoV1{
		Version: hi.Version, UID: hi.GUID,
		// This agent (reachable: it is the one answering), then in
		// parent mode each child, reachable while it streams live.
		MirroredHosts: mirrored, MirroredHostsStatus: mirroredStatus,
		Alarms: alarmCount{normal, warning, critical},
		OSName: hi.OSName, OSID: hi.OSID, OSIDLike: "unknown", OSVersion: hi.OSVersion, OSVersionID: hi.OSVersionID, OSDetection: "gopsutil",
		CoresTotal: strconv.Itoa(hi.Cores), TotalDiskSpace: strconv.FormatUint(hi.DiskTotal, 10), CPUFreq: hi.CPUFreq,
		RAMTotal: strconv.FormatUint(hi.RAMTotal, 10), ContainerOSName: "none", ContainerOSID: "none", ContainerOSIDLike: "none",
		ContainerOSVersion: "none", ContainerOSVersionID: "none", ContainerOSDetection: "none", IsK8sNode: "false",
		KernelName: hi.KernelName, KernelVersion: hi.KernelVersion, Architecture: hi.Arch,
		Virtualization: hi.Virt, VirtDetection: "gopsutil", Container: hi.Container, ContainerDetection: "gopsutil",
		CloudProviderType: "unknown", CloudInstanceType: "unknown", CloudInstanceRegion: "unknown",
		HostLabels: labels, Functions: s.functionList(), Collectors: collectors,
		MemoryMode: "ram+tier1", MultidbDiskQuota: 0, PageCacheSize: 0,
		StreamEnabled: s.isParent(), HTTPSEnabled: false, Buildinfo: "peerdns|gopsutil|fasthttp", ReleaseChannel: "stable",
		WebEnabled: true, ChartsCount: len(charts), MetricsCount: dims,
		Database: s.dbKeys(), API: ver, CompatibleWith: CompatVersion,
	}
	b, err := encodeJSON(v)
	if err != nil {
		return &httpx.Error{Status: fasthttp.StatusInternalServerError, Msg: "encode info", Err: err}
	}
	s.infoBody[ver&3].Store(&cachedBody{at: now, body: b})
	setBody(ctx, ctJSON, b)
	return nil
}

type mirroredHost struct {
	GUID      string  `json:"guid"`
	Hostname  string  `json:"hostname"`
	Reachable bool    `json:"reachable"`
	Hops      int     `json:"hops"`
	ClaimID   *string `json:"claim_id"`
	NodeID    *string `json:"node_id"`
}

type alarmCount struct {
	Normal   int `json:"normal"`
	Warning  int `json:"warning"`
	Critical int `json:"critical"`
}

type infoV1 struct {
	Version              string              `json:"version"`
	UID                  string              `json:"uid"`
	MirroredHosts        []string            `json:"mirrored_hosts"`
	MirroredHostsStatus  []mirroredHost      `json:"mirrored_hosts_status"`
	Alarms               alarmCount          `json:"alarms"`
	OSName               string              `json:"os_name"`
	OSID                 string              `json:"os_id"`
	OSIDLike             string              `json:"os_id_like"`
	OSVersion            string              `json:"os_version"`
	OSVersionID          string              `json:"os_version_id"`
	OSDetection          string              `json:"os_detection"`
	CoresTotal           string              `json:"cores_total"`
	TotalDiskSpace       string              `json:"total_disk_space"`
	CPUFreq              string              `json:"cpu_freq"`
	RAMTotal             string              `json:"ram_total"`
	ContainerOSName      string              `json:"container_os_name"`
	ContainerOSID        string              `json:"container_os_id"`
	ContainerOSIDLike    string              `json:"container_os_id_like"`
	ContainerOSVersion   string              `json:"container_os_version"`
	ContainerOSVersionID string              `json:"container_os_version_id"`
	ContainerOSDetection string              `json:"container_os_detection"`
	IsK8sNode            string              `json:"is_k8s_node"`
	KernelName           string              `json:"kernel_name"`
	KernelVersion        string              `json:"kernel_version"`
	Architecture         string              `json:"architecture"`
	Virtualization       string              `json:"virtualization"`
	VirtDetection        string              `json:"virt_detection"`
	Container            string              `json:"container"`
	ContainerDetection   string              `json:"container_detection"`
	CloudProviderType    string              `json:"cloud_provider_type"`
	CloudInstanceType    string              `json:"cloud_instance_type"`
	CloudInstanceRegion  string              `json:"cloud_instance_region"`
	HostLabels           map[string]string   `json:"host_labels"`
	Functions            map[string]function `json:"functions"`
	Collectors           []map[string]string `json:"collectors"`
	CloudEnabled         bool                `json:"cloud-enabled"`
	CloudAvailable       bool                `json:"cloud-available"`
	AgentClaimed         bool                `json:"agent-claimed"`
	ACLKAvailable        bool                `json:"aclk-available"`
	MemoryMode           string              `json:"memory-mode"`
	MultidbDiskQuota     int                 `json:"multidb-disk-quota"`
	PageCacheSize        int                 `json:"page-cache-size"`
	StreamEnabled        bool                `json:"stream-enabled"`
	StreamCompression    *bool               `json:"stream-compression"`
	HostsAvailable       *int                `json:"hosts-available"`
	HTTPSEnabled         bool                `json:"https-enabled"`
	Buildinfo            string              `json:"buildinfo"`
	ReleaseChannel       string              `json:"release-channel"`
	WebEnabled           bool                `json:"web-enabled"`
	NotificationMethods  *string             `json:"notification-methods"`
	ExportingEnabled     *bool               `json:"exporting-enabled"`
	ExportingConnectors  *string             `json:"exporting-connectors"`
	PromUsed             *bool               `json:"allmetrics-prometheus-used"`
	ShellUsed            *bool               `json:"allmetrics-shell-used"`
	JSONUsed             *bool               `json:"allmetrics-json-used"`
	DashboardUsed        *bool               `json:"dashboard-used"`
	ChartsCount          int                 `json:"charts-count"`
	MetricsCount         int                 `json:"metrics-count"`
	// Additions of this agent.
	Database       map[string]any `json:"database"`
	API            int            `json:"api"`
	CompatibleWith string         `json:"compatible_with"`
}

type function struct {
	Help    string `json:"help"`
	Timeout int    `json:"timeout"`
	Options string `json:"options"`
}

// functionList is what info and functions list: the job names the admin
// RPC runs (functions.run over the peer transport; nothing runs over
// HTTP). Without the RPC nothing can run them, so none is listed.
func (s *Server) functionList() map[string]function {
	out := map[string]function{}
	if s.o.Peer == nil {
		return out
	}
	for name, help := range s.o.Peer.Functions() {
		out[name] = function{Help: help, Timeout: 30, Options: "peer-rpc"}
	}
	return out
}

func (s *Server) functions(ctx *fasthttp.RequestCtx, _ int) error {
	return writeJSON(ctx, map[string]any{"functions": s.functionList()})
}

func (s *Server) dbInfo(ctx *fasthttp.RequestCtx, _ int) error {
	return writeJSON(ctx, s.dbKeys())
}

// versions reports the agent's versions and Netdata's change hashes. A
// hard hash changes when the set or definition of things changes, a soft
// hash when their data does; a client re-reads a list only when its hash
// moved. Netdata's routing_hard_hash is left out: this agent routes
// nothing.
func (s *Server) versions(ctx *fasthttp.RequestCtx, _ int) error {
	charts := s.o.DB.Charts()
	var alertsSoft int64
	alerts := s.alerts()
	for _, a := range alerts {
		alertsSoft = max(alertsSoft, a.LastUpdated)
	}
	agent := map[string]any{"name": "peerdns agent", "version": s.agentVersion(), "go": runtime.Version()}
	if s.o.Remote != nil {
		delete(agent, "go") // a child does not report its build
	}
	return writeJSON(ctx, map[string]any{
		"agent":    agent,
		"protocol": 1,
		"api":      3,
		"netdata":  CompatVersion,
		"versions": map[string]any{
			"contexts_hard_hash": chartsHash(charts),
			"contexts_soft_hash": s.stats().LastTime,
			"alerts_hard_hash":   s.latestUniqueID(),
			"alerts_soft_hash":   alertsSoft,
			"nodes_hard_hash":    nodesHash(s.nodeList()),
		},
	})
}

// jsSafe keeps a hash within 53 bits: dashboards read these numbers in
// JavaScript, where larger integers lose their low bits and two
// different hashes could compare equal.
const jsSafe = 1<<53 - 1

// chartsHash is FNV-1a over every chart's id, context, units and
// dimension ids: it changes when charts come, go or are redefined.
func chartsHash(charts []*store.ChartDef) uint64 {
	h := fnv.New64a()
	for _, c := range charts {
		for _, f := range []string{c.ID, c.Context, c.Units} {
			h.Write([]byte(f))
			h.Write([]byte{0})
		}
		for _, d := range c.Dims {
			h.Write([]byte(d.ID))
			h.Write([]byte{1})
		}
	}
	return h.Sum64() & jsSafe
}

// nodesHash is FNV-1a over the machine GUIDs of the listed nodes.
func nodesHash(nodes []*v2Node) uint64 {
	h := fnv.New64a()
	for _, n := range nodes {
		h.Write([]byte(n.MachineGUID))
		h.Write([]byte{0})
	}
	return h.Sum64() & jsSafe
}

func (s *Server) me(ctx *fasthttp.RequestCtx, _ int) error {
	return writeJSON(ctx, map[string]any{
		"auth":              []string{"none"},
		"anonymous":         true,
		"user_role":         "viewer",
		"access":            []string{"see-metrics", "see-alerts", "export"},
		"can_see_all_nodes": true,
		"note":              "The local REST API is anonymous and read-only (export?write=1 aside); there is no authenticated or role-based access yet.",
	})
}

func (s *Server) settings(ctx *fasthttp.RequestCtx, _ int) error {
	return s.settingsWith(ctx, nil)
}

// settingsWith writes the agent's settings with the members of extra
// added (v3's version).
func (s *Server) settingsWith(ctx *fasthttp.RequestCtx, extra map[string]any) error {
	st := s.stats()
	out := map[string]any{
		"update_every": 1,
		"retention": map[string]any{
			"tier0": map[string]any{"resolution_seconds": 1, "seconds": int64(st.Tier0Retention.Seconds()), "first_entry": st.FirstTime, "last_entry": st.LastTime},
			"tier1": map[string]any{"resolution_seconds": 60, "seconds": int64(st.Tier1Retention.Seconds()), "first_entry": st.Tier1First, "last_entry": st.Tier1Last},
			"note":  "retention is changed over the peer-to-peer admin RPC, not over HTTP",
		},
		"storage": map[string]any{
			"dir":   st.Dir,
			"store": "tier 0: float32 rings in memory; tier 1: per-minute min/max/sum/count in memory and an append-only file",
			"memory_rings": map[string]any{
				"charts": st.Charts, "dimensions": st.Dimensions, "bytes": st.MemoryBytes,
				"tier0_bytes_per_dimension": st.Tier0BytesPerDim, "tier1_bytes_per_dimension": st.Tier1BytesPerDim,
			},
			"tier1_disk_bytes": st.Tier1DiskBytes,
		},
		"rest":         map[string]any{"cors": s.o.CORS},
		"parent":       s.o.Parent,
		"export_dir":   s.o.ExportDir,
		"journal":      s.o.Journal,
		"remote_write": s.remoteWriteState(),
		"logs": map[string]any{
			"journal": s.o.Journal, "audit_file": s.o.Audit.Path(), "anomaly_detector": s.o.Anomaly != nil,
			"limit_default": logs.DefaultLimit, "limit_max": logs.MaxLimit,
		},
	}
	if s.o.Remote != nil {
		s.remoteSettings(out)
	}
	for k, v := range extra {
		out[k] = v
	}
	return writeJSON(ctx, out)
}

// remoteSettings replaces, in out, this server's options with those the
// child reported in its stream hello: a parent answering for a child
// shows the child's agent, never its own options or its own defaults.
// retention and storage stay: they describe the copy of the child's data
// this parent holds (what queries through it can read), with the
// child's own retention beside it (on_node_seconds). Without a report
// the members are null, with a note.
func (s *Server) remoteSettings(out map[string]any) {
	st := s.o.Remote.Settings
	out["storage"].(map[string]any)["held_by"] = "parent"
	if st == nil {
		for _, k := range []string{"rest", "parent", "export_dir", "journal", "remote_write", "logs"} {
			out[k] = nil
		}
		out["note"] = notReported
		return
	}
	ret := out["retention"].(map[string]any)
	ret["tier0"].(map[string]any)["on_node_seconds"] = st.Tier0Seconds
	ret["tier1"].(map[string]any)["on_node_seconds"] = st.Tier1Seconds
	out["rest"] = map[string]any{"cors": st.CORS}
	out["parent"] = st.Parent
	out["export_dir"] = st.ExportDir
	out["journal"] = st.Journal
	out["remote_write"] = map[string]any{"enabled": st.RemoteWrite}
	out["logs"] = map[string]any{"journal": st.Journal, "anomaly_detector": st.AnomalyDetector}
}

// health is the aggregate health: 200 while collecting (status ok,
// warning or critical from the alerts), 503 "stale" when nothing was
// collected for staleAfter seconds (a probe should then restart the
// agent). A just-started agent gets the same grace before it is stale.
func (s *Server) health(ctx *fasthttp.RequestCtx, _ int) error {
	normal, warning, critical := s.alarmCounts()
	st := s.stats()
	now := s.now().Unix()
	status := "ok"
	switch {
	case critical > 0:
		status = "critical"
	case warning > 0:
		status = "warning"
	}
	collecting := collectingAt(st.LastTime, now)
	code := fasthttp.StatusOK
	if !collecting && now-s.started.Unix() > staleAfter {
		status = "stale"
		code = fasthttp.StatusServiceUnavailable
	}
	if err := writeJSON(ctx, map[string]any{
		"status":         status,
		"collecting":     collecting,
		"last_collected": st.LastTime,
		"charts":         st.Charts,
		"dimensions":     st.Dimensions,
		"alarms":         alarmCount{normal, warning, critical},
		"uptime_seconds": now - s.started.Unix(),
	}); err != nil {
		return err
	}
	ctx.SetStatusCode(code)
	return nil
}

// staleAfter is how many seconds after its newest point a chart, or the
// whole agent, still counts as collecting: ten missed one-second
// collections. health, contexts and the node listings share it, so they
// never disagree about the same moment.
const staleAfter = 10

// collectingAt reports whether something whose newest point is at last
// (unix seconds, 0 for never) is still being collected at now.
func collectingAt(last, now int64) bool { return last > 0 && now-last <= staleAfter }
