package api

import (
	"sort"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
)

// functionsV2 is /api/v2|v3/functions: Netdata's array of functions with
// the nodes that run them. They run over the peer-to-peer admin RPC (the
// "peer-rpc" tag), never over HTTP; without the RPC none is listed.
func (s *Server) functionsV2(ctx *fasthttp.RequestCtx, ver int) error {
	received := time.Now()
	fl := s.functionList()
	names := make([]string, 0, len(fl))
	for n := range fl {
		names = append(names, n)
	}
	sort.Strings(names)
	out := []any{}
	for _, n := range names {
		out = append(out, map[string]any{
			"name": n, "help": fl[n].Help, "ni": []int{0}, "priority": 100, "version": 1,
			"tags": "peer-rpc", "access": []string{"signed-in", "same-space"},
		})
	}
	return writeJSON(ctx, map[string]any{"api": 2, "nodes": []any{s.v2NodeEntry(received)}, "functions": out, "timings": cloudTimings(received)})
}

// meV3 is /api/v3/me as Netdata writes it: the way the caller signed in
// ("none": the local API is anonymous), its access and role.
func (s *Server) meV3(ctx *fasthttp.RequestCtx, ver int) error {
	return writeJSON(ctx, map[string]any{
		"auth": "none", "cloud_account_id": "00000000-0000-0000-0000-000000000000", "client_name": "",
		"access":    []string{"anonymous-data", "see-metrics", "see-alerts"},
		"user_role": "viewer",
	})
}

// settingsV3 is /api/v3/settings: Netdata's dashboard settings file
// ({"version": N, ...}; only file=default exists). This agent keeps none
// (the API is read-only), so the file is at version 1 and empty; the
// agent's own settings (retention, storage, ...) are in the same answer,
// beside version.
func (s *Server) settingsV3(ctx *fasthttp.RequestCtx, ver int) error {
	if f, _ := arg(ctx, "file"); f != "" && f != "default" {
		return httpx.BadRequest("Only the 'default' settings file is served, got %q", trimArg(f))
	}
	return s.settingsWith(ctx, map[string]any{"version": 1})
}

// progress is /api/v2|v3/progress?transaction=: Netdata reports how far
// a running function is. Functions run on the peer-to-peer RPC, never as
// an HTTP transaction, so every transaction is unknown here.
func (s *Server) progress(ctx *fasthttp.RequestCtx, ver int) error {
	tr, _ := arg(ctx, "transaction")
	if strings.TrimSpace(tr) == "" {
		return writeJSONStatus(ctx, fasthttp.StatusBadRequest, map[string]any{"status": 400, "message": "No transaction given"})
	}
	return writeJSONStatus(ctx, fasthttp.StatusNotFound, map[string]any{"status": 404, "message": "Transaction not found"})
}

// streamInfo is /api/v3/stream_info[?machine_guid=]: what a child asks a
// parent before streaming to it. This agent's own database for its GUID
// (or without one), a parent's child for that child's GUID, 404 for
// others.
func (s *Server) streamInfo(ctx *fasthttp.RequestCtx, ver int) error {
	guid, _ := arg(ctx, "machine_guid")
	st := s.stats()
	out := map[string]any{
		"version": 1, "status": 200, "host_id": s.host.GUID, "nodes": len(s.nodeList()),
		"receivers": len(s.nodeList()) - 1, "nonce": uint32(time.Now().UnixNano()),
	}
	switch {
	case guid == "" || guid == s.host.GUID:
		out["db_status"], out["db_liveness"] = "available", "live"
		out["ingest_type"], out["ingest_status"] = "localhost", "online"
		out["first_time_s"], out["last_time_s"] = st.FirstTime, st.LastTime
	default:
		found := false
		for _, c := range s.children() {
			if c.GUID == guid {
				found = true
				out["db_status"], out["db_liveness"] = "available", "live"
				out["ingest_type"], out["ingest_status"] = "child", "online"
				if c.State != ChildLive {
					out["db_liveness"], out["ingest_status"] = "stale", "offline"
				}
				out["first_time_s"], out["last_time_s"] = c.FirstEntry, c.LastEntry
			}
		}
		if !found {
			out["status"] = 404
			return writeJSONStatus(ctx, fasthttp.StatusNotFound, out)
		}
	}
	return writeJSON(ctx, out)
}

