package store

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Persistence of tier 1: the file format is in file.go; this file loads it
// at Open, appends closed minutes every flushEvery and compacts it.

// FileName is the tier-1 file inside Config.Dir.
const FileName = "tier1.dat"

// flushEvery is how often closed minutes are written and fsynced. A crash
// loses at most this much of tier 1 (tier 0 is memory only by design).
const flushEvery = 10 * time.Second

// load replays the tier-1 file. It reports whether the file should be
// rewritten (damaged tail, or much larger than the data it still holds).
func (db *DB) load(now time.Time) (needCompact bool, err error) {
	f, err := os.Open(db.path)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil // create it with a header
	}
	if err != nil {
		return false, fmt.Errorf("open tier-1 file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("stat tier-1 file: %w", err)
	}
	corrupt, live, err := db.replay(bufio.NewReaderSize(f, 1<<16), now)
	if err != nil {
		return false, err
	}
	return corrupt || st.Size() > live*3/2+256<<10, nil
}

// replay decodes a tier-1 stream into db.byID. It returns whether the
// stream ended in a damaged record and how many bytes of it are still
// useful. Only a wrong header is an error.
func (db *DB) replay(r *bufio.Reader, now time.Time) (corrupt bool, live int64, err error) {
	var magic [len(fileMagic)]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return true, 0, nil // empty or torn header: start over
	}
	if string(magic[:]) != fileMagic {
		return false, 0, fmt.Errorf("tier-1 file %s: not a peerdns tier-1 file", db.path)
	}
	cut := floorDiv(now.Unix(), minuteSecs) - int64(db.m) + 1
	byNum := map[uint32]*lockedSeries{}
	var payload []byte
	var acc []accum
	for {
		kind, p, n, err := readRecord(r, payload)
		if err == io.EOF {
			break
		}
		if err != nil {
			corrupt = true
			break
		}
		payload = p[:0]
		switch kind {
		case recChart:
			num, def, err := decodeChart(p)
			if err != nil {
				corrupt = true
				break
			}
			live += n
			if s := byNum[num]; s != nil {
				if s.sameDims(def) {
					s.def = def
				} else {
					s.reset(def)
				}
			} else {
				s := &lockedSeries{series: *newSeries(def, num, db.n, db.m, db.chunkLen)}
				s.persist = true
				byNum[num] = s
			}
			db.nextNum = max(db.nextNum, num+1)
		case recMinute:
			rec, err := decodeMinute(p, acc)
			if err != nil {
				corrupt = true
				break
			}
			acc = rec.acc
			s := byNum[rec.num]
			if s == nil || len(rec.acc) != s.ndims || rec.minute < cut {
				continue
			}
			live += n
			s.mergeMinute(rec.minute, rec.acc)
		default:
			corrupt = true
		}
		if corrupt {
			break
		}
	}
	for _, s := range byNum {
		s.pruneBefore(cut)
		s.sealOld()
		if s.t1Last < 0 {
			continue // nothing left in retention: forget the chart
		}
		s.defSent = true
		if old := db.byID[s.def.ID]; old == nil || old.num < s.num {
			db.byID[s.def.ID] = s
		}
	}
	return corrupt, live, nil
}

func (db *DB) openAppend() error {
	f, err := os.OpenFile(db.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open tier-1 file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat tier-1 file: %w", err)
	}
	db.fileMu.Lock()
	db.f, db.fileSize = f, st.Size()
	if db.compactSize == 0 {
		db.compactSize = st.Size()
	}
	db.fileMu.Unlock()
	return nil
}

// compact rewrites the tier-1 file from memory (every chart's definition
// and every minute in retention) and swaps it in with a rename.
func (db *DB) compact() error {
	db.fileMu.Lock()
	defer db.fileMu.Unlock()
	tmp := db.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("compact tier-1 file: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	size := int64(len(fileMagic))
	werr := func() error {
		if _, err := w.WriteString(fileMagic); err != nil {
			return err
		}
		var buf []byte
		for _, s := range db.allSeries() {
			s.mu.Lock()
			buf = appendChartRecord(buf[:0], s.num, s.def)
			s.defSent = true
			// Everything pending is already in the chunks written below.
			s.pending = s.pending[:0]
			if s.t1Last >= 0 {
				var vk int64
				var v *chunk
				for m := max(s.t1First, s.t1Cutoff()); m <= s.t1Last; m++ {
					key := floorDiv(m, int64(s.chunkLen))
					c := s.chunks[key]
					if c == nil {
						continue
					}
					if v == nil || vk != key {
						v, vk = c.view(), key
					}
					c = v
					buf, _ = appendChunkMinute(buf, s.num, m, c, s.ndims, int(m-key*int64(s.chunkLen)))
					if len(buf) > 1<<16 {
						if _, err := w.Write(buf); err != nil {
							s.mu.Unlock()
							return err
						}
						size += int64(len(buf))
						buf = buf[:0]
					}
				}
			}
			s.mu.Unlock()
			if _, err := w.Write(buf); err != nil {
				return err
			}
			size += int64(len(buf))
		}
		if err := w.Flush(); err != nil {
			return err
		}
		return f.Sync()
	}()
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, db.path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("compact tier-1 file: %w", werr)
	}
	syncDir(filepath.Dir(db.path))
	if db.f != nil {
		db.f.Close()
	}
	nf, err := os.OpenFile(db.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		db.f = nil
		return fmt.Errorf("reopen tier-1 file: %w", err)
	}
	db.f, db.fileSize, db.compactSize = nf, size, size
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// flush writes every chart's pending records and fsyncs.
func (db *DB) flush() error {
	db.fileMu.Lock()
	defer db.fileMu.Unlock()
	if db.f == nil {
		return nil
	}
	db.wbuf = db.wbuf[:0]
	for _, s := range db.allSeries() {
		s.mu.Lock()
		db.wbuf = append(db.wbuf, s.pending...)
		s.pending = s.pending[:0]
		s.mu.Unlock()
	}
	if len(db.wbuf) == 0 {
		return nil
	}
	n, err := db.f.Write(db.wbuf)
	db.fileSize += int64(n)
	if err != nil {
		return fmt.Errorf("write tier-1 file: %w", err)
	}
	if err := db.f.Sync(); err != nil {
		return fmt.Errorf("sync tier-1 file: %w", err)
	}
	return nil
}

// flusher writes closed minutes every flushEvery and compacts the file
// once it has doubled since the last compaction (old minutes and charts
// out of retention are then dropped from disk).
func (db *DB) flusher() {
	defer close(db.done)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-t.C:
		}
		// Errors here are retried on the next tick; Close reports them.
		_ = db.flush()
		db.fileMu.Lock()
		grow := db.fileSize > 2*db.compactSize+1<<20
		db.fileMu.Unlock()
		if grow {
			_ = db.compact()
		}
	}
}
