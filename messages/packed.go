package messages

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Packed ids on the wire.
//
// A writer id is 64 lowercase hex characters (an Ed25519 public key), and
// ids are most of what the peer protocol carries: an op names its writer
// and, in a vote's key, the voter and the claimant (about a third of its
// ~310 bytes); an announced op id is an id and a seq; a version vector,
// a heartbeat or a suspicion is ids and numbers. At 1,000 writers the
// announcements alone were ten of the ~23 KB a node received per claim
// (docs/scale.md). So the frames carry an id as a CBOR byte string of its
// 32 bytes, not as 64 characters of text, and a key part that is the
// op's own writer as one byte: a vote op is about 180 bytes instead of
// 310. An announced id names its writer by 8 of those bytes, and a vote
// pushed live its claimant (Short ids, below): an announced id is 12
// bytes instead of 72, such a vote ~150.
//
// Only the wire form changes. Inside the process ids stay hex strings;
// what a writer signs is the op's CBOR with ids as text (Op.SigningBytes),
// so a signature does not depend on the wire form, and a decoder takes an
// id as text too (frames and ledger files written with ids as text). A
// string that is not a canonical id (upper case, another length, not
// hex) travels as text, unchanged. A key is
// packed by its ':'-separated parts: a part that is a canonical id goes
// as 32 bytes, any other as text, and a key with no id in it stays a
// text string; decoding joins the parts with ':' again, so every key
// comes back as it was (a key that decodes to something its writer did
// not sign fails the signature check, as any altered op does).
//
// A decoder that takes ids only as text cannot read these frames, nor a
// ledger file written with them: the nodes of one network all run builds
// that pack ids, and a data folder is not handed to a build that does
// not. Measured: docs/scale.md, "Packed ids".

// idBytes is the size of a packed id.
const idBytes = 32

// maxKeyParts bounds the parts of a packed key (a ledger key has at
// most four: ParseKey).
const maxKeyParts = 8

// packHex returns the 32 bytes of s when s is a canonical id.
func packHex(s string) (raw [idBytes]byte, ok bool) {
	if len(s) != 2*idBytes {
		return raw, false
	}
	for i := range raw {
		hi, lo := nibble[s[2*i]], nibble[s[2*i+1]]
		if hi|lo > 15 {
			return raw, false
		}
		raw[i] = hi<<4 | lo
	}
	return raw, true
}

// isID reports whether s is a canonical id, as packHex would, without
// decoding it.
func isID(s string) bool {
	if len(s) != 2*idBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if nibble[s[i]] > 15 {
			return false
		}
	}
	return true
}

// nibble maps a lowercase hex digit to its value and anything else to
// 0xff.
var nibble = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c-'a') + 10
	}
	return t
}()

// appendID appends s in CBOR: a byte string of 32 when it is a canonical
// id, else a text string.
func appendID(b []byte, s string) []byte {
	if raw, ok := packHex(s); ok {
		b = append(b, 0x58, idBytes) // byte string, one-byte length
		return append(b, raw[:]...)
	}
	return appendText(b, s)
}

// appendText appends s as a CBOR text string.
func appendText(b []byte, s string) []byte {
	b = appendHead(b, 3, uint64(len(s)))
	return append(b, s...)
}

