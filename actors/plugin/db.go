package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"unicode/utf8"

	"peerdns/internal/store"
)

// A plugin's own database: a buntdb file DATA/plugin-data/<domain>/data.db
// (store.DB), opened for plugins whose manifest says database: true. The
// handler reaches it only through db.get/put/delete/list on its own
// session, so it can neither name another plugin's file nor the node's
// stores. Keys are 1..1024 bytes; a value is any JSON up to 1 MiB; the
// keys and values of one plugin, each key counting KeyOverhead bytes
// more, add up to at most MaxDBBytes (a put past that fails with
// "database full"; deletes make room). The charge per key is what an
// entry costs the node beyond its bytes (about 94 bytes of memory, the
// whole database being held in memory, and 30 of file per write): without
// it, 64 MiB of one-byte entries were ten million of them, a gigabyte of
// the node's memory.
//
// The file on disk is buntdb's log: every put and delete appends to it,
// so rewriting one key in a loop grows it without growing the data.
// Before each write the file is measured, and one that passed twice the
// data (as counted for the quota) plus ShrinkSlack is shrunk (rewritten
// to hold only the live data) first, while that plugin's writes wait. So
// the file never passes 2×data + ShrinkSlack + one write (a key, a 1 MiB
// value and 64 bytes of framing): 137 MiB and 1 KiB for a full
// database; during a shrink a copy of the live data (at most the data)
// sits beside it as data.db.shrink (fsynced before it replaces the file:
// see internal/store on shrinking). A shrink that fails (no room for the
// copy) fails the write with the reason, so the file does not grow on.
// The store's automatic shrink (once a second, when the file passed 32
// MiB and doubled) is off for these files: a plugin writing 1 MiB values
// in a loop grew the file by 50 MiB a second between its checks. The
// price of the rule is a shrink (writing and fsyncing the live data
// once) each time a plugin has written about its data's size plus
// ShrinkSlack since the last one, which only a plugin that rewrites most
// of its data keeps paying.
//
// db.list {prefix, after, limit} answers the keys with the prefix in
// order, those after the key "after" when it is given, at most limit of
// them when it is over 0; an answer whose keys (as sent: a control byte
// is six bytes in JSON) and values add up to more than MaxListBytes is refused with an error that says to page, so one
// call cannot make the node copy and send the whole database (64 calls
// of a full database at once were 4 GiB). The keys are read in place
// (store.Ascend) from the first one after "after", and the reading
// stops at the limit or at MaxListBytes: a page costs the node that
// page, not a list of every key with the prefix (half a million of
// them in a full database of small entries).

// MaxDBBytes caps one plugin's data.
const MaxDBBytes = 64 << 20

// KeyOverhead is what each key counts towards MaxDBBytes beyond its
// bytes and its value's.
const KeyOverhead = 128

const (
	maxKey   = 1024
	maxValue = 1 << 20
	// maxWrite bounds what one put appends to the file.
	maxWrite = maxKey + maxValue + 64
)

// ShrinkSlack is what a plugin's database file may hold beyond twice its
// data before it is shrunk (see the package doc on the file's size).
const ShrinkSlack = 8 << 20

// maxFileSize is the most a database file holding used bytes of data
// (counted as for the quota) can reach: it is shrunk before a write
// when over 2*used+ShrinkSlack, and a write appends at most maxWrite.
func maxFileSize(used int64) int64 { return 2*used + ShrinkSlack + maxWrite }

// MaxListBytes bounds the keys and values of one db.list answer.
const MaxListBytes = 4 << 20

type pluginDB struct {
	db    *store.DB
	log   *slog.Logger
	mu    sync.Mutex // guards used (writes, and the shrinks before them, are serialised by it too)
	used  int64
	quota int64 // MaxDBBytes
}

func openDB(path string, log *slog.Logger) (*pluginDB, error) {
	if err := regularOrMissing(path); err != nil {
		return nil, err
	}
	db, err := store.Open(path, store.Options{Log: log, ManualShrink: true})
	if err != nil {
		return nil, err
	}
	kvs, err := db.List("")
	if err != nil {
		db.Close()
		return nil, err
	}
	p := &pluginDB{db: db, log: log, quota: MaxDBBytes}
	for _, kv := range kvs {
		p.used += int64(len(kv.Key) + len(kv.Value) + KeyOverhead)
	}
	if err := p.bound(); err != nil {
		// Not fatal: the data is whole; the next write tries again.
		log.Warn("plugin database file could not be shrunk", "file", path, "err", err)
	}
	return p, nil
}

