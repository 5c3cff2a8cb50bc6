package api

import (
	"crypto/sha256"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/shirou/gopsutil/v3/cpu"
	"github.com/shirou/gopsutil/v3/disk"
	"github.com/shirou/gopsutil/v3/host"
	"github.com/shirou/gopsutil/v3/mem"

	"peerdns/transport/identity"
)

// hostInfo is read once at start: it describes the machine, not the moment.
type hostInfo struct {
	Hostname      string
	Version       string // the agent's version as info writes it ("v0.5.0")
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
	Timezone      string // as charts names it
	// Zone and ZoneOffset are a child's zone as it reported it; "" for
	// this agent, whose zone is read when an answer is made (it may
	// change with daylight saving time).
	Zone       string
	ZoneOffset int
}

// zone is the time zone abbreviation and offset (seconds east of UTC)
// of the node answered for.
func (hi *hostInfo) zone() (string, int) {
	if hi.Zone != "" {
		return hi.Zone, hi.ZoneOffset
	}
	return time.Now().Zone()
}

// MachineGUID is the agent's machine_guid (info, nodes, chart ids of the
// anomaly detector): a UUID derived from the agent's public key.
func MachineGUID(id *identity.Identity) string { return uuidFrom(id.Public()) }

// Hostname is the host name the API reports ("localhost" when unknown).
func Hostname() string { return hostname() }

func uuidFrom(b []byte) string {
	h := sha256.Sum256(b)
	h[6] = (h[6] & 0x0f) | 0x50 // version 5-like, name based
	h[8] = (h[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func collectHostInfo(id *identity.Identity) hostInfo {
	hi := hostInfo{
		Hostname:     hostname(),
		Version:      "v" + Version,
		Timezone:     time.Local.String(),
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

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}
