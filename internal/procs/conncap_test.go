package procs

import "testing"

func TestConnCap(t *testing.T) {
	for _, tc := range []struct {
		def   int
		limit uint64
		want  int
	}{{1024, 0, 1024}, {1024, 1 << 20, 1024}, {1024, 1024, 256}, {1024, 300, 75}, {1024, 20, 16},
		{4096, 20000, 4096}, {4096, 4096, 1024}, {4096, 256, 64}} {
		if got := ConnCap(tc.def, tc.limit); got != tc.want {
			t.Errorf("ConnCap(%d, %d) = %d, want %d", tc.def, tc.limit, got, tc.want)
		}
	}
}