// regularOrMissing refuses a database file that is there but not a
// regular file: the store's open of a FIFO (which a handler can rename
// over its data.db while it runs) would hold the supervisor until
// someone writes to it (openRegular).
func regularOrMissing(path string) error {
	f, err := openRegular(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// bound shrinks the file when it passed twice the data plus ShrinkSlack
// (see the package doc); the caller holds mu and writes only on nil.
func (p *pluginDB) bound() error {
	size := p.db.FileSize()
	if size <= 2*p.used+ShrinkSlack {
		return nil
	}
	if err := p.db.Shrink(); err != nil {
		return fmt.Errorf("database file is %d MiB and could not be shrunk: %w", size>>20, err)
	}
	return nil
}

func (p *pluginDB) close() error { return p.db.Close() }

type dbKey struct {
	Key string `json:"key"`
}

type dbPut struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

type dbList struct {
	Prefix string `json:"prefix"`
	After  string `json:"after"`
	Limit  int    `json:"limit"`
}

type dbItem struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

func checkKey(k string) error {
	if k == "" || len(k) > maxKey {
		return fmt.Errorf("key must be 1..%d bytes", maxKey)
	}
	return nil
}

// call answers one db.* request.
func (p *pluginDB) call(method string, params json.RawMessage) (any, error) {
	switch method {
	case "db.get":
		var r dbKey
		if err := json.Unmarshal(params, &r); err != nil {
			return nil, fmt.Errorf("db.get: %v", err)
		}
		if err := checkKey(r.Key); err != nil {
			return nil, err
		}
		v, err := p.db.Get(r.Key)
		if errors.Is(err, store.ErrNotFound) {
			return map[string]any{"value": nil}, nil
		}
		if err != nil {
			return nil, err
		}
		return map[string]any{"value": json.RawMessage(v)}, nil
	case "db.put":
		var r dbPut
		if err := json.Unmarshal(params, &r); err != nil {
			return nil, fmt.Errorf("db.put: %v", err)
		}
		if err := checkKey(r.Key); err != nil {
			return nil, err
		}
		if len(r.Value) == 0 || !json.Valid(r.Value) {
			return nil, errors.New("db.put: value must be JSON")
		}
		if len(r.Value) > maxValue {
			return nil, fmt.Errorf("db.put: value over %d bytes", maxValue)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		old, err := p.db.Get(r.Key)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		delta := int64(len(r.Value))
		if err == nil {
			delta -= int64(len(old))
		} else {
			delta += int64(len(r.Key) + KeyOverhead)
		}
		if delta > 0 && p.used+delta > p.quota {
			return nil, fmt.Errorf("database full (%d MiB per plugin, each key counting %d bytes more)", p.quota>>20, KeyOverhead)
		}
		if err := p.bound(); err != nil {
			return nil, err
		}
		if err := p.db.Set(r.Key, string(r.Value)); err != nil {
			return nil, err
		}
		p.used += delta
		return map[string]any{}, nil
	case "db.delete":
		var r dbKey
		if err := json.Unmarshal(params, &r); err != nil {
			return nil, fmt.Errorf("db.delete: %v", err)
		}
		if err := checkKey(r.Key); err != nil {
			return nil, err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		old, err := p.db.Get(r.Key)
		if errors.Is(err, store.ErrNotFound) {
			return map[string]any{}, nil
		}
		if err != nil {
			return nil, err
		}
		if err := p.bound(); err != nil {
			return nil, err
		}
		if err := p.db.Delete(r.Key); err != nil {
			return nil, err
		}
		p.used -= int64(len(r.Key) + len(old) + KeyOverhead)
		return map[string]any{}, nil
	case "db.list":
		var r dbList
		if len(params) > 0 {
			if err := json.Unmarshal(params, &r); err != nil {
				return nil, fmt.Errorf("db.list: %v", err)
			}
		}
		out := []dbItem{}
		size := 0
		err := p.db.Ascend(r.Prefix, r.After, func(k, v string) bool {
			if r.Limit > 0 && len(out) == r.Limit {
				return false
			}
			if size += sentLen(k) + len(v); size > MaxListBytes {
				return false
			}
			out = append(out, dbItem{Key: k, Value: json.RawMessage(v)})
			return true
		})
		if err != nil {
			return nil, err
		}
		if size > MaxListBytes {
			return nil, fmt.Errorf("db.list: the answer is over %d MiB; ask for fewer keys with limit, and the next ones with after", MaxListBytes>>20)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown method %q", method)
}

// sentLen is at most what the string s takes in a line to the handler
// (marshal): a control byte, U+2028, U+2029 or a byte that is not
// UTF-8 is six bytes there, a quote or a backslash two.
func sentLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"' || r == '\\':
			n += 2
		case r < 0x20 || r == 0x2028 || r == 0x2029 || r == utf8.RuneError && size == 1:
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}