// appendHead appends a CBOR head of major type major and argument n in
// its shortest form (deterministic encoding).
func appendHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return append(b, m|25, byte(n>>8), byte(n))
	case n <= 0xffffffff:
		return append(b, m|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, m|27, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// packedID is an id field in a frame (see above).
type packedID string

func (p packedID) MarshalCBOR() ([]byte, error) { return appendID(nil, string(p)), nil }

var errPackedID = errors.New("cbor: an id is a text string or a byte string of 32")

func (p *packedID) UnmarshalCBOR(b []byte) error {
	s, err := decodeID(b)
	*p = packedID(s)
	return err
}

// decodeID reads one id: a text string as it is, a byte string of 32 as
// hex. b is one CBOR item (the decoder checked it is well formed).
func decodeID(b []byte) (string, error) {
	major, n, hl, ok := head(b)
	if !ok || uint64(len(b)-hl) < n {
		return "", errPackedID
	}
	body := b[hl : hl+int(n)]
	switch {
	case major == 3 && utf8.Valid(body):
		return string(body), nil
	case major == 2 && n == idBytes:
		return internID(body), nil
	}
	return "", errPackedID
}

// Decoded ids are interned: a network has a bounded set of writers, and
// every op, announced id and vote names some of them again, so a packed
// id costs a lookup instead of a 64-byte string each time it is read.
// The table holds at most maxInterned ids (~2.5 MB with the map of
// short forms below); full, it is emptied and fills again with the ids
// that come next, so made-up ids sent to fill it cost a peer that much
// memory at most and the writers of the network are interned again as
// their ops arrive.
//
// The table also answers short ids (Short ids, below): byShort maps the
// first shortIDBytes bytes of every id interned to the id, or to ""
// when two ids share them.
var interned struct {
	sync.RWMutex
	m       map[[idBytes]byte]string
	byShort map[[shortIDBytes]byte]string
	pinned  map[[idBytes]byte]string // Pin's ids: added again when the table is emptied
}

const maxInterned = 1 << 14

func internID(raw []byte) string {
	k := [idBytes]byte(raw)
	interned.RLock()
	s, ok := interned.m[k]
	interned.RUnlock()
	if ok {
		return s
	}
	s = hex.EncodeToString(raw)
	interned.Lock()
	addInterned(k, s)
	interned.Unlock()
	return s
}

// addInterned adds id s, of bytes k, to the table; the caller holds its
// lock.
func addInterned(k [idBytes]byte, s string) {
	if interned.m == nil {
		interned.m = make(map[[idBytes]byte]string)
		interned.byShort = make(map[[shortIDBytes]byte]string)
	}
	if len(interned.m) >= maxInterned {
		clear(interned.m)
		clear(interned.byShort)
		for pk, ps := range interned.pinned {
			putInterned(pk, ps)
		}
	}
	putInterned(k, s)
}

// Pin interns id (64 hex characters; anything else is ignored) for the
// life of the process, through every emptying of the table. A node pins
// its own id: it never decodes its own ops from a peer before the first
// vote on its own claim names it, in short form, as the claimant, and
// in a network of two nodes its ops never come back to it at all.
func Pin(id string) {
	k, ok := packHex(id)
	if !ok {
		return
	}
	interned.Lock()
	defer interned.Unlock()
	if interned.pinned == nil {
		interned.pinned = make(map[[idBytes]byte]string)
	}
	interned.pinned[k] = id
	addInterned(k, id)
}

// putInterned stores id s, of bytes k, and its short form; the caller
// holds the lock and has made room.
func putInterned(k [idBytes]byte, s string) {
	interned.m[k] = s
	p := [shortIDBytes]byte(k[:shortIDBytes])
	if t, ok := interned.byShort[p]; ok && t != s {
		s = "" // two ids share the short form: it names neither
	}
	interned.byShort[p] = s
}

// Short ids. An announced op id (ihave, graft) names its writer by the
// first 8 bytes of its key instead of all 32: announced ids were two
// fifths of what a node received per claim at 1,000 writers, and every
// op is announced to it by several neighbours. A node knows the writers
// it hears of (their heartbeats, ops and membership reach every node,
// and decoding them interns them), so it resolves a short id against
// the intern table; an id it sends short is added to its own table
// first, so a graft naming it comes back resolvable. A short id the
// table cannot resolve (a writer not heard of yet, the table just
// emptied, or two known writers sharing 8 bytes, which takes about 2^64
// key generations to bring about on purpose) decodes with an empty
// Writer, which the receiver ignores and counts: an announcement is a
// hint, and the periodic digest exchange repairs what it would have.
//
// An op pushed live (Envelope.ShortIDs, set by the sending session) names a
// vote's claimant the same way: the claimant's claim came before the
// votes, so its receivers have heard of it, and the claimant itself, which
// never decodes its own claim, pins its own id (Pin). A vote whose claimant does
// not resolve decodes marked Op.Unresolved, not as an error (the frame's
// other ops are good), and its receiver drops it; repairs send ops whole
// and bring it. An op's own writer, and the ids of every other key (a
// membership op names a writer new to most nodes), stay whole: the
// signature is checked against the writer.
const shortIDBytes = 8

// appendShortID appends the short form of id raw (hex s) and makes sure
// this process can resolve it.
func appendShortID(b []byte, raw [idBytes]byte, s string) []byte {
	interned.RLock()
	_, ok := interned.m[raw]
	interned.RUnlock()
	if !ok {
		interned.Lock()
		addInterned(raw, s)
		interned.Unlock()
	}
	b = append(b, 0x40|shortIDBytes)
	return append(b, raw[:shortIDBytes]...)
}

// resolveShort returns the id whose short form is p, or "" when none or
// more than one is known.
func resolveShort(p []byte) string {
	interned.RLock()
	s := interned.byShort[[shortIDBytes]byte(p)]
	interned.RUnlock()
	return s
}

// head reads the head of the CBOR item at the start of b: its major type,
// its argument and the head's length. Indefinite lengths are refused (a
// deterministic encoder never writes them).
func head(b []byte) (major byte, arg uint64, n int, ok bool) {
	if len(b) == 0 {
		return 0, 0, 0, false
	}
	major, info := b[0]>>5, b[0]&31
	switch {
	case info < 24:
		return major, uint64(info), 1, true
	case info <= 27:
		size := 1 << (info - 24)
		if len(b) < 1+size {
			return 0, 0, 0, false
		}
		for _, c := range b[1 : 1+size] {
			arg = arg<<8 | uint64(c)
		}
		return major, arg, 1 + size, true
	}
	return 0, 0, 0, false
}

// A key in a frame is a text string, or an array of its ':'-separated
// parts when one of them is an id (see above); a part that is the op's
// own writer (the voter of a vote, the claimant of a claim) is an empty
// byte string, since the op names its writer already.

// appendKey appends key, an op's key, writer the op's writer; short
// writes the other ids of a vote key (its claimant) in their short form
// (Envelope.ShortIDs).
func appendKey(b []byte, key, writer string, short bool) []byte {
	short = short && strings.HasPrefix(key, KeyVote+":")
	self := isID(writer)
	n, ids := 1, 0
	for rest, more := key, true; more; {
		var part string
		part, rest, more = strings.Cut(rest, ":")
		if isID(part) {
			ids++
		}
		if more {
			n++
		}
	}
	if ids == 0 || n > maxKeyParts {
		return appendText(b, key)
	}
	b = appendHead(b, 4, uint64(n))
	for rest, more := key, true; more; {
		var part string
		part, rest, more = strings.Cut(rest, ":")
		if self && part == writer {
			b = append(b, 0x40)
			continue
		}
		if raw, ok := packHex(part); ok && short {
			b = appendShortID(b, raw, part)
			continue
		}
		b = appendID(b, part)
	}
	return b
}

var errPackedKey = fmt.Errorf("cbor: a key is a text string or an array of at most %d parts", maxKeyParts)

// errUnresolved: a key part in short form names no id this process
// knows (Op.Unresolved).
var errUnresolved = errors.New("cbor: a short id in a key names no known writer")

// decodeKey reads a key appendKey wrote (or a text key), writer the op's
// writer.
func decodeKey(b []byte, writer string) (string, error) {
	major, parts, hl, ok := head(b)
	if !ok {
		return "", errPackedKey
	}
	if major != 4 {
		return decodeID(b) // a text string (or a lone packed id)
	}
	if parts == 0 || parts > maxKeyParts {
		return "", errPackedKey
	}
	var sb strings.Builder
	sb.Grow(len(b) * 2)
	rest := b[hl:]
	for i := range int(parts) {
		_, n, phl, ok := head(rest)
		if !ok || uint64(len(rest)-phl) < n {
			return "", errPackedKey
		}
		var s string
		switch {
		case rest[0] == 0x40:
			if writer == "" {
				return "", errPackedKey
			}
			s = writer
		case rest[0] == 0x40|shortIDBytes:
			if s = resolveShort(rest[1 : 1+shortIDBytes]); s == "" {
				return "", errUnresolved
			}
		default:
			var err error
			if s, err = decodeID(rest[:phl+int(n)]); err != nil {
				return "", err
			}
		}
		if i > 0 {
			sb.WriteByte(':')
		}
		sb.WriteString(s)
		rest = rest[phl+int(n):]
	}
	if len(rest) != 0 {
		return "", errPackedKey
	}
	return sb.String(), nil
}

// MarshalCBOR encodes o with its ids packed: the map of its fields, written
// by hand (through the codec's reflection with a marshaler per id, a frame
// of ops costs five times the text form's encoding and decoding).
func (o *Op) MarshalCBOR() ([]byte, error) {
	return o.appendCBOR(make([]byte, 0, o.sizeHint()), formPacked), nil
}

// opForm is how appendCBOR writes an op's ids.
type opForm uint8

const (
	formPacked opForm = iota // ids packed: frames, the ledger file
	formShort                // packed, a vote's claimant short (Envelope.ShortIDs)
	formSigned               // ids as text and no signature: what a writer signs (SigningBytes)
)

// sizeHint is about the length of o's encoding.
func (o *Op) sizeHint() int {
	return 64 + len(o.Key) + len(o.Value) + len(o.Sig) + len(o.Batch)*96
}

// appendCBOR appends o's encoding in form to b: with ids packed (the
// vote claimants short in formShort, Short ids above), or with them as
// text and without the signature, as the codec writes the op's plain
// struct (formSigned).
func (o *Op) appendCBOR(b []byte, form opForm) []byte {
	signed, short := form == formSigned, form == formShort
	fields := uint64(3)
	for _, set := range [...]bool{o.Key != "", o.Value != "", o.Delete, len(o.Sig) > 0 && !signed, len(o.Batch) > 0} {
		if set {
			fields++
		}
	}
	b = appendHead(b, 5, fields)
	if signed {
		b = appendText(append(b, 1), o.Writer)
	} else {
		b = appendID(append(b, 1), o.Writer)
	}
	b = appendHead(append(b, 2), 0, o.Seq)
	b = append(b, 3, 0xa2, 1)
	if o.HLC.Wall < 0 {
		b = appendHead(b, 1, uint64(-(o.HLC.Wall + 1)))
	} else {
		b = appendHead(b, 0, uint64(o.HLC.Wall))
	}
	b = appendHead(append(b, 2), 0, uint64(o.HLC.Logical))
	if o.Key != "" {
		b = o.appendKeyIn(append(b, 4), o.Key, signed, short)
	}
	if o.Value != "" {
		b = appendText(append(b, 5), o.Value)
	}
	if o.Delete {
		b = append(b, 6, 0xf5)
	}
	if len(o.Sig) > 0 && !signed {
		b = append(appendHead(append(b, 7), 2, uint64(len(o.Sig))), o.Sig...)
	}
	if len(o.Batch) > 0 {
		b = appendHead(append(b, 8), 4, uint64(len(o.Batch)))
		for _, w := range o.Batch {
			n := uint64(1)
			if w.Value != "" {
				n++
			}
			if w.Delete {
				n++
			}
			b = o.appendKeyIn(append(appendHead(b, 5, n), 1), w.Key, signed, short)
			if w.Value != "" {
				b = appendText(append(b, 2), w.Value)
			}
			if w.Delete {
				b = append(b, 3, 0xf5)
			}
		}
	}
	return b
}

// appendKeyIn appends key, a key of o, as text when signed, else packed.
func (o *Op) appendKeyIn(b []byte, key string, signed, short bool) []byte {
	if signed {
		return appendText(b, key)
	}
	return appendKey(b, key, o.Writer, short)
}

// UnmarshalCBOR decodes an op with ids packed or as text, by hand (the
// codec's reflection, run again for each op, costs twice the text form's
// decoding), as strictly as the codec's decoder: known fields only, each
// at most once, definite lengths, valid UTF-8.
func (o *Op) UnmarshalCBOR(b []byte) error {
	d := opDecoder{b: b}
	*o = d.op()
	return d.end()
}

// opDecoder reads an op from b, consuming it; the first error stops it.
// held, when set, says which ops the receiver holds already: those are
// skimmed (op).
type opDecoder struct {
	b    []byte
	err  error
	held func(writer string, seq uint64) bool
}

// end is the decoder's error, or one for bytes left after the item.
func (d *opDecoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	return d.err
}

func (d *opDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("cbor: op: %s", what)
	}
	d.b = nil
}

