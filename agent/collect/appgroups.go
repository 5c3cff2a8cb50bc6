package collect

import "strings"

// appGroups is the built-in table of application groups, modelled on
// Netdata's apps_groups.conf (a shorter list: the daemons and tools a
// Linux server or workstation commonly runs). A pattern ending in "*"
// matches a command-name prefix; the others match the whole name (the
// kernel's 15-character comm). The first match wins; kernel threads are
// "kernel" and anything else is "other", as in Netdata.
var appGroups = []struct {
	group    string
	patterns []string
}{
	{"netdata", []string{"netdata"}},
	// Netdata's own plugins, each a group of its own as in its
	// apps_groups.conf (a host running Netdata beside the agent shows
	// them; comm is the plugin's file name, shell and Python plugins
	// included, cut at 15 characters).
	{"apps.plugin", []string{"apps.plugin"}},
	{"freeipmi.plugin", []string{"freeipmi.plugin"}},
	{"nfacct.plugin", []string{"nfacct.plugin"}},
	{"cups.plugin", []string{"cups.plugin"}},
	{"xenstat.plugin", []string{"xenstat.plugin"}},
	{"perf.plugin", []string{"perf.plugin"}},
	{"charts.d.plugin", []string{"charts.d.plugin"}},
	{"python.d.plugin", []string{"python.d.plugin"}},
	{"tc-qos-helper", []string{"tc-qos-helper*"}},
	{"go.d.plugin", []string{"go.d.plugin"}},
	{"slabinfo.plugin", []string{"slabinfo.plugin"}},
	{"ebpf.plugin", []string{"ebpf.plugin"}},
	{"debugfs.plugin", []string{"debugfs.plugin"}},
	{"fping", []string{"fping"}},
	{"ioping", []string{"ioping"}},
	{"peerdns", []string{"peerdns", "peerdns-agent"}},
	{"system", []string{"systemd", "systemd-*", "init", "udevd", "dbus-daemon", "dbus-broker*", "polkitd", "udisksd",
		"upowerd", "accounts-daemon", "rsyslogd", "syslog-ng", "auditd", "irqbalance", "thermald", "smartd", "acpid", "agetty",
		"getty", "login", "watchdogd", "rngd", "haveged", "cupsd", "avahi-daemon"}},
	{"ssh", []string{"sshd", "ssh", "ssh-agent", "sftp-server"}},
	{"cron", []string{"cron", "crond", "anacron", "atd", "fcron"}},
	{"dns", []string{"named", "unbound", "dnsmasq", "pdns_server", "pdns_recursor", "coredns", "knotd", "nsd"}},
	{"ntp", []string{"ntpd", "chronyd", "ntpdate", "timesyncd", "openntpd"}},
	{"dhcp", []string{"dhclient", "dhcpcd", "dhcpd", "NetworkManager", "wpa_supplicant"}},
	{"docker", []string{"dockerd", "docker", "containerd", "containerd-shim*", "runc", "docker-proxy", "podman", "conmon", "crio"}},
	{"k8s", []string{"kubelet", "kube-*", "etcd", "kubectl", "k3s*"}},
	{"web", []string{"nginx", "apache2", "httpd", "caddy", "lighttpd", "haproxy", "traefik", "envoy", "varnishd", "squid"}},
	{"sql", []string{"postgres", "mysqld", "mariadbd", "sqlite3"}},
	{"nosql", []string{"redis-server", "mongod", "memcached", "couchdb", "cassandra", "elasticsearch", "valkey-server"}},
	{"mail", []string{"master", "postfix", "qmgr", "pickup", "smtpd", "dovecot", "exim4", "sendmail", "opendkim"}},
	{"packagemanager", []string{"apt", "apt-get", "dpkg", "yum", "dnf", "rpm", "unattended-upgr*", "packagekitd", "snapd", "flatpak"}},
	{"go", []string{"go", "gopls", "compile", "link", "asm", "cgo", "vet", "gofmt", "staticcheck", "*.test"}},
	{"python", []string{"python*", "pip*", "uwsgi", "gunicorn*"}},
	{"java", []string{"java"}},
	{"node", []string{"node", "npm", "npx", "deno", "bun"}},
	{"browsers", []string{"chromium", "chrome", "chrome_crashpad*", "firefox*", "Web Content", "WebExtensions"}},
	{"editors", []string{"vim", "vi", "nvim", "nano", "emacs", "code"}},
	{"term", []string{"bash", "sh", "dash", "zsh", "fish", "tmux*", "screen", "sudo", "su"}},
	{"coreutils", []string{"cat", "tail", "head", "sort", "grep", "sed", "awk", "find", "xargs", "sleep", "tee", "less", "ls", "cp", "mv"}},
	{"build", []string{"make", "gcc", "cc1*", "ld", "clang*", "cargo", "rustc"}},
	{"vcs", []string{"git", "git-*"}},
	{"ksmd", []string{"ksmd"}},
	{"khugepaged", []string{"khugepaged"}},
}

// appGroup returns the group of a process.
func appGroup(comm string, kernel bool) string {
	for _, g := range appGroups {
		for _, p := range g.patterns {
			if match(p, comm) {
				return g.group
			}
		}
	}
	if kernel {
		return "kernel"
	}
	return "other"
}

// match is a pattern with one optional "*" at the start or the end.
func match(p, s string) bool {
	switch {
	case strings.HasSuffix(p, "*"):
		return strings.HasPrefix(s, p[:len(p)-1])
	case strings.HasPrefix(p, "*"):
		return strings.HasSuffix(s, p[1:])
	}
	return p == s
}