// mlInfo is /api/vN/ml_info: the anomaly detector's state (Netdata's
// ml_info, version 2): whether it runs and how many dimensions it saw,
// had trained and flagged at its last tick.
func (s *Server) mlInfo(ctx *fasthttp.RequestCtx, ver int) error {
	if r := s.o.Remote; r != nil {
		// The child's detector runs on the child; its counts are not
		// streamed, only whether it runs.
		running := 0
		if r.Settings != nil && r.Settings.AnomalyDetector {
			running = 1
		}
		return writeJSON(ctx, map[string]any{"version": 2, "ml-running": running, "anomalous-dimensions": 0, "normal-dimensions": 0,
			"total-dimensions": 0, "trained-dimensions": 0, "note": "the anomaly detector of a child runs on the child; ask its agent for its counts"})
	}
	if s.o.ML == nil {
		return writeJSON(ctx, map[string]any{"version": 2, "ml-running": 0, "anomalous-dimensions": 0, "normal-dimensions": 0,
			"total-dimensions": 0, "trained-dimensions": 0, "note": "no anomaly detector runs in this agent"})
	}
	st := s.o.ML.Stats()
	running := 0
	if st.Time > 0 {
		running = 1
	}
	return writeJSON(ctx, map[string]any{
		"version": 2, "ml-running": running,
		"anomalous-dimensions": st.Anomalous, "normal-dimensions": st.Total - st.Anomalous,
		"total-dimensions": st.Total, "trained-dimensions": st.Trained,
		"anomaly-rate": st.Rate, "last-tick": st.Time,
	})
}

// dbengineStats is /api/vN/dbengine_stats: Netdata's per-tier storage
// figures, here those of the agent's two tiers (1-second rings in
// memory, 60-second aggregates in memory and one append-only file).
// memory_bytes_full_retention is what each tier will hold once its
// retention is full (metrics × bytes per metric), not what it holds now:
// settings' storage.memory_rings.bytes is that measure.
func (s *Server) dbengineStats(ctx *fasthttp.RequestCtx, ver int) error {
	st := s.stats()
	return writeJSON(ctx, map[string]any{
		"tier0": map[string]any{
			"update_every": 1, "retention_seconds": int64(st.Tier0Retention.Seconds()),
			"first_time_s": st.FirstTime, "last_time_s": st.LastTime,
			"metrics": st.Dimensions, "bytes_per_metric": st.Tier0BytesPerDim, "disk_bytes": 0,
			"memory_bytes_full_retention": int64(st.Dimensions) * int64(st.Tier0BytesPerDim),
		},
		"tier1": map[string]any{
			"update_every": 60, "retention_seconds": int64(st.Tier1Retention.Seconds()),
			"first_time_s": st.Tier1First, "last_time_s": st.Tier1Last,
			"metrics": st.Dimensions, "bytes_per_metric": st.Tier1BytesPerDim, "disk_bytes": st.Tier1DiskBytes,
			"memory_bytes_full_retention": int64(st.Dimensions) * int64(st.Tier1BytesPerDim),
		},
	})
}

// registry answers Netdata's dashboard registry calls as an agent without
// a registry: hello says who this agent is and announces no registry (so
// the dashboard keeps its server list local); access, delete, search and
// switch are refused with 403, as Netdata refuses them where the registry
// is off.
func (s *Server) registry(ctx *fasthttp.RequestCtx, ver int) error {
	action, _ := arg(ctx, "action")
	switch strings.ToLower(action) {
	case "hello":
		return writeJSON(ctx, map[string]any{
			"action": "hello", "status": "ok", "hostname": s.host.Hostname, "machine_guid": s.host.GUID,
			"node_id":      s.host.NodeID,
			"agent":        map[string]any{"machine_guid": s.host.GUID, "node_id": s.host.NodeID, "bearer_protection": false},
			"cloud_status": "disabled", "cloud_base_url": "", "registry": "", "anonymous_statistics": false,
			"X-Netdata-Auth": true,
			"nodes":          []any{map[string]any{"machine_guid": s.host.GUID, "node_id": s.host.NodeID, "hostname": s.host.Hostname}},
		})
	case "access", "delete", "search", "switch":
		return httpx.Errorf(fasthttp.StatusForbidden, "This agent has no registry: %s is not served.", action)
	case "":
		return httpx.BadRequest("Invalid registry request: action= is required (hello).")
	}
	return httpx.BadRequest("Invalid registry request: unknown action %q.", trimArg(action))
}

// versionsV2 is /api/v2|v3/versions: Netdata's {api, versions (the six
// hashes), agents, timings}, with the agent's own versions (agent,
// protocol, netdata) kept beside them.
func (s *Server) versionsV2(ctx *fasthttp.RequestCtx, ver int) error {
	received := time.Now()
	return writeJSON(ctx, map[string]any{
		"api": 2, "versions": s.v2Versions(), "agents": []any{s.v2Agent(received)}, "timings": cloudTimings(received),
		"agent": map[string]any{"name": "peerdns agent", "version": s.agentVersion()}, "protocol": 1, "netdata": CompatVersion,
	})
}
