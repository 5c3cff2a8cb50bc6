//go:build !race

package procs

const raceBuild = false
