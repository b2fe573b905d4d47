// Package memlease is an in-memory auth-lease store (ports.LeaseStore)
// for tests and servers whose storage is not an SQL engine. Leases vanish
// with the process: every client then needs a live-resolved round before
// an outage can be served again.
package memlease

import (
	"bytes"
	"context"
	"sync"

	"github.com/syncd-dev/syncd/domain/lease"
	"github.com/syncd-dev/syncd/ports"
)

// Store is an in-memory ports.LeaseStore. It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	leases  map[key]lease.Stored
	revoked map[key]int64 // (partition, lease id) → revoked at (ms)
	now     func() int64
}

type key struct{ a, b string }

var _ ports.LeaseStore = (*Store)(nil)

// New returns an empty store that stamps revocations at 0 (pruning then
// treats them as old).
func New() *Store { return NewWithClock(nil) }

// NewWithClock returns an empty store stamping revocations with now
// (unix milliseconds).
func NewWithClock(now func() int64) *Store {
	if now == nil {
		now = func() int64 { return 0 }
	}
	return &Store{leases: map[key]lease.Stored{}, revoked: map[key]int64{}, now: now}
}

// GetLease implements ports.LeaseStore.
func (s *Store) GetLease(_ context.Context, partition, clientID string) (*lease.Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.leases[key{partition, clientID}]
	if !ok {
		return nil, nil
	}
	out := clone(st)
	_, listed := s.revoked[key{partition, st.LeaseID}]
	out.Revoked = out.Revoked || listed
	return &out, nil
}

// PutLease implements ports.LeaseStore.
func (s *Store) PutLease(_ context.Context, prev *lease.Stored, next lease.Stored) (bool, error) {
	k := key{next.Partition, next.ClientID}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, listed := s.revoked[key{next.Partition, next.LeaseID}]; listed {
		return false, nil
	}
	cur, ok := s.leases[k]
	switch {
	case prev == nil && ok:
		return false, nil
	case prev != nil && (!ok || cur.LeaseID != prev.LeaseID || cur.Revoked != prev.Revoked || !bytes.Equal(cur.Signature, prev.Signature)):
		return false, nil
	}
	next.Revoked = false
	s.leases[k] = clone(next)
	return true, nil
}

// RevokeLease implements ports.LeaseStore.
func (s *Store) RevokeLease(_ context.Context, partition, leaseID string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, listed := s.revoked[key{partition, leaseID}]; !listed {
		s.revoked[key{partition, leaseID}] = s.now()
	}
	found := false
	for k, st := range s.leases {
		if k.a == partition && st.LeaseID == leaseID {
			st.Revoked = true
			s.leases[k] = st
			found = true
		}
	}
	return found, nil
}

// PruneLeases implements ports.LeaseStore.
func (s *Store) PruneLeases(_ context.Context, q ports.LeasePrune) (ports.LeasePruneCounts, error) {
	var out ports.LeasePruneCounts
	if q.Limit <= 0 {
		return out, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, st := range s.leases {
		if out.Leases == q.Limit {
			out.MayHaveMore = true
			break
		}
		if st.ExpiresAtMs < q.ExpiredBeforeMs {
			delete(s.leases, k)
			out.Leases++
		}
	}
	carried := map[key]bool{}
	for k, st := range s.leases {
		carried[key{k.a, st.LeaseID}] = true
	}
	for k, at := range s.revoked {
		if out.Revocations == q.Limit {
			out.MayHaveMore = true
			break
		}
		if at < q.RevokedBeforeMs && !carried[k] {
			delete(s.revoked, k)
			out.Revocations++
		}
	}
	return out, nil
}

func clone(st lease.Stored) lease.Stored {
	st.AllowedScopes = st.AllowedScopes.Clone()
	st.Signature = bytes.Clone(st.Signature)
	return st
}
