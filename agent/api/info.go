package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/shirou/gopsutil/v3/cpu"
	"github.com/shirou/gopsutil/v3/disk"
	"github.com/shirou/gopsutil/v3/host"
	"github.com/shirou/gopsutil/v3/mem"
	"github.com/valyala/fasthttp"

	"peerdns/agent/health"
	"peerdns/http/httpx"
	"peerdns/internal/identity"
)

// hostInfo is read once at start: it describes the machine, not the moment.
type hostInfo struct {
	Hostname      string
	GUID          string // machine_guid: a UUID derived from the agent's public key
	NodeID        string
	PublicKey     string
	DiscoveryKey  string
	OSName        string
	OSID          string
	OSVersion     string
	OSVersionID   string
	KernelName    string
	KernelVersion string
	Arch          string
	Virt          string
	Container     string
	Cores         int
	CPUFreq       string
	RAMTotal      uint64
	DiskTotal     uint64
	BootTime      uint64
}

func uuidFrom(b []byte) string {
	h := sha256.Sum256(b)
	h[6] = (h[6] & 0x0f) | 0x50 // version 5-like, name based
	h[8] = (h[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func collectHostInfo(id *identity.Identity) hostInfo {
	hi := hostInfo{
		Hostname:     hostname(),
		GUID:         uuidFrom(id.Public()),
		NodeID:       uuidFrom(append([]byte("node:"), id.Public()...)),
		PublicKey:    id.ID(),
		DiscoveryKey: id.DiscoveryKey(),
		KernelName:   strings.ToUpper(runtime.GOOS[:1]) + runtime.GOOS[1:],
		Arch:         runtime.GOARCH,
		OSName:       "unknown", OSID: "unknown", OSVersion: "unknown", OSVersionID: "unknown",
		Virt: "none", Container: "none", CPUFreq: "0",
	}
	if hi.Arch == "amd64" {
		hi.Arch = "x86_64"
	}
	if in, err := host.Info(); err == nil {
		if in.Platform != "" {
			hi.OSID = in.Platform
			hi.OSName = in.Platform
		}
		if in.PlatformVersion != "" {
			hi.OSVersion, hi.OSVersionID = in.PlatformVersion, in.PlatformVersion
		}
		hi.KernelVersion = in.KernelVersion
		if in.VirtualizationSystem != "" {
			if in.VirtualizationRole == "guest" && (in.VirtualizationSystem == "docker" || in.VirtualizationSystem == "lxc" || in.VirtualizationSystem == "podman") {
				hi.Container = in.VirtualizationSystem
			} else {
				hi.Virt = in.VirtualizationSystem
			}
		}
		hi.BootTime = in.BootTime
	}
	if n, err := cpu.Counts(true); err == nil {
		hi.Cores = n
	}
	if ci, err := cpu.Info(); err == nil && len(ci) > 0 && ci[0].Mhz > 0 {
		hi.CPUFreq = strconv.FormatFloat(ci[0].Mhz*1e6, 'g', 4, 64)
	}
	if vm, err := mem.VirtualMemory(); err == nil {
		hi.RAMTotal = vm.Total
	}
	if parts, err := disk.Partitions(false); err == nil {
		seen := map[string]bool{}
		for _, p := range parts {
			if seen[p.Device] {
				continue
			}
			seen[p.Device] = true
			if u, err := disk.Usage(p.Mountpoint); err == nil {
				hi.DiskTotal += u.Total
			}
		}
	}
	return hi
}

// writeJSON encodes v indented, without HTML escaping (alert expressions
// keep their '>' readable; the body is JSON, not HTML).
func writeJSON(ctx *fasthttp.RequestCtx, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "\t")
	if err := enc.Encode(v); err != nil {
		return httpx.Internal("encode response: %v", err)
	}
	setBody(ctx, ctJSON, b.Bytes())
	return nil
}

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
		"version":         Version,
		"hostname":        s.host.Hostname,
		"peer_public_key": s.host.PublicKey,
		"db":              s.dbKeys(),
		"api": []string{
			"/api/v3/info", "/api/v3/db", "/api/v3/versions", "/api/v3/me", "/api/v3/settings",
			"/health", "/api/v3/contexts", "/api/v3/context?context=", "/api/v1/charts", "/api/v1/chart?chart=",
			"/api/v3/q?q=", "/api/v3/data?chart=", "/api/v3/allmetrics?format=prometheus", "/api/v3/badge.svg?chart=",
			"/api/v3/nodes", "/api/v3/node_instances", "/api/v3/fleet", "/api/v3/stream_path", "/api/v3/export",
			"/api/v3/tunnel", "/api/v3/alerts", "/api/v3/alert_transitions", "/api/v3/alert_config",
			"/api/v3/variable?chart=", "/api/v3/functions",
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
		"_is_ephemeral": "false", "_has_unstable_connection": "false", "_is_parent": strconv.FormatBool(s.o.Parent),
		"_aclk_available": "false",
	}
	v := infoV1{
		Version: "v" + Version, UID: hi.GUID, MirroredHosts: []string{hi.Hostname},
		MirroredHostsStatus: []mirroredHost{{GUID: hi.GUID, Hostname: hi.Hostname, Reachable: true}},
		Alarms:              alarmCount{normal, warning, critical},
		OSName:              hi.OSName, OSID: hi.OSID, OSIDLike: "unknown", OSVersion: hi.OSVersion, OSVersionID: hi.OSVersionID, OSDetection: "gopsutil",
		CoresTotal: strconv.Itoa(hi.Cores), TotalDiskSpace: strconv.FormatUint(hi.DiskTotal, 10), CPUFreq: hi.CPUFreq,
		RAMTotal: strconv.FormatUint(hi.RAMTotal, 10), ContainerOSName: "none", ContainerOSID: "none", ContainerOSIDLike: "none",
		ContainerOSVersion: "none", ContainerOSVersionID: "none", ContainerOSDetection: "none", IsK8sNode: "false",
		KernelName: hi.KernelName, KernelVersion: hi.KernelVersion, Architecture: hi.Arch,
		Virtualization: hi.Virt, VirtDetection: "gopsutil", Container: hi.Container, ContainerDetection: "gopsutil",
		CloudProviderType: "unknown", CloudInstanceType: "unknown", CloudInstanceRegion: "unknown",
		HostLabels: labels, Functions: s.functionList(), Collectors: collectors,
		MemoryMode: "ram+tier1", MultidbDiskQuota: 0, PageCacheSize: 0,
		StreamEnabled: false, HTTPSEnabled: false, Buildinfo: "peerdns|gopsutil|fasthttp", ReleaseChannel: "stable",
		WebEnabled: true, ChartsCount: len(charts), MetricsCount: dims,
		Database: s.dbKeys(), API: ver, CompatibleWith: CompatVersion,
	}
	b, err := json.MarshalIndent(v, "", "\t")
	if err != nil {
		return httpx.Internal("encode info: %v", err)
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

// functionList names the jobs the agent runs on request. They execute
// over the peer-to-peer RPC only; REST lists them.
func (s *Server) functionList() map[string]function {
	f := map[string]function{
		"processes": {Help: "Detailed information on the currently running processes on this node", Timeout: 10, Options: "P2P"},
		"weights":   {Help: "Metric correlations: which charts changed most in a window", Timeout: 30, Options: "P2P"},
	}
	if s.o.Journal {
		f["logs"] = function{Help: "Search the systemd journal of this node", Timeout: 30, Options: "P2P"}
	}
	return f
}

func (s *Server) functions(ctx *fasthttp.RequestCtx, _ int) error {
	return writeJSON(ctx, map[string]any{
		"functions": s.functionList(),
		"note":      "functions execute over the peer-to-peer RPC; the REST API only lists them",
	})
}

func (s *Server) dbInfo(ctx *fasthttp.RequestCtx, _ int) error {
	return writeJSON(ctx, s.dbKeys())
}

func (s *Server) versions(ctx *fasthttp.RequestCtx, _ int) error {
	charts := s.o.DB.Charts()
	var hash uint64 = 1469598103934665603
	for _, c := range charts { // FNV-1a over the chart ids: changes when charts come or go
		for i := 0; i < len(c.ID); i++ {
			hash = (hash ^ uint64(c.ID[i])) * 1099511628211
		}
	}
	last := uint64(0)
	if t := s.transitions(0); len(t) > 0 {
		last = t[len(t)-1].UniqueID
	}
	return writeJSON(ctx, map[string]any{
		"agent":    map[string]any{"name": "peerdns agent", "version": Version, "go": runtime.Version()},
		"protocol": 1,
		"api":      3,
		"netdata":  CompatVersion,
		"versions": map[string]any{
			"contexts_hard_hash": hash, "contexts_soft_hash": len(charts),
			"alerts_hard_hash": last, "alerts_soft_hash": len(s.alerts()), "routing_hard_hash": 1, "nodes_hard_hash": 1,
		},
	})
}

func (s *Server) me(ctx *fasthttp.RequestCtx, _ int) error {
	return writeJSON(ctx, map[string]any{
		"auth":              []string{"none"},
		"anonymous":         true,
		"user_role":         "viewer",
		"access":            []string{"see-metrics", "see-alerts", "export"},
		"can_see_all_nodes": true,
		"note":              "The local REST API is anonymous and read-only; authenticated, role-based access goes through the peer-to-peer channel.",
	})
}

func (s *Server) settings(ctx *fasthttp.RequestCtx, _ int) error {
	st := s.stats()
	return writeJSON(ctx, map[string]any{
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
		"rest":       map[string]any{"cors": s.o.CORS},
		"parent":     s.o.Parent,
		"export_dir": s.o.ExportDir,
		"journal":    s.o.Journal,
	})
}

// health is the aggregate health: 200 while collecting (status ok,
// warning or critical from the alerts), 503 "stale" when nothing was
// collected for 10 seconds (a probe should then restart the agent).
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
	collecting := st.LastTime > 0 && now-st.LastTime <= 10
	code := fasthttp.StatusOK
	if !collecting && now-s.started.Unix() > 10 {
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

// node is the one node this agent is (Netdata v2 node layout keys).
func (s *Server) node() map[string]any {
	st := s.stats()
	return map[string]any{
		"mg": s.host.GUID, "nd": s.host.NodeID, "nm": s.host.Hostname, "ni": 0,
		"v": "v" + Version, "state": "reachable", "hops": 0, "is_parent": s.o.Parent,
		"public_key":  s.host.PublicKey,
		"labels":      map[string]string{"_os_name": s.host.OSName, "_architecture": s.host.Arch},
		"first_entry": st.FirstTime, "last_entry": st.LastTime,
	}
}

func (s *Server) nodes(ctx *fasthttp.RequestCtx, _ int) error {
	return writeJSON(ctx, map[string]any{"nodes": []any{s.node()}, "parent": s.o.Parent})
}

func (s *Server) nodeInstances(ctx *fasthttp.RequestCtx, _ int) error {
	n := s.node()
	n["instances"] = []any{map[string]any{"ni": 0, "hostname": s.host.Hostname, "mg": s.host.GUID, "collecting": true, "charts": len(s.o.DB.Charts())}}
	return writeJSON(ctx, map[string]any{"nodes": []any{n}})
}

// fleet lists this node and, in parent mode, its children. This agent
// does not stream, so a parent has no children to list yet.
func (s *Server) fleet(ctx *fasthttp.RequestCtx, _ int) error {
	return writeJSON(ctx, map[string]any{
		"parent":   s.o.Parent,
		"nodes":    []any{s.node()},
		"children": []any{},
		"total":    1,
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
		"note":          "remote access to this API goes through the peer-to-peer channel, authenticated with this key",
		"pid":           os.Getpid(),
	})
}
