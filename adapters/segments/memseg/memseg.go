// Package memseg is an in-memory segment store for tests and single-process
// development servers. Bytes and publications live in process memory and
// vanish with it, which SPEC §5.1 allows: segments are cache entries.
package memseg

import (
	"bytes"
	"context"
	"io"
	"sync"

	"github.com/syncd-dev/syncd/adapters/segments/internal/catalog"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Store is an in-memory ports.SegmentStore. It is safe for concurrent use.
type Store struct {
	mu    sync.RWMutex
	cat   *catalog.Catalog
	bytes map[string][]byte
}

var (
	_ ports.SegmentStore       = (*Store)(nil)
	_ ports.SegmentStatsReader = (*Store)(nil)
)

// New returns an empty store.
func New() *Store { return &Store{cat: catalog.New(), bytes: map[string][]byte{}} }

// Put implements ports.SegmentPublisher.
func (s *Store) Put(_ context.Context, b []byte, p ports.SegmentPublication) (ports.SegmentPublication, error) {
	if err := catalog.Check(b, p); err != nil {
		return ports.SegmentPublication{}, err
	}
	p.ByteLength = int64(len(b))
	s.mu.Lock()
	defer s.mu.Unlock()
	if stored, ok := s.bytes[p.SegmentID]; ok {
		if err := catalog.SameBytes(stored, b); err != nil {
			return ports.SegmentPublication{}, err
		}
	} else {
		s.bytes[p.SegmentID] = bytes.Clone(b)
	}
	return s.cat.Publish(p), nil
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
	s.mu.RLock()
	b, ok := s.bytes[id]
	s.mu.RUnlock()
	if !ok {
		return nil, 0, syncerr.New(syncerr.NotFound).WithMessage("segment not found")
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

// Sweep implements ports.SegmentSweeper.
func (s *Store) Sweep(_ context.Context, beforeMs int64) (ports.SegmentSweep, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, _, emptied := s.cat.Sweep(beforeMs)
	for _, id := range emptied {
		delete(s.bytes, id)
	}
	return ports.SegmentSweep{Publications: n, Segments: int64(len(emptied))}, nil
}

// SegmentStats implements ports.SegmentStatsReader.
func (s *Store) SegmentStats(_ context.Context, nowMs int64) (ports.SegmentStats, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cat.Stats(nowMs), nil
}
