// Package fsseg is a segment store in a filesystem directory.
//
// Layout under the root:
//
//	objects/<2 hex>/<64 hex>       the uncompressed segment bytes
//	publications/<2 hex>/<64 hex>.json  the segment's publication list
//
// Every file is written to a temporary name in its final directory and
// renamed into place, so readers never see a partial file and a crash
// leaves at most a stray temporary or bytes without a record (both removed
// at the next Open). The bytes
// file is immutable once written; the publication list is a separate
// mutable record (SPEC §5.1: a store must not keep the record inside the
// bytes object).
//
// Publications are also held in memory for reuse lookups; the store
// loads them at Open. One process owns a directory: writers inside it are
// serialized by the store, separate processes sharing a directory are not
// supported.
package fsseg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/syncd-dev/syncd/adapters/segments/internal/catalog"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

const (
	objectsDir = "objects"
	pubsDir    = "publications"
	tmpPrefix  = ".tmp-"
)

// Options configure a Store.
type Options struct {
	// Dir is the root directory; it is created when missing.
	Dir string
}

// Store is a filesystem ports.SegmentStore. It is safe for concurrent use.
type Store struct {
	dir string
	mu  sync.RWMutex
	cat *catalog.Catalog
}

var (
	_ ports.SegmentStore       = (*Store)(nil)
	_ ports.SegmentStatsReader = (*Store)(nil)
)

// Open opens (creating) the store at o.Dir and loads its publications.
func Open(o Options) (*Store, error) {
	if o.Dir == "" {
		return nil, errors.New("fsseg: Options.Dir is required")
	}
	s := &Store{dir: o.Dir, cat: catalog.New()}
	for _, d := range []string{objectsDir, pubsDir} {
		if err := os.MkdirAll(filepath.Join(o.Dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("fsseg: %w", err)
		}
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	if err := s.dropOrphans(); err != nil {
		return nil, err
	}
	return s, nil
}

// dropOrphans removes bytes without a publication record and stray
// temporaries: what a crash between the two writes of a Put leaves.
func (s *Store) dropOrphans() error {
	root := filepath.Join(s.dir, objectsDir)
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("fsseg: load: %w", err)
		}
		if d.IsDir() {
			return nil
		}
		id := contentaddr.Prefix + d.Name()
		if strings.HasPrefix(d.Name(), tmpPrefix) || !contentaddr.Valid(id) || s.cat.Entry(id) == nil {
			_ = os.Remove(p)
		}
		return nil
	})
}

// record is the JSON form of one publication.
type record struct {
	Partition     string `json:"partition"`
	LogEpoch      string `json:"logEpoch"`
	Table         string `json:"table"`
	SchemaVersion int32  `json:"schemaVersion"`
	MediaType     uint8  `json:"mediaType"`
	ScopeDigest   string `json:"scopeDigest"`
	AsOfCommitSeq int64  `json:"asOfCommitSeq"`
	RowCursor     string `json:"rowCursor,omitempty"`
	PageSize      int    `json:"pageSize,omitempty"`
	NextRowCursor string `json:"nextRowCursor,omitempty"`
	RowCount      int64  `json:"rowCount"`
	ByteLength    int64  `json:"byteLength"`
	CreatedAtMs   int64  `json:"createdAtMs"`
	ExpiresAtMs   int64  `json:"expiresAtMs"`
}

type recordFile struct {
	SegmentID    string   `json:"segmentId"`
	Publications []record `json:"publications"`
}

func toRecord(p ports.SegmentPublication) record {
	return record{
		Partition: p.Partition, LogEpoch: p.LogEpoch, Table: p.Table, SchemaVersion: p.SchemaVersion,
		MediaType: uint8(p.MediaType), ScopeDigest: p.ScopeDigest, AsOfCommitSeq: p.AsOfCommitSeq,
		RowCursor: p.RowCursor, PageSize: p.PageSize, NextRowCursor: p.NextRowCursor,
		RowCount: p.RowCount, ByteLength: p.ByteLength, CreatedAtMs: p.CreatedAtMs, ExpiresAtMs: p.ExpiresAtMs,
	}
}

func fromRecord(id string, r record) ports.SegmentPublication {
	return ports.SegmentPublication{
		SegmentKey: ports.SegmentKey{
			Partition: r.Partition, LogEpoch: r.LogEpoch, Table: r.Table, SchemaVersion: r.SchemaVersion,
			MediaType: ports.SegmentMediaType(r.MediaType), ScopeDigest: r.ScopeDigest,
			AsOfCommitSeq: r.AsOfCommitSeq, RowCursor: r.RowCursor, PageSize: r.PageSize,
		},
		SegmentID: id, NextRowCursor: r.NextRowCursor, RowCount: r.RowCount, ByteLength: r.ByteLength,
		CreatedAtMs: r.CreatedAtMs, ExpiresAtMs: r.ExpiresAtMs,
	}
}