// head consumes a head of major type want and returns its argument.
func (d *opDecoder) head(want byte, what string) uint64 {
	major, n, hl, ok := head(d.b)
	if !ok || major != want {
		d.fail(what)
		return 0
	}
	d.b = d.b[hl:]
	return n
}

// item consumes one string item (text or bytes) and returns it whole.
func (d *opDecoder) item(what string) []byte {
	major, n, hl, ok := head(d.b)
	if !ok || uint64(len(d.b)-hl) < n {
		d.fail(what)
		return nil
	}
	switch major {
	case 2, 3:
		it := d.b[:hl+int(n)]
		d.b = d.b[hl+int(n):]
		return it
	case 4: // a packed key: n strings
		if n > maxKeyParts {
			d.fail(what)
			return nil
		}
		size := hl
		for range int(n) {
			_, m, phl, ok := head(d.b[size:])
			if !ok || uint64(len(d.b)-size-phl) < m {
				d.fail(what)
				return nil
			}
			size += phl + int(m)
		}
		it := d.b[:size]
		d.b = d.b[size:]
		return it
	}
	d.fail(what)
	return nil
}

func (d *opDecoder) text(what string) string {
	it := d.item(what)
	if d.err != nil {
		return ""
	}
	if it[0]>>5 != 3 {
		d.fail(what)
		return ""
	}
	_, _, hl, _ := head(it)
	if !utf8.Valid(it[hl:]) {
		d.fail(what)
		return ""
	}
	return string(it[hl:])
}

