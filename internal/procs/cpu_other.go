//go:build !unix

package procs

import "time"

// processCPU is nil where getrusage is not there: the governor stays off.
var processCPU func() time.Duration