// path returns the file of id under kind; ok is false for a malformed id,
// so no request can name a path outside the store.
func (s *Store) path(kind, id string) (string, bool) {
	if !contentaddr.Valid(id) {
		return "", false
	}
	hex := id[len(contentaddr.Prefix):]
	name := hex
	if kind == pubsDir {
		name += ".json"
	}
	return filepath.Join(s.dir, kind, hex[:2], name), true
}

func (s *Store) load() error {
	root := filepath.Join(s.dir, pubsDir)
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("fsseg: load: %w", err)
		}
		if d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), tmpPrefix) {
			_ = os.Remove(p)
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("fsseg: load: %w", err)
		}
		var rf recordFile
		if err := json.Unmarshal(b, &rf); err != nil || !contentaddr.Valid(rf.SegmentID) {
			return fmt.Errorf("fsseg: load %s: malformed publication record", p)
		}
		obj, _ := s.path(objectsDir, rf.SegmentID)
		st, err := os.Stat(obj)
		if err != nil {
			// Bytes gone: the publications describe nothing servable.
			_ = os.Remove(p)
			return nil
		}
		e := catalog.Entry{ID: rf.SegmentID, Size: st.Size()}
		for _, r := range rf.Publications {
			e.Pubs = append(e.Pubs, fromRecord(rf.SegmentID, r))
		}
		s.cat.Add(e)
		return nil
	})
}

// writeAtomic writes b to path through a temporary file and a rename.
func writeAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

func (s *Store) writeRecord(id string) error {
	pubs := s.cat.Publications(id)
	p, _ := s.path(pubsDir, id)
	if len(pubs) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	rf := recordFile{SegmentID: id, Publications: make([]record, len(pubs))}
	for i, pub := range pubs {
		rf.Publications[i] = toRecord(pub)
	}
	b, err := json.Marshal(rf)
	if err != nil {
		return err
	}
	return writeAtomic(p, b)
}

// Put implements ports.SegmentPublisher.
func (s *Store) Put(_ context.Context, b []byte, p ports.SegmentPublication) (ports.SegmentPublication, error) {
	if err := catalog.Check(b, p); err != nil {
		return ports.SegmentPublication{}, err
	}
	p.ByteLength = int64(len(b))
	obj, _ := s.path(objectsDir, p.SegmentID)
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, err := os.ReadFile(obj)
	switch {
	case err == nil:
		if err := catalog.SameBytes(stored, b); err != nil {
			return ports.SegmentPublication{}, err
		}
	case errors.Is(err, fs.ErrNotExist):
		if err := writeAtomic(obj, b); err != nil {
			return ports.SegmentPublication{}, fmt.Errorf("fsseg: write segment: %w", err)
		}
	default:
		return ports.SegmentPublication{}, fmt.Errorf("fsseg: read segment: %w", err)
	}
	old := s.cat.Publications(p.SegmentID)
	stored2 := s.cat.Publish(p)
	if err := s.writeRecord(p.SegmentID); err != nil {
		// Keep memory and disk in step: forget the unrecorded publication.
		s.cat.Add(catalog.Entry{ID: p.SegmentID, Size: p.ByteLength, Pubs: old})
		return ports.SegmentPublication{}, fmt.Errorf("fsseg: write publications: %w", err)
	}
	return stored2, nil
}

// Find implements ports.SegmentPublisher.
func (s *Store) Find(_ context.Context, k ports.SegmentKey, nowMs int64) (ports.SegmentPublication, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.cat.Find(k, nowMs)
	return p, ok, nil
}

// Publications implements ports.SegmentSource.
func (s *Store) Publications(_ context.Context, id string) ([]ports.SegmentPublication, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cat.Publications(id), nil
}

// Open implements ports.SegmentSource.
func (s *Store) Open(_ context.Context, id string) (io.ReadCloser, int64, error) {
	p, ok := s.path(objectsDir, id)
	if !ok {
		return nil, 0, notFound()
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, notFound()
	}
	if err != nil {
		return nil, 0, fmt.Errorf("fsseg: open segment: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("fsseg: open segment: %w", err)
	}
	return f, st.Size(), nil
}

// Sweep implements ports.SegmentSweeper. A reader holding a file open
// keeps reading it after removal (POSIX semantics).
func (s *Store) Sweep(_ context.Context, beforeMs int64) (ports.SegmentSweep, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, changed, emptied := s.cat.Sweep(beforeMs)
	var errs []error
	for _, id := range changed {
		errs = append(errs, s.writeRecord(id))
	}
	for _, id := range emptied {
		pp, _ := s.path(pubsDir, id)
		op, _ := s.path(objectsDir, id)
		for _, f := range []string{pp, op} {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return ports.SegmentSweep{Publications: n, Segments: int64(len(emptied))}, fmt.Errorf("fsseg: sweep: %w", err)
	}
	return ports.SegmentSweep{Publications: n, Segments: int64(len(emptied))}, nil
}

func notFound() error { return syncerr.New(syncerr.NotFound).WithMessage("segment not found") }

// SegmentStats implements ports.SegmentStatsReader from the catalog held
// in memory (no directory walk).
func (s *Store) SegmentStats(_ context.Context, nowMs int64) (ports.SegmentStats, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cat.Stats(nowMs), nil
}
