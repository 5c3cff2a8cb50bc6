package procs

import (
	"os"
	"strings"
)

// RuntimeSettings are the GODEBUG settings a node runs with (SysmonTrace
// and PreemptOff say why), each unless the operator's GODEBUG sets the
// same key: theirs is kept.
var RuntimeSettings = []string{SysmonTrace, PreemptOff}

// RuntimeEnv returns environ with the RuntimeSettings GODEBUG does not
// set yet added to it, and whether any was; environ itself when none.
func RuntimeEnv(environ []string) ([]string, bool) {
	debug := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			debug = v
		}
	}
	var add []string
	for _, s := range RuntimeSettings {
		key, _, _ := strings.Cut(s, "=")
		if _, set := setting(debug, key); !set {
			add = append(add, s)
		}
	}
	if len(add) == 0 {
		return environ, false
	}
	out := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			out = append(out, kv)
		}
	}
	if debug != "" {
		debug += ","
	}
	return append(out, "GODEBUG="+debug+strings.Join(add, ",")), true
}

// ExecWithRuntimeSettings replaces this process (same PID, arguments
// and environment) with itself run with RuntimeSettings, since GODEBUG
// is read once, when the runtime starts. It returns only when it did
// not: GODEBUG sets every key already, the platform has no exec (nil),
// or the executable could not be run again (the error).
func ExecWithRuntimeSettings() error {
	env, add := RuntimeEnv(os.Environ())
	if !add || execve == nil {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return execve(exe, os.Args, env)
}

// setting is key's value in a GODEBUG string, if it sets one.
func setting(debug, key string) (value string, set bool) {
	for _, s := range strings.Split(debug, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(s), key+"="); ok {
			return v, true
		}
	}
	return "", false
}
