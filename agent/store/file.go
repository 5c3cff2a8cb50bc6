package store

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// The tier-1 file is append-only: a header, then records
//
//	kind byte | uvarint payload length | payload | crc32 (IEEE) of kind+payload, little endian
//
// kind 'C' (chart definition): uvarint chart number, JSON ChartDef.
// kind 'M' (one closed minute of one chart): uvarint chart number, varint
// unix minute, uvarint dimension count, then per dimension a count byte and,
// when the count is not 0, an anomaly byte and min, max, sum as float32 LE.
//
// A minute may appear twice (before and after a restart inside it); the
// loader merges the parts. A torn or corrupt tail (crash mid-write) ends the
// replay at the last good record, and the next compaction rewrites the file.
//
// Why not buntdb (internal/store): buntdb keeps every key and value in memory
// as strings in addition to our chunks, so 14 days of minutes would cost
// their size twice over, and each Set is a JSON-ish AOF line several times
// larger than the 14 bytes a dimension-minute takes here (see
// BenchmarkTier1FileVsBuntDB).
const fileMagic = "PDNSAT1\n"

const (
	recChart  = 'C'
	recMinute = 'M'
)

// maxRecord bounds a record's payload so a corrupt length cannot make the
// loader allocate gigabytes.
const maxRecord = 16 << 20

func appendRecord(buf []byte, kind byte, payload []byte) []byte {
	buf = append(buf, kind)
	buf = binary.AppendUvarint(buf, uint64(len(payload)))
	buf = append(buf, payload...)
	crc := crc32.NewIEEE()
	crc.Write([]byte{kind})
	crc.Write(payload)
	return binary.LittleEndian.AppendUint32(buf, crc.Sum32())
}

func appendChartRecord(buf []byte, num uint32, def *ChartDef) []byte {
	js, err := json.Marshal(def)
	if err != nil { // a ChartDef has only strings, ints and bools
		panic(fmt.Sprintf("encode chart def: %v", err))
	}
	p := binary.AppendUvarint(nil, uint64(num))
	p = append(p, js...)
	return appendRecord(buf, recChart, p)
}

func appendF32(b []byte, f float32) []byte {
	return binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
}

// appendMinuteRecord encodes the open minute of every dimension.
func appendMinuteRecord(buf []byte, num uint32, minute int64, acc []accum) []byte {
	p := make([]byte, 0, 16+len(acc)*14)
	p = binary.AppendUvarint(p, uint64(num))
	p = binary.AppendVarint(p, minute)
	p = binary.AppendUvarint(p, uint64(len(acc)))
	for _, a := range acc {
		c := min(a.count, 255)
		p = append(p, byte(c))
		if c == 0 {
			continue
		}
		p = append(p, byte(min(a.anom, 255)))
		p = appendF32(p, float32(a.min))
		p = appendF32(p, float32(a.max))
		p = appendF32(p, float32(a.sum))
	}
	return appendRecord(buf, recMinute, p)
}

// appendChunkMinute encodes one minute held in a chunk; ok is false when no
// dimension has data there.
func appendChunkMinute(buf []byte, num uint32, minute int64, c *chunk, ndims, off int) ([]byte, bool) {
	if _, ok := c.slot(0, off); !ok {
		return buf, false // the chunk does not hold that minute
	}
	has := false
	for d := 0; d < ndims; d++ {
		if j, _ := c.slot(d, off); c.count[j] > 0 {
			has = true
			break
		}
	}
	if !has {
		return buf, false
	}
	p := make([]byte, 0, 16+ndims*14)
	p = binary.AppendUvarint(p, uint64(num))
	p = binary.AppendVarint(p, minute)
	p = binary.AppendUvarint(p, uint64(ndims))
	for d := 0; d < ndims; d++ {
		j, _ := c.slot(d, off)
		p = append(p, c.count[j])
		if c.count[j] == 0 {
			continue
		}
		p = append(p, c.anom[j])
		p = appendF32(p, c.min[j])
		p = appendF32(p, c.max[j])
		p = appendF32(p, c.sum[j])
	}
	return appendRecord(buf, recMinute, p), true
}

// errCorrupt ends a replay at a bad record.
var errCorrupt = errors.New("corrupt tier-1 record")

// readRecord reads one record; io.EOF at a clean end, errCorrupt (or
// io.ErrUnexpectedEOF) at a torn or damaged one.
func readRecord(r *bufio.Reader, payload []byte) (kind byte, p []byte, n int64, err error) {
	kind, err = r.ReadByte()
	if err != nil {
		return 0, nil, 0, err // io.EOF: clean end
	}
	ln, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, nil, 0, errCorrupt
	}
	if ln > maxRecord {
		return 0, nil, 0, errCorrupt
	}
	if cap(payload) < int(ln) {
		payload = make([]byte, ln)
	}
	p = payload[:ln]
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, 0, errCorrupt
	}
	var sum [4]byte
	if _, err := io.ReadFull(r, sum[:]); err != nil {
		return 0, nil, 0, errCorrupt
	}
	crc := crc32.NewIEEE()
	crc.Write([]byte{kind})
	crc.Write(p)
	if crc.Sum32() != binary.LittleEndian.Uint32(sum[:]) {
		return 0, nil, 0, errCorrupt
	}
	n = 1 + int64(uvarintLen(ln)) + int64(ln) + 4
	return kind, p, n, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// minuteRec is a decoded 'M' record.
type minuteRec struct {
	num    uint32
	minute int64
	acc    []accum
}

func decodeChart(p []byte) (uint32, *ChartDef, error) {
	num, k := binary.Uvarint(p)
	if k <= 0 || num > math.MaxUint32 {
		return 0, nil, errCorrupt
	}
	var def ChartDef
	if err := json.Unmarshal(p[k:], &def); err != nil {
		return 0, nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	if err := checkDef(&def); err != nil {
		return 0, nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	return uint32(num), &def, nil
}

func decodeMinute(p []byte, acc []accum) (minuteRec, error) {
	var r minuteRec
	num, k := binary.Uvarint(p)
	if k <= 0 || num > math.MaxUint32 {
		return r, errCorrupt
	}
	p = p[k:]
	minute, k := binary.Varint(p)
	if k <= 0 {
		return r, errCorrupt
	}
	p = p[k:]
	nd, k := binary.Uvarint(p)
	if k <= 0 || nd > uint64(len(p)) {
		return r, errCorrupt
	}
	p = p[k:]
	r.num, r.minute = uint32(num), minute
	acc = acc[:0]
	for d := uint64(0); d < nd; d++ {
		if len(p) < 1 {
			return r, errCorrupt
		}
		c := p[0]
		p = p[1:]
		if c == 0 {
			acc = append(acc, accum{})
			continue
		}
		if len(p) < 13 {
			return r, errCorrupt
		}
		a := accum{count: uint32(c), anom: uint32(p[0])}
		a.min = float64(math.Float32frombits(binary.LittleEndian.Uint32(p[1:])))
		a.max = float64(math.Float32frombits(binary.LittleEndian.Uint32(p[5:])))
		a.sum = float64(math.Float32frombits(binary.LittleEndian.Uint32(p[9:])))
		acc = append(acc, a)
		p = p[13:]
	}
	if len(p) != 0 {
		return r, errCorrupt
	}
	r.acc = acc
	return r, nil
}