func (d *opDecoder) id(what string) string {
	s, err := decodeID(d.item(what))
	if err != nil {
		d.fail(what)
	}
	return s
}

// key consumes a key item; op decodes it at its end, once the op's
// writer is known, since a part may stand for the writer.
func (d *opDecoder) key(what string) []byte {
	return d.item(what)
}

func (d *opDecoder) bool(what string) bool {
	if len(d.b) == 0 || (d.b[0] != 0xf4 && d.b[0] != 0xf5) {
		d.fail(what)
		return false
	}
	v := d.b[0] == 0xf5
	d.b = d.b[1:]
	return v
}

// count reads an array head whose every element takes a byte at least:
// a count past what is left fails before anything is allocated for it.
func (d *opDecoder) count(what string) int {
	n := d.head(4, what)
	if d.err != nil || n > uint64(len(d.b)) {
		d.fail(what)
		return 0
	}
	return int(n)
}

// bytes reads a byte string as the codec reads one into a []byte: a copy,
// empty but not nil when the string is.
func (d *opDecoder) bytes(what string) []byte {
	it := d.item(what)
	if d.err != nil || it[0]>>5 != 2 {
		d.fail(what)
		return nil
	}
	_, _, hl, _ := head(it)
	return append([]byte{}, it[hl:]...)
}

