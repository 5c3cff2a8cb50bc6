package procs

// ConnCap is the cap of a server's open connections: def, or a quarter of
// the descriptor limit fdLimit (OpenFileLimit; 0: unknown) when that is
// less, at least 16. A quarter leaves room for a second such server, or
// for each connection's partner (an edge client's upstream), and for the
// rest of the process.
func ConnCap(def int, fdLimit uint64) int {
	if fdLimit > 0 && fdLimit/4 < uint64(def) {
		return max(int(fdLimit/4), 16)
	}
	return def
}
