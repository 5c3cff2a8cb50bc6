package fleet_test

import "github.com/klauspost/compress/snappy"

func snappyEncode(dst, src []byte) []byte { return snappy.Encode(dst[:cap(dst)], src) }