// fields reads a map head and returns its size; seen tracks the keys of
// the map (1 to max), each allowed once.
func (d *opDecoder) field(seen *uint16, max uint64) uint64 {
	k := d.head(0, "field key")
	if d.err == nil && (k == 0 || k > max || *seen&(1<<k) != 0) {
		d.fail(fmt.Sprintf("field %d unknown or repeated", k))
		return 0
	}
	*seen |= 1 << k
	return k
}

// op reads an op. An op the receiver holds (d.held, asked once its
// writer and seq are read: the encoder writes them first) is skimmed:
// its other fields are read for their shape only (skimRest), without
// the strings, the signature's copy and the keys' decoding that a
// duplicate would only throw away, and it comes back marked Held. In the
// fifty-process burst four in five ops received were duplicates.
func (d *opDecoder) op() (o Op) {
	var seen uint16
	var key []byte
	var keys [][]byte // of the batch's writes
	for n := d.head(5, "not a map"); n > 0 && d.err == nil; n-- {
		switch d.field(&seen, 8) {
		case 1:
			o.Writer = d.id("writer")
		case 2:
			o.Seq = d.head(0, "seq")
			if d.err == nil && d.held != nil && seen&(1<<1) != 0 && o.Writer != "" && d.held(o.Writer, o.Seq) {
				o.HLC, o.Held = d.skimRest(&seen, n-1), true
				return o
			}
		case 3:
			o.HLC = d.hlc()
		case 4:
			key = d.key("key")
		case 5:
			o.Value = d.text("value")
		case 6:
			o.Delete = d.bool("delete")
		case 7:
			if sig := d.bytes("sig"); len(sig) > 0 { // an empty one is none, as omitempty writes it
				o.Sig = sig
			}
		case 8:
			n := d.batchLen()
			if d.err == nil && n > 0 {
				o.Batch, keys = make([]Write, 0, n), make([][]byte, 0, n)
			}
			for ; n > 0 && d.err == nil; n-- {
				w, k := d.write(false)
				o.Batch = append(o.Batch, w)
				keys = append(keys, k)
			}
		}
	}
	if d.err != nil {
		return o
	}
	var err error
	if key != nil {
		if o.Key, err = decodeKey(key, o.Writer); err == errUnresolved {
			o.Unresolved = true
		} else if err != nil {
			d.fail("key")
		}
	}
	for i, k := range keys {
		if o.Batch[i].Key, err = decodeKey(k, o.Writer); err == errUnresolved {
			o.Unresolved = true
		} else if err != nil {
			d.fail("batch key")
		}
	}
	return o
}

