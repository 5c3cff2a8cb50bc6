//go:build !unix

package dns

func openFileLimit() uint64 { return 0 }
