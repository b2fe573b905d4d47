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
	revoked map[key]bool // (partition, lease id)
}

type key struct{ a, b string }

var _ ports.LeaseStore = (*Store)(nil)

// New returns an empty store.
func New() *Store { return &Store{leases: map[key]lease.Stored{}, revoked: map[key]bool{}} }

// GetLease implements ports.LeaseStore.
func (s *Store) GetLease(_ context.Context, partition, clientID string) (*lease.Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.leases[key{partition, clientID}]
	if !ok {
		return nil, nil
	}
	out := clone(st)
	out.Revoked = out.Revoked || s.revoked[key{partition, st.LeaseID}]
	return &out, nil
}

// PutLease implements ports.LeaseStore.
func (s *Store) PutLease(_ context.Context, prev *lease.Stored, next lease.Stored) (bool, error) {
	k := key{next.Partition, next.ClientID}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.revoked[key{next.Partition, next.LeaseID}] {
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
	s.revoked[key{partition, leaseID}] = true
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

func clone(st lease.Stored) lease.Stored {
	st.AllowedScopes = st.AllowedScopes.Clone()
	st.Signature = bytes.Clone(st.Signature)
	return st
}