// skimRest reads the n fields left of a held op's map, each known and
// at most once as op reads them, and checks each value's kind but not
// its contents (text is not checked for UTF-8, keys are not decoded);
// it keeps only the op's clock.
func (d *opDecoder) skimRest(seen *uint16, n uint64) (h HLC) {
	for ; n > 0 && d.err == nil; n-- {
		switch d.field(seen, 8) { // writer and seq are seen: again fails
		case 3:
			h = d.hlc()
		case 4:
			d.item("key")
		case 5:
			d.skimText("value")
		case 6:
			d.bool("delete")
		case 7:
			if it := d.item("sig"); d.err == nil && it[0]>>5 != 2 {
				d.fail("sig")
			}
		case 8:
			for c := d.batchLen(); c > 0 && d.err == nil; c-- {
				d.write(true)
			}
		}
	}
	return h
}

// batchLen reads the head of an op's batch: at most MaxBatch writes.
func (d *opDecoder) batchLen() int {
	n := d.count("batch")
	if n > MaxBatch {
		d.fail("batch too long")
	}
	return n
}

// skimText consumes a text item without checking its UTF-8.
func (d *opDecoder) skimText(what string) {
	if it := d.item(what); d.err == nil && it[0]>>5 != 3 {
		d.fail(what)
	}
}

func (d *opDecoder) hlc() (h HLC) {
	var seen uint16
	for n := d.head(5, "hlc"); n > 0 && d.err == nil; n-- {
		switch d.field(&seen, 2) {
		case 1:
			major, v, hl, ok := head(d.b)
			if !ok || major > 1 || v > math.MaxInt64 {
				d.fail("hlc wall")
				return h
			}
			d.b = d.b[hl:]
			h.Wall = int64(v)
			if major == 1 {
				h.Wall = -1 - int64(v)
			}
		case 2:
			v := d.head(0, "hlc logical")
			if v > math.MaxUint32 {
				d.fail("hlc logical")
			}
			h.Logical = uint32(v)
		}
	}
	return h
}

// write reads a batch write; its key comes back raw (see key). With
// skim its value is read for its kind only (a held op's, skimRest).
func (d *opDecoder) write(skim bool) (w Write, key []byte) {
	var seen uint16
	for n := d.head(5, "batch write"); n > 0 && d.err == nil; n-- {
		switch d.field(&seen, 3) {
		case 1:
			key = d.key("batch key")
		case 2:
			if skim {
				d.skimText("batch value")
			} else {
				w.Value = d.text("batch value")
			}
		case 3:
			w.Delete = d.bool("batch delete")
		}
	}
	if d.err == nil && key == nil {
		d.fail("batch write without a key")
	}
	return w, key
}

// MarshalCBOR writes an id whose writer is a canonical id as an array of
// the writer's short form and the seq (Short ids, above), any other as a
// map of the writer as text and the seq.
func (id OpID) MarshalCBOR() ([]byte, error) {
	return id.appendCBOR(make([]byte, 0, 20)), nil
}

// appendCBOR appends id's encoding (MarshalCBOR) to b.
func (id OpID) appendCBOR(b []byte) []byte {
	if raw, ok := packHex(id.Writer); ok {
		b = appendShortID(append(b, 0x82), raw, id.Writer)
		return appendHead(b, 0, id.Seq)
	}
	b = appendText(append(b, 0xa2, 1), id.Writer)
	return appendHead(append(b, 2), 0, id.Seq)
}

// UnmarshalCBOR decodes an announced id: the short form, whose writer is
// "" when this process cannot resolve it, or a map of the writer, packed
// or as text (by hand, as Op's: an ihave carries up to MaxOpIDs of them).
func (id *OpID) UnmarshalCBOR(b []byte) error {
	d := opDecoder{b: b}
	*id = d.opID()
	return d.end()
}

// opID consumes one announced id (OpID.UnmarshalCBOR).
func (d *opDecoder) opID() (id OpID) {
	if len(d.b) > 0 && d.b[0]>>5 == 4 {
		if d.head(4, "op id: not an array") != 2 {
			d.fail("op id: an array of 2")
		}
		p := d.item("op id short writer")
		if d.err == nil && (len(p) != 1+shortIDBytes || p[0] != 0x40|shortIDBytes) {
			d.fail("op id short writer: a byte string of 8")
		}
		id.Seq = d.head(0, "op id seq")
		if d.err == nil {
			id.Writer = resolveShort(p[1:])
		}
		return id
	}
	var seen uint16
	for n := d.head(5, "op id: not a map"); n > 0 && d.err == nil; n-- {
		switch d.field(&seen, 2) {
		case 1:
			id.Writer = d.id("op id writer")
		case 2:
			id.Seq = d.head(0, "op id seq")
		}
	}
	return id
}

// MarshalCBOR writes a heartbeat as the map of its writer (packed), seq
// and signature (a nil one as null), by hand: every node writes and reads
// its neighbours' heartbeats every second (overlayframe.go).
func (h *Heartbeat) MarshalCBOR() ([]byte, error) {
	return h.appendCBOR(make([]byte, 0, 48+len(h.Sig))), nil
}

// appendCBOR appends what MarshalCBOR writes to b.
func (h *Heartbeat) appendCBOR(b []byte) []byte {
	b = appendID(append(b, 0xa3, 1), h.Writer)
	b = appendHead(append(b, 2), 0, h.Seq)
	b = append(b, 3)
	if h.Sig == nil {
		return append(b, 0xf6)
	}
	return append(appendHead(b, 2, uint64(len(h.Sig))), h.Sig...)
}

func (h *Heartbeat) UnmarshalCBOR(b []byte) error {
	d := opDecoder{b: b}
	*h = d.heartbeat()
	return d.end()
}

// heartbeat consumes one heartbeat (Heartbeat.MarshalCBOR's map; each
// field at most once, a null signature none).
func (d *opDecoder) heartbeat() (h Heartbeat) {
	var seen uint16
	for n := d.head(5, "heartbeat: not a map"); n > 0 && d.err == nil; n-- {
		switch d.field(&seen, 3) {
		case 1:
			h.Writer = d.id("heartbeat writer")
		case 2:
			h.Seq = d.head(0, "heartbeat seq")
		case 3:
			if len(d.b) > 0 && d.b[0] == 0xf6 {
				d.b = d.b[1:]
			} else {
				h.Sig = d.bytes("heartbeat sig")
			}
		}
	}
	return h
}

type suspicionWire struct {
	Writer packedID `cbor:"1,keyasint"`
	By     packedID `cbor:"2,keyasint"`
	At     uint64   `cbor:"3,keyasint"`
	Seq    uint64   `cbor:"4,keyasint,omitempty"`
	Sig    []byte   `cbor:"5,keyasint"`
}

func (s *Suspicion) MarshalCBOR() ([]byte, error) {
	return encMode.Marshal(suspicionWire{packedID(s.Writer), packedID(s.By), s.At, s.Seq, s.Sig})
}

func (s *Suspicion) UnmarshalCBOR(b []byte) error {
	var w suspicionWire
	err := decMode.Unmarshal(b, &w)
	*s = Suspicion{Writer: string(w.Writer), By: string(w.By), At: w.At, Seq: w.Seq, Sig: w.Sig}
	return err
}

// MarshalCBOR encodes vv as a map from packed ids to seqs, its keys in
// bytewise order of their encodings (deterministic CBOR).
func (vv VersionVector) MarshalCBOR() ([]byte, error) {
	if vv == nil {
		return []byte{0xf6}, nil // null, as for any nil map
	}
	type entry struct {
		key []byte
		seq uint64
	}
	es := make([]entry, 0, len(vv))
	for w, n := range vv {
		es = append(es, entry{appendID(nil, w), n})
	}
	slices.SortFunc(es, func(a, b entry) int { return bytes.Compare(a.key, b.key) })
	b := appendHead(make([]byte, 0, len(vv)*(idBytes+8)+9), 5, uint64(len(vv)))
	for _, e := range es {
		b = appendHead(append(b, e.key...), 0, e.seq)
	}
	return b, nil
}

// IsZero reports an empty vector, which a field tagged omitzero leaves
// out (the codec's omitempty never counts a type with its own encoder as
// empty).
func (vv VersionVector) IsZero() bool { return len(vv) == 0 }

// UnmarshalCBOR decodes a vector whose ids are packed or text.
func (vv *VersionVector) UnmarshalCBOR(b []byte) error {
	if len(b) == 1 && b[0] == 0xf6 {
		*vv = nil
		return nil
	}
	var m map[packedID]uint64
	if err := decMode.Unmarshal(b, &m); err != nil {
		return err
	}
	out := make(VersionVector, len(m))
	for w, n := range m {
		if _, dup := out[string(w)]; dup {
			// The same id packed and as text: one writer named twice.
			return errors.New("cbor: a version vector names a writer twice")
		}
		out[string(w)] = n
	}
	*vv = out
	return nil
}
